import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Pipeline file (docs/rules.md §2.5)")
struct PipelineConfigTests {
    static let minimal = PipelineText.minimal()

    @Test(
        "a pipeline file or catalog that is a folder or a FIFO is named for what it is (78), never read",
        .timeLimit(.minutes(1)))
    func configurationThatIsNoFile() throws {
        let dir = Paths.temporary() + "/config"
        try FileManager.default.createDirectory(atPath: dir + "/folder.yaml", withIntermediateDirectories: true)
        #expect(mkfifo(dir + "/fifo.yaml", 0o600) == 0)
        for (name, what) in [("folder.yaml", "a folder"), ("fifo.yaml", "a FIFO (named pipe)")] {
            let path = dir + "/" + name
            #expect {
                _ = try PipelineConfig.load(path: path)
            } throws: { e in
                (e as? WinBackError)?.code == .configuration && "\(e)" == "\(path): is \(what), not a pipeline file"
            }
            #expect {
                _ = try OfferCatalog.load(path: path)
            } throws: { e in
                (e as? WinBackError)?.code == .configuration
                    && "\(e)" == "\(path): is \(what), not an offer catalog"
            }
        }
        #expect {
            _ = try PipelineConfig.load(path: dir + "/missing.yaml")
        } throws: { e in "\(e)".hasSuffix("pipeline file is missing or unreadable") }
        // The run reads the catalog through its input stores, and validate too.
        for (name, what) in [("folder.yaml", "a folder"), ("fifo.yaml", "a FIFO (named pipe)")] {
            #expect {
                _ = try InputStores.contents(dir + "/" + name)
            } throws: { e in
                (e as? WinBackError)?.code == .configuration
                    && "\(e)" == "\(dir)/\(name): is \(what), not a regular file"
            }
        }
        #expect(try InputStores.contents(dir + "/missing.json") == nil)
    }

    @Test(
        "a name is 1 to 100 bytes of [a-z0-9-]: it names the output folder",
        arguments: [
            ("nightly-2", true), ("0", true), ("-", true), (String(repeating: "a", count: 100), true),
            (String(repeating: "a", count: 101), false), ("Nightly", false), ("night ly", false),
            ("night_ly", false), ("nuit-\u{E9}t\u{E9}", false), ("a/b", false), ("", false), ("a.b", false),
        ])
    func name(name: String, valid: Bool) {
        let text = Self.minimal.replacingOccurrences(of: "name: nightly", with: "name: \"\(name)\"")
        let (c, problems) = PipelineConfig.parse(text, path: "/p.yaml")
        if valid {
            #expect(problems == [])
            #expect(c?.name == name)
        } else {
            #expect(problems.count == 1)
            #expect(problems.first?.contains("name") == true, "\(problems)")
        }
    }

    @Test("defaults fill every optional key")
    func defaults() throws {
        let (c, problems) = PipelineConfig.parse(Self.minimal, path: "/srv/p/nightly.yaml")
        #expect(problems == [])
        #expect(c?.format == .appstoreNDJSON)
        #expect(c?.asOf == .today)
        #expect(c?.consecutiveGapDays == 60)
        #expect(c?.formats == ["csv", "xml"])
        #expect(c?.windowMonths == 12)
        #expect(c?.maxRejectedFraction == 0.001)
        #expect(c?.threads == nil)
        #expect(c?.inflater == .auto)
        #expect(c?.resolve("../Output") == "/srv/Output")
        #expect(c?.resolve("/abs/x") == "/abs/x")
    }

    @Test(
        "asOf works quoted or unquoted, as a date or an instant",
        arguments: [
            ("2026-11-22", PipelineConfig.AsOf.instant(ms("2026-11-22"))),
            ("\"2026-11-22\"", .instant(ms("2026-11-22"))),
            ("2026-11-22T06:00:00Z", .instant(ms("2026-11-22T06:00:00Z"))),
            ("'2026-11-22T06:00:00.250Z'", .instant(ms("2026-11-22T06:00:00.250Z"))),
            ("today", .today), ("now", .now),
        ])
    func asOf(text: String, expected: PipelineConfig.AsOf) {
        let (c, problems) = PipelineConfig.parse(Self.minimal + "\nasOf: \(text)\n", path: "/p.yaml")
        #expect(problems == [])
        #expect(c?.asOf == expected)
    }

    @Test("inflater names zlib, isal or auto; auto is ISA-L only where this machine has it")
    func inflater() {
        for choice in InflaterChoice.allCases {
            let (c, problems) = PipelineConfig.parse(Self.minimal + "\ninflater: \(choice.rawValue)\n", path: "/p.yaml")
            #expect(problems == [])
            #expect(c?.inflater == choice)
        }
        #expect(InflaterChoice.auto.resolved(isalAvailable: true) == .isal)
        #expect(InflaterChoice.auto.resolved(isalAvailable: false) == .zlib)
        #expect(InflaterChoice.isal.resolved(isalAvailable: false) == .isal)
        #expect(InflaterChoice.zlib.resolved(isalAvailable: true) == .zlib)
    }

    @Test("today is 00:00 UTC of the run's day")
    func today() {
        #expect(PipelineConfig.AsOf.today.resolve(now: ms("2026-11-22T23:59:00Z")) == ms("2026-11-22"))
    }

    @Test(
        "each mistake is reported with the field it concerns",
        arguments: [
            ("consecutiveGapDayz: 30", "consecutiveGapDayz"),
            ("threads: many", "threads"),
            ("threads: 0", "threads"),
            ("inflater: gzip", "inflater"),
            ("inflater: ISAL", "inflater"),
            ("asOf: yesterday", "asOf"),
            ("consecutiveGapDays: -1", "consecutiveGapDays"),
            ("reports:\n  windowMonth: 12", "reports.windowMonth"),
            ("limits:\n  maxRejectedFraction: 2", "maxRejectedFraction"),
            ("transactions:\n  format: parquet\n  paths: [a]", "transactions.format"),
            ("output:\n  directory: x\n  formats: [json]", "output.formats"),
        ])
    func mistakes(line: String, field: String) {
        // Later keys replace earlier ones in the minimal file where they clash.
        var text = Self.minimal
        if line.hasPrefix("transactions:") {
            text = text.replacingOccurrences(
                of: "transactions:\n  paths: [\"../Data/sample/transactions-*.jsonl.gz\"]\n", with: "")
        }
        if line.hasPrefix("output:") {
            text = text.replacingOccurrences(of: "output:\n  directory: ../Output", with: "")
        }
        let (_, problems) = PipelineConfig.parse(text + "\n" + line + "\n", path: "/p.yaml")
        #expect(problems.contains { $0.contains(field) }, "\(problems)")
    }

    @Test(
        "an asOf that names no day says why; one not written as a date lists the forms",
        arguments: [
            ("asOf: 2026-02-30", "field 'asOf': '2026-02-30' is not a date (February 2026 has 28 days)"),
            (
                "asOf: 2026-02-30T06:00:00Z",
                "field 'asOf': '2026-02-30T06:00:00Z' is not a date (February 2026 has 28 days)"
            ),
            ("asOf: 2026-2-3", "field 'asOf': '2026-2-3' is not today, now, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ"),
        ])
    func impossibleAsOf(line: String, problem: String) {
        let (_, problems) = PipelineConfig.parse(Self.minimal + "\n" + line + "\n", path: "/p.yaml")
        #expect(problems == ["/p.yaml: " + problem])
    }

    @Test(
        "limits.memory below 32 MB says so; text that is no size says what a size looks like",
        arguments: [
            ("8MB", "field 'limits.memory': '8MB' is below the 32 MB minimum"),
            ("30MiB", "field 'limits.memory': '30MiB' is below the 32 MB minimum"),
            ("lots", "field 'limits.memory': 'lots' is not a size such as 2GB, 512MB or 96MiB (at least 32 MB)"),
        ])
    func memoryLimit(value: String, problem: String) {
        let (_, problems) = PipelineConfig.parse(Self.minimal + "\nlimits:\n  memory: \(value)\n", path: "/p.yaml")
        #expect(problems == ["/p.yaml: " + problem])
    }

    @Test("--as-of naming no day is a usage error saying why")
    func impossibleAsOfOption() throws {
        let w = try Paths.copyFixture("golden")
        for (asOf, message) in [
            ("2026-02-30", "--as-of '2026-02-30' is not a date (February 2026 has 28 days)"),
            ("2026-2-3", "--as-of '2026-2-3' is not today, now, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ"),
        ] {
            #expect {
                _ = try ResolvedPipeline.resolve(RunOptions(pipelinePath: w + "/pipeline.yaml", asOf: asOf))
            } throws: { e in
                (e as? WinBackError)?.code == .usage && "\(e)" == message
            }
        }
    }

    @Test("YAML that does not parse is one problem on one line, with the line and column")
    func invalidYAML() {
        let (config, problems) = PipelineConfig.parse("name: x\npaths: [a\n", path: "/p.yaml")
        #expect(config == nil)
        #expect(problems.count == 1)
        #expect(
            problems.first?.hasPrefix("/p.yaml: not valid YAML at line 3, column 1: parser: ") == true, "\(problems)")
        #expect(problems.first?.contains("\n") == false, "\(problems)")
    }

    @Test("missing required keys are all reported at once")
    func missingRequired() {
        let (_, problems) = PipelineConfig.parse("threads: 2\n", path: "/p.yaml")
        for key in ["name", "transactions", "offers", "output"] {
            #expect(problems.contains { $0.contains("'\(key)'") && $0.contains("required") }, "\(problems)")
        }
    }

    @Test("a bad name and a revenuecat file without products are configuration errors")
    func nameAndProducts() {
        let text = Self.minimal.replacingOccurrences(of: "name: nightly", with: "name: Nightly_1")
            .replacingOccurrences(of: "transactions:\n", with: "transactions:\n  format: revenuecat\n")
        let (_, problems) = PipelineConfig.parse(text, path: "/p.yaml")
        #expect(problems.contains { $0.contains("'name'") })
        #expect(problems.contains { $0.contains("'products'") })
    }

    @Test("load throws exit 78 naming the file")
    func loadFails() throws {
        let dir = Paths.temporary()
        try "name: x\n".write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        do {
            _ = try PipelineConfig.load(path: dir + "/p.yaml")
            Issue.record("expected an error")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 78)
            #expect("\(e)".contains("p.yaml"))
        }
        do {
            _ = try PipelineConfig.load(path: dir + "/missing.yaml")
            Issue.record("expected an error")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 78)
        }
    }
}
