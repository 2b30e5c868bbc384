import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackSupport

/// Configuration is checked before anything is read (docs/rules.md §10.7): typos get a "did
/// you mean", JSON and YAML errors say where, and the identities file's header is checked
/// against the destinations.
@Suite("Configuration checked first (docs/rules.md §10.7)")
struct ConfigurationFirstTests {
    static let minimal = PipelineConfigTests.minimal

    @Test("a misspelt pipeline key or destination type names the key it is close to")
    func didYouMean() {
        let text =
            Self.minimal.replacingOccurrences(of: "output:\n", with: "incremntal: true\noutput:\n  destinatons: []\n")
            + "\n  formats: [csv]\n"
        let (_, problems) = PipelineConfig.parse(text, path: "/p.yaml")
        #expect(
            problems.contains { $0.contains("unknown key 'incremntal' (did you mean 'incremental'?)") }, "\(problems)")
        #expect(
            problems.contains { $0.contains("unknown key 'output.destinatons' (did you mean 'output.destinations'?)") },
            "\(problems)")
        let tools = Self.minimal.replacingOccurrences(
            of: "output:\n", with: "output:\n  destinations: [klavyio, {type: brazee}, mailchimp, zzzzzzzz]\n")
        let (_, more) = PipelineConfig.parse(tools, path: "/p.yaml")
        #expect(more.contains { $0.contains("unknown destination 'klavyio' (did you mean 'klaviyo'?)") }, "\(more)")
        #expect(more.contains { $0.contains("unknown destination 'brazee' (did you mean 'braze'?)") }, "\(more)")
        // Nothing close: no guess, the known names instead.
        #expect(more.contains { $0.contains("unknown destination 'zzzzzzzz'; known: braze,") }, "\(more)")
        #expect(!more.contains { $0.contains("'zzzzzzzz' (did you mean") }, "\(more)")
    }

    @Test(
        "JSON that does not parse names its line and column",
        arguments: [
            ("{\n  \"offers\": [\n    ,\n  ]\n}", 3, 5),
            ("{\"offers\": []", 1, 14),
            ("\n\n  {\"offers\": [] }}", 3, 18),
            ("{\"offers\": [\"é\", x]}", 1, 18),
        ])
    func jsonLineAndColumn(text: String, line: Int, column: Int) {
        let (_, problems) = OfferCatalog.parse(Data(text.utf8))
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("not valid JSON at line \(line), column \(column): ") == true, "\(problems)")
    }

    /// A pipeline in a fresh folder sending best-offer to `destinations`, with an identities
    /// file whose header is `header`.
    static func pipeline(header: String, destinations: String, key: String = "original_transaction_id") throws -> String
    {
        let dir = Paths.temporary()
        try Data((header + "\n1,a,b\n").utf8).write(to: URL(fileURLWithPath: dir + "/ids.csv"))
        let text = """
            name: nightly
            transactions:
              paths: ["tx.jsonl"]
            offers: offers.json
            output:
              directory: out
              destinations: \(destinations)
            identities:
              path: ids.csv
              key: \(key)
            """
        try Data(text.utf8).write(to: URL(fileURLWithPath: dir + "/p.yaml"))
        return dir + "/p.yaml"
    }

    @Test(
        "an identities file without a destination's column, or the key column, is 78 naming the destination, the column and the file"
    )
    func identitiesHeader() throws {
        let path = try Self.pipeline(
            header: "original_transaction_id,external_id,phone", destinations: "[braze, klaviyo, mailchimp]")
        let config = try PipelineConfig.load(path: path)
        if let e = try expectWinBackError(
            exit: 78, "no failure",
            {
                try Delivery.checkIdentities(config, inflater: .zlib)
            })
        {
            let text = "\(e)"
            #expect(text.contains("klaviyo needs the column 'email'"), "\(text)")
            #expect(text.contains("mailchimp needs the column 'email'"), "\(text)")
            #expect(!text.contains("braze needs"), "\(text)")
            #expect(text.contains("ids.csv"), "\(text)")
        }
        let keyless = try PipelineConfig.load(
            path: try Self.pipeline(header: "external_id,email,x", destinations: "[braze]"))
        #expect(throws: WinBackError.self) { try Delivery.checkIdentities(keyless, inflater: .zlib) }
        let fine = try PipelineConfig.load(
            path: try Self.pipeline(
                header: "original_transaction_id,external_id,email", destinations: "[braze, klaviyo]"))
        try Delivery.checkIdentities(fine, inflater: .zlib)
    }

    @Test("validate reports a missing identities column with the other problems, as run would find it")
    func validateReportsIt() throws {
        let path = try Self.pipeline(header: "original_transaction_id,external_id", destinations: "[klaviyo]")
        let report = PipelineValidation.check(pipelinePath: path)
        #expect(report.exitCode == 78 || report.exitCode == 66)
        #expect(report.problems.contains { $0.contains("klaviyo needs the column 'email'") }, "\(report.problems)")
    }
}
