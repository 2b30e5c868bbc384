import Foundation
import Testing
import WinBack
import WinBackModel
import WinBackRules
import WinBackTestSupport

/// Money's reports (docs/rules.md §13) are sums over customers: a priced world, with a rates
/// file, publishes the same bytes in memory for 1–3 threads, memory-bounded, and partitioned
/// into shards.
@Suite("Money: the same revenue reports however the run is split", .serialized, .tags(.slow))
struct MoneyRunTests {
    static let python = CLI.python

    /// A world of Tests/Reference/make_world.py with `money:` (USD; EUR and JPY rates, one of
    /// them monthly; KRW without a rate), prorated and family refunds and the largest prices.
    static func world(seed: Int, customers: Int) throws -> String {
        let dir = Paths.temporary() + "/world"
        let r = try CLI.output(
            python!,
            [
                Paths.repo + "/Tests/Reference/make_world.py", dir, "--customers", String(customers), "--seed",
                String(seed), "--money",
            ])
        #expect(r.status == 0, "\(r.text)")
        return dir + "/pipeline.yaml"
    }

    @Test(
        "1–3 threads, memory-bounded (one shard and five) and partition → shards → merge publish the same files",
        .enabled(if: python != nil, "needs python3 (Debian: python3) to make the world"))
    func sameBytes() throws {
        let pipeline = try Self.world(seed: 11, customers: 900)
        let reference = try ShardedRunTests.inMemory(pipeline, threads: 2)
        let reports = "reports/"
        for f in ["revenue-after-return.csv", "winback-revenue-uplift.csv"] {
            let lines = reference[reports + f].map { String(decoding: $0, as: UTF8.self) }?.split(separator: "\n")
            #expect((lines?.count ?? 0) > 5, "\(f)")
        }
        for threads in [1, 3] {
            ShardedRunTests.expectSame(try ShardedRunTests.inMemory(pipeline, threads: threads), reference)
        }
        let quiet = Progress(mode: .quiet)
        var o = ShardedRunTests.options(pipeline, output: Paths.temporary())
        o.memory = 64_000_000
        let bounded = try PipelineRun.run(o, progress: quiet)
        ShardedRunTests.expectSame(publishedFiles(bounded.published), reference)
        let five = try ShardedRun.bounded(
            ShardedRunTests.options(pipeline, output: Paths.temporary()), memory: 64_000_000, progress: quiet,
            shards: 5)
        ShardedRunTests.expectSame(publishedFiles(five.published), reference)
        for threads in [1, 3] {
            let work = Paths.temporary() + "/work"
            let s = ShardedRunTests.options(pipeline, output: Paths.temporary(), threads: threads)
            for i in [2, 0, 1] {
                _ = try ShardedRun.partition(s, work: work, shards: 4, task: i, tasks: 3, progress: quiet)
            }
            for k in [3, 1, 0, 2] { _ = try ShardedRun.shard(s, work: work, shard: k, shards: 4, progress: quiet) }
            let merged = try ShardedRun.merge(s, work: work, shards: 4, progress: quiet)
            ShardedRunTests.expectSame(publishedFiles(merged.published), reference)
            // The manifest's counts of amounts are sums too.
            let manifest = try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: merged.published + "/manifest.json")))
            let money = (manifest as? [String: Any])?["money"] as? [String: Any]
            #expect(money?["currency"] as? String == "USD")
            #expect(((money?["unconverted"] as? [String: Int])?["KRW"] ?? 0) > 0)
            #expect((money?["unpriced"] as? Int ?? 0) > 0)
        }
        // Incremental nights: the first builds the state, a rerun takes every file from it (its
        // rows' amounts and refunds with them), in memory and under --memory: the same files.
        let incremental = (pipeline as NSString).deletingLastPathComponent + "/incremental.yaml"
        try (String(contentsOfFile: pipeline, encoding: .utf8) + "\nincremental: true\n").write(
            toFile: incremental, atomically: true, encoding: .utf8)
        // (A state is kept in memory or memory-bounded, so each way has its own output.)
        for memory in [nil, 64_000_000] {
            let out = Paths.temporary()
            for _ in 0..<2 {
                var o = ShardedRunTests.options(incremental, output: out)
                o.memory = memory
                let night = try PipelineRun.run(o, progress: quiet)
                ShardedRunTests.expectSame(publishedFiles(night.published), reference)
            }
            let manifest = try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: out + "/reference/latest/manifest.json")))
            let state = (manifest as? [String: Any])?["incremental"] as? [String: Any]
            #expect(state?["state"] as? String == "absorbed" && (state?["filesFromState"] as? Int ?? 0) > 0)
        }
    }

    @Test(
        "a rates file that is missing or malformed stops the run before anything is read",
        .enabled(if: python != nil, "needs python3 (Debian: python3) to make the world"))
    func badRates() throws {
        let pipeline = try Self.world(seed: 2, customers: 50)
        let rates = (pipeline as NSString).deletingLastPathComponent + "/rates.csv"
        try "month,currency,rate\n,EUR,1,1\n".write(toFile: rates, atomically: true, encoding: .utf8)
        let o = ShardedRunTests.options(pipeline, output: Paths.temporary())
        #expect {
            try PipelineRun.run(o, progress: Progress(mode: .quiet))
        } throws: { e in
            (e as? WinBackError)?.code == .configuration && "\(e)".contains("rates file line 2")
        }
        // validate says so too, as a configuration problem (78).
        let malformed = PipelineValidation.check(pipelinePath: pipeline)
        #expect(malformed.problems.contains { $0.contains("rates file line 2") } && malformed.inputProblems == 0)
        try FileManager.default.removeItem(atPath: rates)
        #expect {
            try PipelineRun.run(o, progress: Progress(mode: .quiet))
        } throws: { e in
            (e as? WinBackError)?.code == .noInput
        }
        // A missing rates file is missing input (66) for validate as for run.
        let missing = PipelineValidation.check(pipelinePath: pipeline)
        #expect(missing.problems.contains { $0.contains("rates file is missing") } && missing.inputProblems == 1)
        #expect(missing.exitCode == WinBackError.Code.noInput.exitCode)
    }
}
