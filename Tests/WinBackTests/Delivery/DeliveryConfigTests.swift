import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackSupport

/// A valid `identities:` block.
private let identitiesBlock = """
    identities:
      path: ../Data/sample/identities.csv.gz
      key: original_transaction_id

    """

/// `identities:`, `output.destinations` and `output.metrics` in the pipeline file
/// (docs/rules.md §10), and each destination's columns and limits (§10.2's table).
@Suite("Delivery: pipeline keys and destination types")
struct DeliveryConfigTests {
    static let path = "/srv/pipelines/nightly.yaml"

    /// A valid pipeline with `output` lines and top-level lines added.
    static func pipeline(output: String = "", identities: String? = nil, formats: String = "[csv]") -> String {
        var text = PipelineText.minimal(output: ["formats: \(formats)"])
        for line in output.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
            text += "  " + line + "\n"
        }
        if let identities { text += identities }
        return text
    }

    static let identities = identitiesBlock

    static func parse(_ text: String) -> (PipelineConfig?, [String]) { PipelineConfig.parse(text, path: path) }

    /// Whether one problem names `field` and says something containing every one of `words`.
    static func names(_ problems: [String], _ field: String, _ words: [String] = []) -> Bool {
        problems.contains { p in p.contains("'\(field)'") && words.allSatisfy { p.contains($0) } }
    }

    @Test("docs/rules.md §10.2's table: first column, identity column and default limit of each of the seven tools")
    func typeTable() {
        typealias Row = (type: DestinationType, first: String, identity: String, rows: Int?, bytes: Int?)
        let table: [Row] = [
            (.braze, "external_id", "external_id", nil, 500_000_000),
            (.onesignal, "external_id", "external_id", 2_000_000, 150_000_000),
            (.iterable, "userId", "external_id", 2_000_000, nil),
            (.customerio, "id", "external_id", nil, nil),
            (.airship, "named_user", "external_id", 10_000_000, 150_000_000),
            (.klaviyo, "Email", "email", nil, 50_000_000),
            (.mailchimp, "Email Address", "email", nil, nil),
        ]
        #expect(Set(DestinationType.allCases) == Set(table.map(\.type)))
        #expect(DestinationType.allCases.count == 7)
        for r in table {
            #expect(r.type.firstColumn == r.first, "\(r.type)")
            #expect(r.type.identityColumn == r.identity, "\(r.type)")
            #expect(r.type.limits.rows == r.rows, "\(r.type) rows")
            #expect(r.type.limits.bytes == r.bytes, "\(r.type) bytes")
            // An entry without limits of its own gets the tool's.
            let d = Destination(type: r.type)
            #expect(d.audience == .bestOffer)
            #expect(d.maxRows == r.rows, "\(r.type)")
            #expect(d.maxBytes == r.bytes, "\(r.type)")
        }
    }

    @Test("destinations as names: every tool, best-offer, the tool's default limits")
    func namesList() throws {
        let all = DestinationType.allCases.map(\.rawValue).joined(separator: ", ")
        let (c, problems) = Self.parse(Self.pipeline(output: "destinations: [\(all)]", identities: Self.identities))
        #expect(problems == [])
        let config = try #require(c)
        #expect(config.destinations == DestinationType.allCases.map { Destination(type: $0) })
        #expect(config.destinations.allSatisfy { $0.audience == .bestOffer })
        #expect(
            config.identities == IdentitiesSource(path: "../Data/sample/identities.csv.gz", key: .originalTransactionId)
        )
        #expect(config.metricsPath == nil)
    }

    @Test("destinations as entries: type, audience per-offer, maxRows, maxBytes (decimal and binary units)")
    func entries() throws {
        let output = """
            destinations:
              - {type: braze, audience: per-offer, maxRows: 100000, maxBytes: 50MB}
              - type: klaviyo
                maxBytes: 2KiB
              - {type: onesignal, maxRows: 7}
              - {type: onesignal, audience: per-offer}
              - {type: mailchimp, audience: best-offer}
              - iterable
            metrics: /var/lib/node_exporter/textfile/winback.prom
            """
        let (c, problems) = Self.parse(Self.pipeline(output: output, identities: Self.identities))
        #expect(problems == [])
        let d = try #require(c).destinations
        #expect(
            d == [
                Destination(type: .braze, audience: .perOffer, maxRows: 100_000, maxBytes: 50_000_000),
                Destination(type: .klaviyo, maxBytes: 2048),
                // A limit the entry leaves out stays the tool's own.
                Destination(type: .onesignal, maxRows: 7, maxBytes: 150_000_000),
                Destination(type: .onesignal, audience: .perOffer, maxRows: 2_000_000, maxBytes: 150_000_000),
                Destination(type: .mailchimp),
                Destination(type: .iterable),
            ])
        #expect(d[1].maxRows == nil)
        #expect(d[2].maxBytes == 150_000_000)
        #expect(c?.metricsPath == "/var/lib/node_exporter/textfile/winback.prom")
    }

    @Test("identities keyed by app_account_token; the key defaults to original_transaction_id")
    func identitiesKey() throws {
        let token = Self.parse(
            Self.pipeline(
                output: "destinations: [braze]", identities: "identities:\n  path: ids.csv\n  key: app_account_token\n")
        )
        #expect(token.1 == [])
        #expect(token.0?.identities == IdentitiesSource(path: "ids.csv", key: .appAccountToken))
        let plain = Self.parse(
            Self.pipeline(output: "destinations: [braze]", identities: "identities:\n  path: ids.csv\n"))
        #expect(plain.1 == [])
        #expect(plain.0?.identities?.key == .originalTransactionId)
        // Identities without destinations are allowed (nothing uses them).
        let alone = Self.parse(Self.pipeline(identities: Self.identities))
        #expect(alone.1 == [])
    }

    /// A pipeline mistake: the output lines, the identities block, the formats, the field the
    /// problem must name and words its message must hold.
    struct Mistake: Sendable, CustomTestStringConvertible {
        var output: String
        var identities: String
        var formats: String
        var field: String
        var words: [String]

        init(_ output: String, _ identities: String, _ formats: String, _ field: String, _ words: [String]) {
            self.output = output
            self.identities = identities
            self.formats = formats
            self.field = field
            self.words = words
        }

        var testDescription: String { "\(field): \(output) \(identities.isEmpty ? "(no identities)" : "")" }
    }

    @Test(
        "each mistake is a named problem",
        arguments: [
            Mistake(
                "destinations: [braze, sendgrid]", identitiesBlock, "[csv]", "output.destinations[1]",
                ["sendgrid", "braze"]),
            Mistake(
                "destinations: [{type: sendgrid}]", identitiesBlock, "[csv]", "output.destinations[0].type",
                ["sendgrid"]),
            Mistake(
                "destinations: [{type: braze, audience: everyone}]", identitiesBlock, "[csv]",
                "output.destinations[0].audience", ["everyone", "per-offer"]
            ),
            Mistake(
                "destinations: [braze, klaviyo, braze]", identitiesBlock, "[csv]", "output.destinations",
                ["braze", "twice"]),
            Mistake(
                "destinations: [{type: braze, audience: per-offer}, {type: braze, audience: per-offer}]",
                identitiesBlock,
                "[csv]", "output.destinations", ["twice"]
            ),
            Mistake("destinations: [braze]", "", "[csv]", "output.destinations", ["identities"]),
            Mistake("destinations: [braze]", identitiesBlock, "[xml]", "output.destinations", ["csv"]),
            Mistake(
                "destinations: [braze]", "identities:\n  path: ids.csv\n  key: email\n", "[csv]", "identities.key",
                ["email"]
            ),
            Mistake(
                "destinations: [braze]", "identities:\n  key: original_transaction_id\n", "[csv]", "identities.path", []
            ),
            Mistake("destinations: [braze]", "identities: ids.csv\n", "[csv]", "identities", ["path"]),
            Mistake("destinations: braze", identitiesBlock, "[csv]", "output.destinations", ["list"]),
            Mistake(
                "destinations: [{audience: per-offer}]", identitiesBlock, "[csv]", "output.destinations[0].type", []),
            Mistake(
                "destinations: [{type: braze, maxRows: 0}]", identitiesBlock, "[csv]", "output.destinations[0].maxRows",
                []),
            Mistake(
                "destinations: [{type: braze, maxRows: lots}]", identitiesBlock, "[csv]",
                "output.destinations[0].maxRows", []),
            Mistake(
                "destinations: [{type: braze, maxBytes: 100}]", identitiesBlock, "[csv]",
                "output.destinations[0].maxBytes", []),
            Mistake("metrics: \"\"", "", "[csv]", "output.metrics", []),
            Mistake("metrics: /var/lib/node_exporter/textfile/", "", "[csv]", "output.metrics", []),
        ])
    func namedProblems(_ m: Mistake) {
        let (_, problems) = Self.parse(Self.pipeline(output: m.output, identities: m.identities, formats: m.formats))
        #expect(Self.names(problems, m.field, m.words), "\(problems)")
        // Every problem names the pipeline file.
        #expect(problems.allSatisfy { $0.hasPrefix(Self.path + ": ") }, "\(problems)")
    }

    @Test("an unknown key of an entry is named, with the keys an entry knows")
    func unknownEntryKey() {
        let (_, problems) = Self.parse(
            Self.pipeline(output: "destinations: [{type: braze, maxrows: 5}]", identities: Self.identities))
        #expect(
            problems.contains { $0.contains("output.destinations[0].maxrows") && $0.contains("maxRows") }, "\(problems)"
        )
    }

    @Test("load refuses a file with a destination mistake: exit 78, every problem listed")
    func loadFails() throws {
        let path = Paths.temporary() + "/p.yaml"
        try Self.pipeline(output: "destinations: [sendgrid, {type: braze, audience: all}]").write(
            toFile: path, atomically: true, encoding: .utf8)
        if let e = try expectWinBackError(
            exit: 78, "loaded",
            {
                _ = try PipelineConfig.load(path: path)
            })
        {
            let text = "\(e)"
            #expect(text.contains("sendgrid"), "\(text)")
            #expect(text.contains("all"), "\(text)")
            #expect(text.contains("identities"), "\(text)")
        }
    }
}
