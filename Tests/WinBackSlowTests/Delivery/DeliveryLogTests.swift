import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackSupport

/// `--log-format json` (docs/rules.md §10.4): one JSON object per stderr line, through the
/// command line.
@Suite("Delivery: JSON logs", .serialized, .tags(.slow))
struct DeliveryLogTests {
    /// The events docs/rules.md §10.4 documents, with their level.
    static let documented = [
        "stage_finished": "info", "repartition": "info", "inflater": "info", "changes": "info", "published": "info",
        "pruned": "info", "metrics": "warning", "offer_without_link": "warning",
        "failed": "error",
    ]

    static func world(seed: Int) throws -> String {
        let pipeline = try DeliveryFixture.makeWorld(customers: 300, seed: seed)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let ids = DeliveryFixture.identities(for: try DeliveryFixture.customers(worldFolder: folder))
        try DeliveryFixture.writeGzip(ids.text, to: folder + "/identities.csv.gz")
        try DeliveryFixture.addToOutput(pipeline, "destinations: [braze, klaviyo]")
        try DeliveryFixture.append(pipeline, "identities:\n  path: identities.csv.gz\n")
        return pipeline
    }

    /// Every stderr line as a JSON object; records an issue for a line that is not one, or
    /// lacks time, level, event or pipeline.
    static func events(_ stderr: String, sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        var out: [[String: Any]] = []
        #expect(stderr.hasSuffix("\n"), sourceLocation: sourceLocation)
        for line in stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("not a JSON object: \(line)", sourceLocation: sourceLocation)
                continue
            }
            let time = object["time"] as? String ?? ""
            #expect(
                time.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"#, options: .regularExpression) != nil,
                "time: \(line)", sourceLocation: sourceLocation)
            let level = object["level"] as? String ?? ""
            #expect(["info", "warning", "error"].contains(level), "level: \(line)", sourceLocation: sourceLocation)
            let event = object["event"] as? String ?? ""
            #expect(
                documented[event] == level, "event \(event) at \(level) is not documented: \(line)",
                sourceLocation: sourceLocation)
            #expect(object["pipeline"] is String, "pipeline: \(line)", sourceLocation: sourceLocation)
            out.append(object)
        }
        return out
    }

    /// Checks the last line of a failed command: level error, event failed, its exit code.
    static func expectFailed(
        _ r: CLI.Result, _ expected: Int32, pipeline: String?, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(r.status == expected, "\(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stdout == "", sourceLocation: sourceLocation)
        let events = Self.events(r.stderr, sourceLocation: sourceLocation)
        let last = events.last
        #expect(last?["level"] as? String == "error", sourceLocation: sourceLocation)
        #expect(last?["event"] as? String == "failed", sourceLocation: sourceLocation)
        #expect(last?["exitCode"] as? Int == Int(r.status), sourceLocation: sourceLocation)
        let message = last?["message"] as? String ?? ""
        let code = last?["code"] as? String ?? ""
        #expect(message.count > 0, sourceLocation: sourceLocation)
        #expect(code.count > 0, sourceLocation: sourceLocation)
        #expect(events.dropLast().allSatisfy { $0["event"] as? String != "failed" }, sourceLocation: sourceLocation)
        if let pipeline {
            #expect(
                last?["pipeline"] as? String == pipeline, "the failure names the pipeline it ran: \(r.stderr)",
                sourceLocation: sourceLocation)
        }
    }

    @Test("run: every line a JSON object; stages with stage and seconds; published with the folder")
    func runSucceeds() throws {
        let pipeline = try Self.world(seed: 31)
        let r = try CLI.run(["run", pipeline, "--log-format", "json"])
        #expect(r.status == 0, "\(r.stderr)")
        let events = Self.events(r.stderr)
        #expect(events.allSatisfy { $0["pipeline"] as? String == "reference" }, "\(r.stderr)")
        let stages = events.filter { $0["event"] as? String == "stage_finished" }
        #expect(stages.count >= 3, "\(r.stderr)")
        for s in stages {
            let stage = s["stage"] as? String ?? ""
            #expect(stage.count > 0, "\(s)")
            let seconds = s["seconds"] as? Double
            #expect(seconds != nil && seconds! >= 0, "\(s)")
            #expect(s["summary"] is String, "\(s)")
            #expect((s["peakResidentBytes"] as? Int ?? 0) > 0, "\(s)")
        }
        let names = stages.compactMap { $0["stage"] as? String }
        for stage in ["read", "evaluate", "write"] { #expect(names.contains(stage), "\(names)") }
        let published = events.filter { $0["event"] as? String == "published" }
        #expect(published.count == 1)
        let folder = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(published.first?["folder"] as? String == folder)
        #expect(FileManager.default.fileExists(atPath: folder + "/destinations/braze/best-offer-001.csv"))
        // After the publish, only the steps after it speak: pruning (docs/rules.md §10.6).
        let after = events.drop { $0["event"] as? String != "published" }.dropFirst()
        #expect(after.allSatisfy { ["pruned", "metrics"].contains($0["event"] as? String ?? "") }, "\(after)")
    }

    @Test("text stays the default: stage lines in words, no JSON")
    func textIsDefault() throws {
        let pipeline = try Self.world(seed: 32)
        for args in [["run", pipeline], ["run", pipeline, "--log-format", "text"]] {
            let r = try CLI.run(args)
            #expect(r.status == 0, "\(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(!lines.isEmpty)
            #expect(lines.allSatisfy { $0.hasPrefix("winback: ") }, "\(r.stderr)")
            #expect(!lines.contains { $0.hasPrefix("{") })
            #expect(lines.contains { $0.hasPrefix("winback: read: ") })
        }
        let failed = try CLI.run(["run", pipeline + ".absent"])
        #expect(failed.status == 78)
        #expect(failed.stderr.hasPrefix("winback: error"), "\(failed.stderr)")
    }

    @Test("failed runs end with level error, event failed and the process's exit code")
    func runFails() throws {
        let pipeline = try Self.world(seed: 33)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let original = try String(contentsOfFile: pipeline, encoding: .utf8)
        // 65: lines past the reject budget, read after the pipeline was resolved.
        try String(repeating: "{garbage\n", count: 40).write(
            toFile: folder + "/transactions-9.jsonl", atomically: true, encoding: .utf8)
        try DeliveryFixture.replace(pipeline, "transactions-*.jsonl.gz", "transactions-*.jsonl*")
        Self.expectFailed(try CLI.run(["run", pipeline, "--log-format", "json"]), 65, pipeline: "reference")
        try original.write(toFile: pipeline, atomically: true, encoding: .utf8)
        // 66: a glob matching nothing, in a pipeline file that was read.
        try DeliveryFixture.replace(pipeline, "transactions-*.jsonl.gz", "nothing-*.jsonl.gz")
        Self.expectFailed(try CLI.run(["run", pipeline, "--log-format", "json"]), 66, pipeline: "reference")
        try original.write(toFile: pipeline, atomically: true, encoding: .utf8)
        // 78: an invalid pipeline file; a missing one.
        try DeliveryFixture.append(pipeline, "consecutiveGapDayz: 30\n")
        Self.expectFailed(try CLI.run(["run", pipeline, "--log-format", "json"]), 78, pipeline: nil)
        Self.expectFailed(try CLI.run(["run", folder + "/absent.yaml", "--log-format", "json"]), 78, pipeline: nil)
    }

    @Test("partition, shards and merge log JSON too; the merge publishes")
    func shardedJSON() throws {
        let pipeline = try Self.world(seed: 34)
        let work = Paths.temporary() + "/work"
        let json = ["--log-format", "json"]
        let common = ["--work", work, "--shards", "2"]
        for task in 0..<2 {
            let r = try CLI.run(["partition", pipeline, "--tasks", "2", "--task", "\(task)"] + common + json)
            #expect(r.status == 0, "\(r.stderr)")
            let stages = Self.events(r.stderr).filter { $0["event"] as? String == "stage_finished" }
            #expect(stages.map { $0["stage"] as? String } == ["partition \(task) of 2"], "\(r.stderr)")
        }
        for shard in 0..<2 {
            let r = try CLI.run(["run", pipeline, "--shard", "\(shard)"] + common + json)
            #expect(r.status == 0, "\(r.stderr)")
            let stages = Self.events(r.stderr).filter { $0["event"] as? String == "stage_finished" }
            #expect(stages.map { $0["stage"] as? String } == ["shard \(shard) of 2"], "\(r.stderr)")
        }
        let merged = try CLI.run(["merge", pipeline] + common + json)
        #expect(merged.status == 0, "\(merged.stderr)")
        let events = Self.events(merged.stderr)
        #expect(events.allSatisfy { $0["pipeline"] as? String == "reference" }, "\(merged.stderr)")
        let folder = merged.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(events.first { $0["event"] as? String == "published" }?["folder"] as? String == folder)
        // A merge with a shard missing fails in JSON too.
        try FileManager.default.removeItem(atPath: work + "/shards/1")
        let failed = try CLI.run(["merge", pipeline] + common + json)
        Self.expectFailed(failed, 66, pipeline: "reference")
    }
}
