import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules

@Suite("The experiment: block and reports.retentionMonths in the pipeline file (docs/rules.md §9.1, §9.3)")
struct ExperimentConfigTests {
    static let minimal = PipelineText.minimal()

    static func parse(_ extra: String) -> (PipelineConfig?, [String]) {
        PipelineConfig.parse(minimal + extra, path: "/p/nightly.yaml")
    }

    static func block(name: String = "winback-2026h2", holdout: String = "10%", start: String = "2026-06-01") -> String
    {
        """
        experiment:
          name: \(name)
          holdout: \(holdout)
          start: \(start)

        """
    }

    // MARK: - Holdout

    @Test(
        "the holdout in basis points: a percentage with up to two decimals or a fraction with up to four",
        arguments: [
            ("10%", 1_000),
            ("2.5%", 250),
            ("0.1", 1_000),
            ("0.01%", 1),
            ("50%", 5_000),
            ("0.5", 5_000),
            ("0.0001", 1),
            ("0.025", 250),
            ("2.50%", 250),  // trailing zeros are no extra precision
            ("50.00%", 5_000),
            ("0.10000", 1_000),
            ("12.34%", 1_234),
        ])
    func basisPoints(text: String, expected: Int) {
        #expect(Experiment.basisPoints(text) == expected)
    }

    @Test(
        "a holdout of 0, above 50 %, finer than 0.01 % or not a number is refused",
        arguments: [
            "0%", "0", "0.0", "50.01%", "0.5001", "51%", "1", "100%", "0.00001", "2.505%", "0.00005", "abc", "-1%",
            "-0.1", "", "%", "10%%", "10 %", " 10%", "1e-1", ".5", "5.", "5.%", "+5%", "0,1", "١٠%",
        ])
    func invalidHoldout(text: String) {
        #expect(Experiment.basisPoints(text) == nil)
    }

    @Test(
        "the holdout as a percentage for messages",
        arguments: [(1_000, "10%"), (250, "2.5%"), (1, "0.01%"), (5_000, "50%"), (1_005, "10.05%"), (10, "0.1%")])
    func percent(basisPoints: Int, expected: String) {
        #expect(Experiment(name: "x", basisPoints: basisPoints, start: 0).percent == expected)
    }

    // MARK: - Name

    @Test(
        "a name is 1 to 64 of A-Z a-z 0-9 . _ -",
        arguments: [
            ("winback-2026h2", true),
            ("A.b_c-9", true),
            ("x", true),
            (String(repeating: "a", count: 64), true),
            (String(repeating: "a", count: 65), false),
            ("", false),
            ("has space", false),
            ("a/b", false),
            ("a:b", false),
            ("café", false),
            ("tab\there", false),
            ("new\nline", false),
        ])
    func names(name: String, valid: Bool) {
        #expect(Experiment.isValidName(name) == valid)
    }

    // MARK: - The block

    @Test("the block parses, with the start date unquoted")
    func parses() {
        let (c, problems) = Self.parse(Self.block())
        #expect(problems == [])
        #expect(c?.experiment == Experiment(name: "winback-2026h2", basisPoints: 1_000, start: ms("2026-06-01")))
    }

    @Test(
        "quoted or unquoted, as a percentage or a fraction",
        arguments: [
            ("Winback_2026.H2", "2.5%", "\"2026-06-01\"", 250),
            ("w", "0.1", "'2026-06-01'", 1_000),
            ("'123'", "\"50%\"", "2026-06-01", 5_000),
        ])
    func variants(name: String, holdout: String, start: String, basisPoints: Int) {
        let (c, problems) = Self.parse(Self.block(name: name, holdout: holdout, start: start))
        #expect(problems == [])
        #expect(c?.experiment?.basisPoints == basisPoints)
        #expect(c?.experiment?.start == ms("2026-06-01"))
    }

    @Test("without the block there is no experiment")
    func noBlock() {
        let (c, problems) = Self.parse("")
        #expect(problems == [])
        #expect(c?.experiment == nil)
        #expect(c?.retentionMonths == 24)
    }

    @Test(
        "each bad field is a problem naming it, and there is then no experiment",
        arguments: [
            (block(name: "winback 2026"), "field 'experiment.name': 'winback 2026' must match"),
            (block(name: String(repeating: "n", count: 65)), "field 'experiment.name':"),
            (block(holdout: "0%"), "field 'experiment.holdout': '0%' is not a share"),
            (block(holdout: "50.01%"), "field 'experiment.holdout': '50.01%'"),
            (block(holdout: "0.00001"), "field 'experiment.holdout': '0.00001'"),
            (block(holdout: "ten"), "field 'experiment.holdout': 'ten'"),
            (block(start: "2026-02-30"), "field 'experiment.start': '2026-02-30' is not a date"),
            (block(start: "June"), "field 'experiment.start': 'June' is not a date"),
            (block(start: "2026-06-01T00:00:00Z"), "field 'experiment.start':"),
            ("experiment:\n  holdout: 10%\n  start: 2026-06-01\n", "field 'experiment.name': required"),
            ("experiment:\n  name: x\n  start: 2026-06-01\n", "field 'experiment.holdout': required"),
            ("experiment:\n  name: x\n  holdout: 10%\n", "field 'experiment.start': required"),
            ("experiment:\n  name: x\n  holdout: 10%\n  start:\n", "field 'experiment.start': required"),
            ("experiment: yes\n", "field 'experiment': expected a mapping"),
            ("experiment: [a, b]\n", "field 'experiment': expected a mapping"),
            (block(holdout: "[10%]"), "field 'experiment.holdout': expected a single value"),
        ])
    func badField(yaml: String, problem: String) {
        let (c, problems) = Self.parse(yaml)
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.hasPrefix("/p/nightly.yaml: ") == true)
        #expect(problems.first?.contains(problem) == true, "\(problems)")
        #expect(c?.experiment == nil)
    }

    @Test("every bad field of the block is reported, each by name")
    func everyProblem() {
        let (_, problems) = Self.parse(Self.block(name: "a b", holdout: "60%", start: "2026-13-01"))
        #expect(problems.count == 3, "\(problems)")
        for field in ["experiment.name", "experiment.holdout", "experiment.start"] {
            #expect(problems.contains { $0.contains("field '\(field)'") }, "\(field): \(problems)")
        }
    }

    @Test("an unknown key in the block is a problem, with a hint for a near miss")
    func unknownKey() {
        let (_, problems) = Self.parse(Self.block() + "  holdOut: 5%\n")
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.contains("unknown key 'experiment.holdOut'") == true, "\(problems)")
        #expect(problems.first?.contains("did you mean 'experiment.holdout'?") == true, "\(problems)")
    }

    // MARK: - reports.retentionMonths

    @Test("reports.retentionMonths: 1 to 240, default 24", arguments: [1, 24, 25, 240])
    func retentionMonths(months: Int) {
        let (c, problems) = Self.parse("reports:\n  retentionMonths: \(months)\n")
        #expect(problems == [])
        #expect(c?.retentionMonths == months)
    }

    @Test(
        "reports.retentionMonths out of bounds or not a whole number is a problem naming it",
        arguments: [
            ("0", "must be 1–240, found 0"), ("241", "must be 1–240, found 241"), ("-3", "must be 1–240, found -3"),
            ("12.5", "expected a whole number, found '12.5'"), ("two", "expected a whole number, found 'two'"),
        ])
    func retentionMonthsBounds(value: String, why: String) {
        let (c, problems) = Self.parse("reports:\n  retentionMonths: \(value)\n")
        #expect(problems == ["/p/nightly.yaml: field 'reports.retentionMonths': \(why)"])
        #expect(c?.retentionMonths == 24)
    }

    @Test("retentionMonths sits beside windowMonths, each checked on its own")
    func besideWindowMonths() {
        let (c, problems) = Self.parse("reports:\n  windowMonths: 6\n  retentionMonths: 36\n")
        #expect(problems == [])
        #expect(c?.windowMonths == 6)
        #expect(c?.retentionMonths == 36)
        let (_, bad) = Self.parse("reports:\n  windowMonths: 0\n  retentionMonths: 0\n")
        #expect(bad.count == 2)
    }
}
