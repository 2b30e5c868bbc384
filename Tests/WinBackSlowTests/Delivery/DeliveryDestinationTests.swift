import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackSupport

/// Destination files (docs/rules.md §10.1–§10.2) of a world winback did not generate, checked
/// row by row against the published segments and the identities the test wrote.
@Suite("Delivery: destination files end to end", .serialized, .tags(.slow))
struct DeliveryDestinationTests {
    /// §10.2's table, written out here rather than taken from the code under test.
    static let tools: [String: (first: String, column: String, rows: Int?, bytes: Int?)] = [
        "braze": ("external_id", "external_id", nil, 500_000_000),
        "onesignal": ("external_id", "external_id", 2_000_000, 150_000_000),
        "iterable": ("userId", "external_id", 2_000_000, nil),
        "customerio": ("id", "external_id", nil, nil),
        "airship": ("named_user", "external_id", 10_000_000, 150_000_000),
        "klaviyo": ("Email", "email", nil, 50_000_000),
        "mailchimp": ("Email Address", "email", nil, nil),
    ]

    static let columns = [
        "winback_offer_id", "winback_offer_url", "winback_eligible_offer_ids", "winback_months_since_last_subscribed",
        "winback_as_of", "winback_status",
    ]

    /// One configured destination and the limits its files must keep.
    struct Wanted {
        var type: String
        var perOffer = false
        var maxRows: Int?
        var maxBytes: Int?

        init(_ type: String, perOffer: Bool = false, maxRows: Int? = nil, maxBytes: Int? = nil) {
            self.type = type
            self.perOffer = perOffer
            let tool = DeliveryDestinationTests.tools[type]!
            self.maxRows = maxRows ?? tool.rows
            self.maxBytes = maxBytes ?? tool.bytes
        }

        var audience: String { perOffer ? "per-offer" : "best-offer" }
    }

    /// The seven tools, one with a small maxRows, one with a small maxBytes, some per offer.
    static let all: [Wanted] = [
        Wanted("braze", maxRows: 7),
        Wanted("klaviyo", maxBytes: 2_000),
        Wanted("onesignal", perOffer: true),
        Wanted("iterable"),
        Wanted("customerio"),
        Wanted("airship"),
        Wanted("mailchimp", perOffer: true, maxBytes: 1_500),
        Wanted("braze", perOffer: true, maxRows: 3),
    ]

    static let allYAML = """
        destinations:
          - {type: braze, maxRows: 7}
          - {type: klaviyo, maxBytes: 2KB}
          - {type: onesignal, audience: per-offer}
          - iterable
          - customerio
          - airship
          - {type: mailchimp, audience: per-offer, maxBytes: 1500}
          - {type: braze, audience: per-offer, maxRows: 3}
        """

    static func options(_ pipeline: String, output: String = Paths.temporary()) -> RunOptions {
        var o = RunOptions(pipelinePath: pipeline, output: output, threads: 2)
        o.now = ms(DeliveryFixture.asOf)
        return o
    }

    /// A world of make_world.py with identities for 90 % of its customers and `yaml` under
    /// `output:`; returns the pipeline and the identities.
    static func world(
        customers: Int, seed: Int, byToken: Bool = false, yaml: String = allYAML
    ) throws -> (pipeline: String, identities: DeliveryFixture.Identities) {
        let pipeline = try DeliveryFixture.makeWorld(customers: customers, seed: seed)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let found = try DeliveryFixture.customers(worldFolder: folder)
        // A few customers share an originalTransactionId across groups.
        #expect(found.count * 100 >= customers * 95)
        let ids = DeliveryFixture.identities(for: found, byToken: byToken)
        try DeliveryFixture.writeGzip(ids.text, to: folder + "/identities.csv.gz")
        try DeliveryFixture.addToOutput(pipeline, yaml)
        try DeliveryFixture.append(
            pipeline,
            "identities:\n  path: identities.csv.gz\n  key: \(byToken ? "app_account_token" : "original_transaction_id")\n"
        )
        return (pipeline, ids)
    }

    /// Checks every destination of `wanted` in the published `folder` against its segments and
    /// `identities` (docs/rules.md §10.2), and the manifest's counts.
    static func verify(
        _ folder: String, wanted: [Wanted], identities: DeliveryFixture.Identities, byToken: Bool, offers: [String],
        world: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let keyColumn = byToken ? "app_account_token" : "original_transaction_id"
        let ranks = try DeliveryFixture.offerRanks(worldFolder: world)
        let unlinked = try DeliveryFixture.offersWithoutLink(worldFolder: world)
        let manifest = try DeliveryFixture.manifest(folder)
        let entries = try #require(manifest["destinations"] as? [[String: Any]], sourceLocation: sourceLocation)
        #expect(entries.count == wanted.count, sourceLocation: sourceLocation)
        var checked: [String: Set<String>] = [:]  // type → file names verified
        var firstColumns: Set<String> = []
        var segmentKeys: Set<String> = []
        for d in wanted {
            let tool = tools[d.type]!
            let header = [tool.first] + columns
            let lists = d.perOffer ? offers : ["best-offer"]
            var unaddressable = 0
            var withoutLink = 0
            var folded = 0
            var rows = 0
            var files = 0
            for list in lists {
                let segment = DeliveryFixture.table(folder + "/segments/\(list).csv")
                #expect(segment.header.contains(keyColumn), sourceLocation: sourceLocation)
                var candidates: [[String]] = []
                for row in segment.rows {
                    let k = row[keyColumn] ?? ""
                    segmentKeys.insert(k)
                    // Never an empty link (docs/rules.md §10.10).
                    guard !(row["offer_url"] ?? "").isEmpty else {
                        withoutLink += 1
                        continue
                    }
                    guard !k.isEmpty, let fields = identities.map[byToken ? k.lowercased() : k],
                        let value = fields[tool.column], !value.isEmpty
                    else {
                        unaddressable += 1
                        continue
                    }
                    let ids = row["eligible_offer_ids"]!.split(separator: ";").filter {
                        !unlinked.contains(String($0))
                    }.joined(separator: ";")
                    candidates.append([
                        value, row["offer_id"]!, row["offer_url"]!, ids,
                        row["months_since_last_subscribed"]!, DeliveryFixture.asOf, "eligible",
                    ])
                }
                // One row per value: the best-ranked offer, then the earlier row (§10.10).
                // An email is one value whatever its ASCII case (§6.3).
                func fold(_ v: String) -> String {
                    tool.column != "email"
                        ? v : String(decoding: v.utf8.map { $0 >= 65 && $0 <= 90 ? $0 | 32 : $0 }, as: UTF8.self)
                }
                var best: [String: Int] = [:]
                for (i, r) in candidates.enumerated() {
                    if let j = best[fold(r[0])], (ranks[candidates[j][1]] ?? .max) <= (ranks[r[1]] ?? .max) {
                        continue
                    }
                    best[fold(r[0])] = i
                }
                let expected = candidates.indices.filter { best[fold(candidates[$0][0])] == $0 }.map { candidates[$0] }
                folded += candidates.count - expected.count
                let dir = folder + "/destinations/" + d.type
                let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
                    .filter { $0.hasPrefix(list + "-") && !$0.hasPrefix(list + "-exited-") }.sorted()
                let numbered = (0..<names.count).map { list + "-" + String(format: "%03d", $0 + 1) + ".csv" }
                #expect(!names.isEmpty, "\(d.type) \(list): no file", sourceLocation: sourceLocation)
                #expect(
                    names == numbered, "\(d.type) \(list): files numbered from 001 without a gap",
                    sourceLocation: sourceLocation)
                checked[d.type, default: []].formUnion(names)
                // A first run: nobody left, the exited file is the header alone (docs/rules.md §10.5).
                let exited = list + "-exited-001.csv"
                #expect(
                    String(decoding: DeliveryFixture.bytes(dir + "/" + exited), as: UTF8.self)
                        == DeliveryFixture.line(header), "\(d.type) \(exited)", sourceLocation: sourceLocation)
                checked[d.type, default: []].insert(exited)
                var offset = 0
                var sizes: [(rows: Int, bytes: Int)] = []
                for name in names {
                    let b = DeliveryFixture.bytes(dir + "/" + name)
                    let place = "\(d.type)/\(name)"
                    #expect(
                        !b.starts(with: [0xEF, 0xBB, 0xBF]), "\(place) starts with a BOM",
                        sourceLocation: sourceLocation)
                    #expect(!b.contains(0x0D), "\(place) has a CR", sourceLocation: sourceLocation)
                    #expect(b.last == 0x0A, "\(place) does not end with a line end", sourceLocation: sourceLocation)
                    let records = DeliveryFixture.parse(b)
                    #expect(records.first == header, "\(place) header", sourceLocation: sourceLocation)
                    let data = Array(records.dropFirst())
                    if let m = d.maxRows {
                        #expect(data.count <= m, "\(place): \(data.count) rows > \(m)", sourceLocation: sourceLocation)
                    }
                    if let m = d.maxBytes {
                        #expect(b.count <= m, "\(place): \(b.count) bytes > \(m)", sourceLocation: sourceLocation)
                    }
                    if names.count > 1 {
                        #expect(!data.isEmpty, "\(place) is an empty part", sourceLocation: sourceLocation)
                    }
                    // The file's bytes: the header, then its share of the expected rows, as §4.1 writes them.
                    let share = Array(expected[min(offset, expected.count)..<min(offset + data.count, expected.count)])
                    let text = DeliveryFixture.line(header) + share.map(DeliveryFixture.line).joined()
                    #expect(
                        String(decoding: b, as: UTF8.self) == text, "\(place) bytes", sourceLocation: sourceLocation)
                    for r in data { firstColumns.insert(r[0]) }
                    offset += data.count
                    sizes.append((data.count, b.count))
                }
                #expect(
                    offset == expected.count, "\(d.type) \(list): \(offset) rows, expected \(expected.count)",
                    sourceLocation: sourceLocation)
                // A file ends only when the next row would pass a limit.
                var start = 0
                for (i, s) in sizes.enumerated().dropLast() {
                    start += s.rows
                    guard start < expected.count else { break }
                    let next = DeliveryFixture.line(expected[start]).utf8.count
                    let full =
                        (d.maxRows.map { s.rows == $0 } ?? false) || (d.maxBytes.map { s.bytes + next > $0 } ?? false)
                    #expect(full, "\(d.type) \(names[i]) was closed before its limit", sourceLocation: sourceLocation)
                }
                rows += expected.count
                files += names.count
            }
            let entry = entries.first { $0["type"] as? String == d.type && $0["audience"] as? String == d.audience }
            #expect(entry != nil, "\(d.type) \(d.audience) is not in the manifest", sourceLocation: sourceLocation)
            #expect(
                entry?["unaddressable"] as? Int == unaddressable, "\(d.type) \(d.audience) unaddressable",
                sourceLocation: sourceLocation)
            #expect(entry?["rows"] as? Int == rows, "\(d.type) \(d.audience) rows", sourceLocation: sourceLocation)
            #expect(
                entry?["without_link"] as? Int == withoutLink, "\(d.type) \(d.audience) without_link",
                sourceLocation: sourceLocation)
            #expect(
                entry?["folded"] as? Int == folded, "\(d.type) \(d.audience) folded", sourceLocation: sourceLocation)
            #expect(entry?["files"] as? Int == files, "\(d.type) \(d.audience) files", sourceLocation: sourceLocation)
            #expect(entry?["exited"] as? Int == 0, "\(d.type) \(d.audience) exited", sourceLocation: sourceLocation)
            // The world is large enough that each destination has rows and customers left out.
            #expect(rows > 0, "\(d.type) \(d.audience) got no row", sourceLocation: sourceLocation)
            #expect(unaddressable > 0, "\(d.type) \(d.audience) left nobody out", sourceLocation: sourceLocation)
        }
        // No file beside those checked.
        let types = Set(wanted.map(\.type))
        #expect(
            Set((try? FileManager.default.contentsOfDirectory(atPath: folder + "/destinations")) ?? []) == types,
            sourceLocation: sourceLocation)
        for t in types {
            let present = Set(
                (try? FileManager.default.contentsOfDirectory(atPath: folder + "/destinations/" + t)) ?? [])
            #expect(present == checked[t] ?? [], "\(t) has other files", sourceLocation: sourceLocation)
        }
        // Held-out customers (§9) are in no destination file: those held out of every segment
        // have an id, and none of their ids is in a file.
        let holdout = DeliveryFixture.table(folder + "/segments/holdout.csv").rows
        #expect(holdout.count > 10, sourceLocation: sourceLocation)
        var heldIds: Set<String> = []
        for row in holdout {
            let k = row[keyColumn] ?? ""
            guard !k.isEmpty, !segmentKeys.contains(k), let fields = identities.map[byToken ? k.lowercased() : k] else {
                continue
            }
            for v in fields.values where !v.isEmpty { heldIds.insert(v) }
        }
        #expect(heldIds.count > 10, sourceLocation: sourceLocation)
        #expect(heldIds.isDisjoint(with: firstColumns), "held-out customers delivered", sourceLocation: sourceLocation)
        // What the identities file held.
        let counted = manifest["identities"] as? [String: Any]
        #expect(counted?["rows"] as? Int == identities.rows, sourceLocation: sourceLocation)
        #expect(counted?["duplicates"] as? Int == identities.duplicates, sourceLocation: sourceLocation)
        #expect(counted?["rejected"] as? Int == 0, sourceLocation: sourceLocation)
    }

    @Test(
        "seven tools from a world winback did not generate: rows, columns, order, limits, counts, holdout; sharded and memory-bounded runs publish the same bytes"
    )
    func sevenTools() throws {
        let (pipeline, ids) = try Self.world(customers: 2_000, seed: 5)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let offers = try DeliveryFixture.offerIds(worldFolder: folder)
        #expect(offers.count == 4)
        #expect(ids.duplicates > 5)
        #expect(ids.withoutRow > 100)
        let quiet = Progress(mode: .quiet)
        let s = try PipelineRun.run(Self.options(pipeline), progress: quiet)
        try Self.verify(s.published, wanted: Self.all, identities: ids, byToken: false, offers: offers, world: folder)
        // The small limits did split files.
        let braze = try FileManager.default.contentsOfDirectory(atPath: s.published + "/destinations/braze")
        #expect(braze.filter { $0.hasPrefix("best-offer-") }.count > 3)
        let klaviyo = try FileManager.default.contentsOfDirectory(atPath: s.published + "/destinations/klaviyo")
        #expect(klaviyo.count > 3)
        let reference = publishedFiles(s.published)
        #expect(reference.keys.filter { $0.hasPrefix("destinations/") }.count > 20)
        let referenceManifest = try DeliveryFixture.manifest(s.published)

        // Partition (2 tasks) → 3 shards → merge.
        let work = Paths.temporary() + "/work"
        let o = Self.options(pipeline)
        for i in [1, 0] { _ = try ShardedRun.partition(o, work: work, shards: 3, task: i, tasks: 2, progress: quiet) }
        for k in [2, 0, 1] { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 3, progress: quiet) }
        let merged = try ShardedRun.merge(o, work: work, shards: 3, progress: quiet)
        // Within memory: three shards one after another.
        let bounded = try ShardedRun.bounded(Self.options(pipeline), memory: 64_000_000, progress: quiet, shards: 3)
        for (name, run) in [("sharded", merged), ("memory-bounded", bounded)] {
            let files = publishedFiles(run.published)
            #expect(files.keys.sorted() == reference.keys.sorted(), "\(name)")
            for (k, v) in reference where files[k] != v {
                Issue.record("\(name): \(k) differs from the run in memory")
            }
            let m = try DeliveryFixture.manifest(run.published)
            #expect(
                (m["destinations"] as? NSArray) == (referenceManifest["destinations"] as? NSArray),
                "\(name): manifest destinations")
            #expect(
                (m["identities"] as? NSDictionary)?["duplicates"] as? Int
                    == (referenceManifest["identities"] as? NSDictionary)?["duplicates"] as? Int, "\(name)")
        }
    }

    @Test("segments, reports and rejects are the same bytes with destinations as without")
    func segmentsUnchanged() throws {
        let (pipeline, _) = try Self.world(customers: 600, seed: 6)
        let plain = try DeliveryFixture.makeWorld(customers: 600, seed: 6)
        let quiet = Progress(mode: .quiet)
        let with = publishedFiles(try PipelineRun.run(Self.options(pipeline), progress: quiet).published)
        let without = publishedFiles(try PipelineRun.run(Self.options(plain), progress: quiet).published)
        #expect(with.keys.filter { !$0.hasPrefix("destinations/") }.sorted() == without.keys.sorted())
        #expect(without.count > 10)
        // But the page: its first screen counts what each destination received (docs/rules.md §4.3).
        let page = "reports/report.html"
        for (k, v) in without where k != page && with[k] != v { Issue.record("\(k) changed with destinations") }
        let withPage = String(decoding: with[page] ?? Data(), as: UTF8.self)
        #expect(withPage.contains("<th colspan=\"2\" class=\"group\">braze</th>"))
        #expect(!String(decoding: without[page] ?? Data(), as: UTF8.self).contains("class=\"group\">braze</th>"))
    }

    @Test("keyed by app_account_token: tokens match whatever their case; customers without a token are unaddressable")
    func byToken() throws {
        let wanted = [Wanted("customerio"), Wanted("klaviyo", perOffer: true, maxRows: 4)]
        let (pipeline, ids) = try Self.world(
            customers: 1_200, seed: 9, byToken: true,
            yaml: "destinations:\n  - customerio\n  - {type: klaviyo, audience: per-offer, maxRows: 4}")
        #expect(ids.map.count > 200)
        let text = ids.text
        #expect(text.contains(where: { $0.isUppercase && $0.isHexDigit }), "some tokens are written in capitals")
        let folder = (pipeline as NSString).deletingLastPathComponent
        let offers = try DeliveryFixture.offerIds(worldFolder: folder)
        let s = try PipelineRun.run(Self.options(pipeline), progress: Progress(mode: .quiet))
        try Self.verify(s.published, wanted: wanted, identities: ids, byToken: true, offers: offers, world: folder)
        // Some customers who have an identity row by token are in the files written in capitals.
        let upper = ids.text.split(separator: "\n").dropFirst().filter { line in
            let token = line.split(separator: ",", omittingEmptySubsequences: false)[1]
            return token != token.lowercased()
        }
        #expect(upper.count > 50)
    }

    @Test(
        "identity rows that are not valid CSV are rejected into rejects.csv within the budget; past it the run fails with 65"
    )
    func identityRejects() throws {
        let (pipeline, ids) = try Self.world(customers: 400, seed: 11, yaml: "destinations: [braze]")
        let folder = (pipeline as NSString).deletingLastPathComponent
        try DeliveryFixture.append(pipeline, "limits:\n  maxRejectedFraction: 0.01\n")
        // One bad row of ~360: within 1 %.
        var lines = ids.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.insert("1234,too,few", at: 5)  // line 6
        try DeliveryFixture.writeGzip(lines.joined(separator: "\n"), to: folder + "/identities.csv.gz")
        let output = Paths.temporary()
        let s = try PipelineRun.run(Self.options(pipeline, output: output), progress: Progress(mode: .quiet))
        let rejects = DeliveryFixture.table(s.published + "/rejects.csv")
        #expect(rejects.header == ["file", "line", "reason", "excerpt"])
        let row = rejects.rows.first { $0["file"]?.hasSuffix("identities.csv.gz") == true }
        #expect(row?["line"] == "6", "\(rejects.rows)")
        #expect(row?["reason"]?.contains("expected 4 fields, found 3") == true, "\(rejects.rows)")
        #expect(row?["excerpt"] == "1234,too,few")
        let m = try DeliveryFixture.manifest(s.published)
        #expect((m["identities"] as? [String: Any])?["rejected"] as? Int == 1)
        #expect((m["identities"] as? [String: Any])?["rows"] as? Int == ids.rows + 1)
        // Twenty bad rows: past the budget, exit 65, nothing new published.
        for k in 0..<20 { lines.insert("\"unclosed \(k),x,y,z", at: 10 + k * 3) }
        try DeliveryFixture.writeGzip(lines.joined(separator: "\n"), to: folder + "/identities.csv.gz")
        do {
            _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Progress(mode: .quiet))
            Issue.record("a run with 21 bad identity rows of ~380 published")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 65)
            #expect("\(e)".contains("identit"), "\(e)")
        }
        #expect(publishedFiles(s.published).keys.contains("destinations/braze/best-offer-001.csv"))
    }

    @Test(
        "an identities file without the column a destination needs is 78 from validate and run, before anything is read"
    )
    func missingIdentityColumn() throws {
        let (pipeline, _) = try Self.world(customers: 200, seed: 13, yaml: "destinations: [mailchimp]")
        let folder = (pipeline as NSString).deletingLastPathComponent
        try DeliveryFixture.writeGzip(
            "original_transaction_id,external_id\n120000000000000,u-1\n", to: folder + "/identities.csv.gz")
        let validate = try CLI.run(["validate", pipeline])
        #expect(validate.status == 78, "\(validate.stderr)")
        #expect(validate.stderr.contains("mailchimp needs the column 'email'"), "\(validate.stderr)")
        // The JSON log shows no stage begun: the run stopped before reading.
        let r = try CLI.run(["run", pipeline, "--log-format", "json"])
        #expect(r.status == 78, "\(r.stderr)")
        #expect(r.stderr.contains("mailchimp needs the column 'email'"), "\(r.stderr)")
        #expect(r.stderr.contains("identities.csv.gz"), "\(r.stderr)")
        #expect(!r.stderr.contains("\"stage\""), "\(r.stderr)")
        #expect(r.stdout == "")
    }

    @Test("a missing identities file fails the run with 66, naming it")
    func missingIdentities() throws {
        let (pipeline, _) = try Self.world(customers: 200, seed: 14, yaml: "destinations: [braze]")
        let folder = (pipeline as NSString).deletingLastPathComponent
        try FileManager.default.removeItem(atPath: folder + "/identities.csv.gz")
        let r = try CLI.run(["run", pipeline])
        #expect(r.status == 66, "\(r.stderr)")
        #expect(r.stderr.contains("identities.csv.gz"), "\(r.stderr)")
    }
}
