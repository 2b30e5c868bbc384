import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// What changed since the last published run (docs/rules.md §10.5), on nights built by hand: a
/// customer who returns, one who redeems, one who ages out of an offer (and so changes best
/// offer), one newly held out, one who vanishes from the inputs and one who newly qualifies.
@Suite("Segment changes against the previous published run", .serialized, .tags(.slow))
struct SegmentChangesTests {
    static let experiment = HoldoutAssignment(name: "chg", basisPoints: 5_000)

    /// An originalTransactionId starting with `prefix` that the experiment holds out or not.
    static func otid(_ prefix: String, heldOut: Bool) -> String {
        HandBuiltNights.otid(prefix, heldOut: heldOut, in: experiment)
    }

    /// The customers, by role.
    static let returned = otid("1001", heldOut: false)
    static let redeemed = otid("1002", heldOut: false)
    static let aged = otid("1003", heldOut: false)
    static let held = otid("1004", heldOut: true)
    static let vanished = otid("1005", heldOut: false)
    static let newcomer = otid("1006", heldOut: false)

    /// Monthly paid rows of `o` from `from` (YYYY-MM) for `months` months.
    static func monthly(_ o: String, from year: Int, _ month: Int, months: Int) -> [String] {
        (0..<months).map { i in
            let m0 = month - 1 + i
            let m1 = m0 + 1
            let start = String(format: "%04d-%02d-01T00:00:00Z", year + m0 / 12, m0 % 12 + 1)
            let end = String(format: "%04d-%02d-01T00:00:00Z", year + m1 / 12, m1 % 12 + 1)
            return "\(o)-\(i),\(o),g1,p.monthly,\(start),\(end),,,USA"
        }
    }

    /// A world: night 1 is 2026-06-01, night 2 2026-07-01. `t-base.csv` holds every customer
    /// but the one who vanishes (`t-vanish.csv`, removed for night 2); `t-night2.csv` the rows
    /// bought between the nights.
    static func world(incremental: Bool = false) throws -> String {
        let dir = Paths.temporary() + "/world"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var base: [String] = []
        // Churned at 2026-04-01: 2 months at night 1, 3 at night 2 (eligible for both offers).
        for o in [returned, redeemed, held] { base += monthly(o, from: 2026, 1, months: 3) }
        // Churned at 2026-03-01: 3 months at night 1 (wb.a's maximum), 4 at night 2.
        base += monthly(aged, from: 2026, 1, months: 2)
        // Churned at 2026-05-15: too recent at night 1, 1 month at night 2.
        base += monthly(newcomer, from: 2026, 2, months: 3)
        base.append("\(newcomer)-x,\(newcomer),g1,p.monthly,2026-05-01T00:00:00Z,2026-05-15T00:00:00Z,,,USA")
        try HandBuiltNights.write(dir + "/t-base.csv", base)
        try HandBuiltNights.write(dir + "/t-vanish.csv", monthly(vanished, from: 2026, 1, months: 3))
        try HandBuiltNights.writeCatalog(
            dir + "/offers.json",
            [
                ("wb.a", "A", nil, maximum: 3, priority: "HIGH"), ("wb.b", "B", nil, maximum: 12, priority: "NORMAL"),
            ])
        let pipeline = """
            name: changes
            transactions:
              format: csv
              paths: ["t-*.csv"]
            offers: offers.json
            asOf: 2026-06-01
            consecutiveGapDays: 60
            output:
              directory: out
              formats: [csv, xml]
            experiment:
              name: chg
              holdout: 50%
              start: 2026-06-15
            """ + (incremental ? "\nincremental: true\n" : "\n")
        try pipeline.write(toFile: dir + "/pipeline.yaml", atomically: true, encoding: .utf8)
        return dir + "/pipeline.yaml"
    }

    /// Night 2's inputs: the vanished customer's file gone, the rows bought since night 1 added.
    static func secondNight(_ pipeline: String) throws {
        let dir = (pipeline as NSString).deletingLastPathComponent
        try FileManager.default.removeItem(atPath: dir + "/t-vanish.csv")
        try HandBuiltNights.write(
            dir + "/t-night2.csv",
            [
                // Came back: subscribed again, active on 2026-07-01.
                "\(returned)-r,\(returned),g1,p.monthly,2026-06-15T00:00:00Z,2026-07-15T00:00:00Z,,,USA",
                // Redeemed wb.a for a week, churned again since (too recent on 2026-07-01).
                "\(redeemed)-w,\(redeemed),g1,p.monthly,2026-06-05T00:00:00Z,2026-06-12T00:00:00Z,4,wb.a,USA",
            ])
    }

    static func options(_ pipeline: String, asOf: String) -> RunOptions {
        var o = RunOptions(pipelinePath: pipeline, asOf: asOf, threads: 2)
        o.now = ms("2026-07-02")
        return o
    }

    @discardableResult
    static func run(_ pipeline: String, asOf: String) throws -> String {
        try PipelineRun.run(options(pipeline, asOf: asOf), progress: Progress(mode: .quiet)).published
    }

    static func changes(_ folder: String, _ segment: String) throws -> [String] {
        try String(contentsOfFile: folder + "/segments/changes/\(segment).csv", encoding: .utf8)
            .split(separator: "\n").map(String.init)
    }

    static func manifest(_ folder: String) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: folder + "/manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The date of the baseline a published run's manifest names (nil: none).
    static func baselineDate(_ folder: String) throws -> String? {
        let changes = try #require(try manifest(folder)["changes"] as? [String: Any])
        return (changes["baseline"] as? [String: Any])?["date"] as? String
    }

    /// Every changes file of a published run, by name.
    static func changesFiles(_ folder: String) -> [String: Data] {
        var out: [String: Data] = [:]
        for f in (try? FileManager.default.contentsOfDirectory(atPath: folder + "/segments/changes")) ?? [] {
            out[f] = FileManager.default.contents(atPath: folder + "/segments/changes/" + f)
        }
        return out
    }

    @Test("the first run: everyone entered, the manifest names no baseline")
    func firstRun() throws {
        let pipeline = try Self.world()
        let folder = try Self.run(pipeline, asOf: "2026-06-01")
        let best = try Self.changes(folder, "best-offer")
        #expect(best[0] == "change,subscription_group_id,original_transaction_id,offer_id,previous_offer_id,reason")
        #expect(
            best.dropFirst().sorted()
                == [Self.returned, Self.redeemed, Self.aged, Self.held, Self.vanished].sorted().map {
                    "entered,g1,\($0),wb.a,,"
                })
        // No XML for changes; the holdout is empty before the experiment starts: header only.
        #expect(!FileManager.default.fileExists(atPath: folder + "/segments/changes/best-offer.xml"))
        #expect(try Self.changes(folder, "holdout").count == 1)
        let m = try Self.manifest(folder)
        let changes = try #require(m["changes"] as? [String: Any])
        #expect(changes["baseline"] is NSNull)
        let segments = try #require(changes["segments"] as? [[String: Any]])
        #expect(segments.map { $0["segment"] as? String } == ["wb.a", "wb.b", "best-offer", "holdout"])
        #expect(segments[2]["entered"] as? Int == 5 && segments[2]["exited"] as? Int == 0)
    }

    @Test("two nights: returned, redeemed, held out, vanished, aged out (best offer changed), entered")
    func twoNights() throws {
        let pipeline = try Self.world()
        let first = try Self.run(pipeline, asOf: "2026-06-01")
        try Self.secondNight(pipeline)
        let second = try Self.run(pipeline, asOf: "2026-07-01")
        // Rows: entered, then changed (tonight's order), then exited (the baseline's order).
        let exitedBest = [Self.returned, Self.redeemed, Self.held, Self.vanished].sorted()
        let reasons = [
            Self.returned: "returned", Self.redeemed: "redeemed", Self.held: "held_out",
            Self.vanished: "unknown_customer",
        ]
        #expect(
            try Self.changes(second, "best-offer").dropFirst()
                == [
                    "entered,g1,\(Self.newcomer),wb.a,,", "changed,g1,\(Self.aged),wb.b,wb.a,",
                ] + exitedBest.map { "exited,g1,\($0),,wb.a,\(reasons[$0]!)" })
        #expect(
            try Self.changes(second, "wb.a").dropFirst()
                == ["entered,g1,\(Self.newcomer),wb.a,,"]
                + [Self.returned, Self.redeemed, Self.aged, Self.held, Self.vanished].sorted().map {
                    "exited,g1,\($0),,wb.a,\($0 == Self.aged ? "too_long_ago" : reasons[$0]!)"
                })
        // wb.b: the redemption was of wb.a, so the customer fails wb.b's first criterion: the
        // week of the offer, after a gap, began a new run without a paid month.
        #expect(
            try Self.changes(second, "wb.b").dropFirst()
                == ["entered,g1,\(Self.newcomer),wb.b,,"]
                + [Self.returned, Self.redeemed, Self.held, Self.vanished].sorted().map {
                    "exited,g1,\($0),,wb.b,\($0 == Self.redeemed ? "paid_duration" : reasons[$0]!)"
                })
        #expect(try Self.changes(second, "holdout").dropFirst() == ["entered,g1,\(Self.held),wb.a,,"])
        let changes = try #require(try Self.manifest(second)["changes"] as? [String: Any])
        let baseline = try #require(changes["baseline"] as? [String: Any])
        #expect(baseline["date"] as? String == "2026-06-01")
        let sha = try #require(FileManager.default.contents(atPath: first + "/manifest.json"))
        let copy = try OutputFile(path: Paths.temporary() + "/manifest.json")
        try copy.write(Array(sha))
        #expect(baseline["manifestSHA256"] as? String == (try copy.finish()).1)
        let best = try #require(
            (changes["segments"] as? [[String: Any]])?.first { $0["segment"] as? String == "best-offer" })
        #expect(best["entered"] as? Int == 1 && best["changed"] as? Int == 1 && best["exited"] as? Int == 4)
        // The page's first screen says the same, against its baseline's date (docs/rules.md §4.3).
        let page = try String(contentsOfFile: second + "/reports/report.html", encoding: .utf8)
        #expect(page.contains(">since 2026-06-01</th>"))
        #expect(
            page.split(separator: "\n").contains {
                $0.hasPrefix("<tr><th>best-offer</th>") && $0.hasSuffix("<td>1</td><td>1</td><td>4</td></tr>")
            })
        #expect(!page.contains("No earlier run to compare with"))
        // The first night's page had none: dashes and the note.
        let firstPage = try String(contentsOfFile: first + "/reports/report.html", encoding: .utf8)
        #expect(firstPage.contains("No earlier run to compare with") && firstPage.contains(">since the last run</th>"))
        // The reasons agree with explain, for the criteria (docs/rules.md §10.5).
        let e = try Explainer.explain(Self.options(pipeline, asOf: "2026-07-01"), customer: Self.redeemed)
        #expect(e.first?.offers.first { $0.offerId == "wb.b" }?.failures.first?.reason == "paid_duration")
    }

    @Test("a rerun of the same date compares with the date before; a backfill with the greatest earlier date")
    func rerunAndBackfill() throws {
        let pipeline = try Self.world()
        try Self.run(pipeline, asOf: "2026-06-01")
        try Self.secondNight(pipeline)
        let once = try Self.run(pipeline, asOf: "2026-07-01")
        let before = Self.changesFiles(once)
        let again = try Self.run(pipeline, asOf: "2026-07-01")
        #expect(Self.changesFiles(again) == before)
        #expect(try Self.baselineDate(again) == "2026-06-01")
        // A backfill between the two: its baseline is 2026-06-01, not the later run.
        let backfill = try Self.run(pipeline, asOf: "2026-06-20")
        #expect(try Self.baselineDate(backfill) == "2026-06-01")
        // One before every published run has none.
        let earliest = try Self.run(pipeline, asOf: "2026-05-20")
        #expect((try Self.manifest(earliest)["changes"] as? [String: Any])?["baseline"] is NSNull)
    }

    @Test("a baseline's manifest is never read through a link, and trusted only as it was when found")
    func baselineManifestTrusted() throws {
        let pipeline = try Self.world()
        let first = try Self.run(pipeline, asOf: "2026-06-01")
        let root = (first as NSString).deletingLastPathComponent
        let name = (root as NSString).lastPathComponent
        let found = try #require(try Baseline.find(root: root, name: name, before: "2026-07-01"))
        #expect(found.date == "2026-06-01")
        #expect(try BaselineFiles(found).sha256["segments/best-offer.csv"] != nil)
        // Found in this process, its manifest is read once; handed from another (an array job's
        // fingerprint, decoded without its outputs) it is read again and checked.
        let handed = try JSONDecoder().decode(Baseline.self, from: JSONEncoder().encode(found))
        #expect(handed == found && handed.outputs == nil)
        #expect(try BaselineFiles(handed).sha256 == BaselineFiles(found).sha256)
        let cached = try BaselineFiles(found).sha256
        // Changed after it was found (one byte more): 65, naming it.
        let manifest = found.folder + "/manifest.json"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: manifest))
        try (bytes + Data(" ".utf8)).write(to: URL(fileURLWithPath: manifest))
        #expect {
            try BaselineFiles(handed)
        } throws: { e in
            (e as? WinBackError)?.code == .badData && (e as? WinBackError)?.path == manifest
        }
        #expect(try BaselineFiles(found).sha256 == cached, "what was decoded when found")
        // Put back: trusted again.
        try bytes.write(to: URL(fileURLWithPath: manifest))
        #expect(try BaselineFiles(handed).folder == found.folder)
        // The same bytes behind a link: the dated folder stands, so its run is no baseline and
        // never passed over for an older one (65, docs/rules.md §6.3); a baseline found before
        // the link was planted is no longer trusted.
        let elsewhere = Paths.temporary() + "/planted-manifest.json"
        try bytes.write(to: URL(fileURLWithPath: elsewhere))
        try FileManager.default.removeItem(atPath: manifest)
        try FileManager.default.createSymbolicLink(atPath: manifest, withDestinationPath: elsewhere)
        #expect {
            try Baseline.find(root: root, name: name, before: "2026-07-01")
        } throws: { e in
            (e as? WinBackError)?.code == .badData && (e as? WinBackError)?.path == manifest
        }
        #expect(throws: WinBackError.self) { try BaselineFiles(handed) }
    }

    @Test("the same changes in memory, under --memory, from an array job and on incremental nights")
    func sameBytesEverywhere() throws {
        func secondNight(_ pipeline: String, _ mode: (RunOptions) throws -> String) throws -> [String: Data] {
            try Self.run(pipeline, asOf: "2026-06-01")
            try Self.secondNight(pipeline)
            let files = Self.changesFiles(try mode(Self.options(pipeline, asOf: "2026-07-01")))
            #expect(files.count == 4)
            return files
        }
        let quiet = Progress(mode: .quiet)
        let reference = try secondNight(try Self.world()) {
            try PipelineRun.run($0, progress: quiet).published
        }
        let bounded = try secondNight(try Self.world()) {
            try ShardedRun.bounded($0, memory: 64 << 20, progress: quiet, shards: 3).published
        }
        #expect(bounded == reference)
        let array = try secondNight(try Self.world()) { o in
            let work = Paths.temporary() + "/work"
            for i in 0..<2 {
                _ = try ShardedRun.partition(o, work: work, shards: 4, task: i, tasks: 2, progress: quiet)
            }
            for k in 0..<4 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 4, progress: quiet) }
            return try ShardedRun.merge(o, work: work, shards: 4, progress: quiet).published
        }
        #expect(array == reference)
        let incremental = try secondNight(try Self.world(incremental: true)) {
            try PipelineRun.run($0, progress: quiet).published
        }
        #expect(incremental == reference)
        let incrementalBounded = try secondNight(try Self.world(incremental: true)) {
            try ShardedRun.bounded($0, memory: 64 << 20, progress: quiet, shards: 2).published
        }
        #expect(incrementalBounded == reference)
    }

    @Test("a baseline's segment file changed since it was published fails the run (65), naming it")
    func tamperedBaseline() throws {
        let pipeline = try Self.world()
        let first = try Self.run(pipeline, asOf: "2026-06-01")
        let path = first + "/segments/wb.b.csv"
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text = text.replacingOccurrences(of: ",wb.b,2,", with: ",wb.b,3,")
        #expect(text.contains(",wb.b,3,"))
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        try Self.secondNight(pipeline)
        #expect {
            try Self.run(pipeline, asOf: "2026-07-01")
        } throws: { e in
            (e as? WinBackError)?.code == .badData && "\(e)".contains("wb.b.csv")
        }
    }
}
