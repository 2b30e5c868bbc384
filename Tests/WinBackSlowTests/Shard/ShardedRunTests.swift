import Foundation
import Testing
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTestSupport
import WinBackTesting
import WinBackWrite

@testable import WinBack

/// Runs past one machine (docs/rules.md §8): partition → shards → merge, in this process and
/// through the command line, against a run in memory.
@Suite("Runs past one machine: partition, shards, merge, memory limit", .serialized, .tags(.slow))
struct ShardedRunTests {
    static let asOf = ms("2026-11-22")

    /// A generated world (with duplicates across files, renewal info, rejects-free, and a 15 %
    /// holdout experiment: docs/rules.md §9) and its pipeline file.
    static func world(customers: Int = 600, seed: UInt64 = 5) throws -> String {
        let dir = Paths.temporary() + "/world"
        var o = GenerateOptions(customers: customers, seed: seed, asOf: asOf)
        o.threads = 2
        o.experiment = Experiment(name: "shard-test", basisPoints: 1_500, start: ms("2026-02-01"))
        _ = try WorldGenerator.generate(o, to: dir)
        return dir + "/pipeline.yaml"
    }

    static func options(_ pipeline: String, output: String, threads: Int = 2) -> RunOptions {
        var o = RunOptions(pipelinePath: pipeline, output: output, threads: threads)
        o.now = asOf
        return o
    }

    /// A generated world's pipeline, a work folder for its stages and the options they run with.
    static func stages(customers: Int, seed: UInt64) throws -> (pipeline: String, work: String, options: RunOptions) {
        let pipeline = try world(customers: customers, seed: seed)
        return (pipeline, Paths.temporary() + "/work", options(pipeline, output: Paths.temporary()))
    }

    static func inMemory(_ pipeline: String, threads: Int = 2) throws -> [String: Data] {
        let out = Paths.temporary()
        let s = try PipelineRun.run(options(pipeline, output: out, threads: threads), progress: Progress(mode: .quiet))
        return publishedFiles(s.published)
    }

    static func expectSame(_ a: [String: Data], _ b: [String: Data], sourceLocation: SourceLocation = #_sourceLocation)
    {
        #expect(a.keys.sorted() == b.keys.sorted(), sourceLocation: sourceLocation)
        #expect(a.count > 10, sourceLocation: sourceLocation)
        for (k, v) in a where b[k] != v {
            Issue.record("\(k) differs from the run in memory", sourceLocation: sourceLocation)
        }
    }

    @Test("partition (3 tasks) → 4 shards → merge equals a run in memory, for 1 and 3 threads")
    func threeTasksFourShards() throws {
        let pipeline = try Self.world()
        let reference = try Self.inMemory(pipeline)
        // Every registered report file (ReportWriter.reportFiles) is among the files compared, so
        // a report a merge writes otherwise than a run fails here.
        for file in ReportWriter.files(experiment: true) {
            #expect(!(reference["reports/" + file] ?? Data()).isEmpty, "\(file) written by the run")
        }
        // The experiment's files are among those compared, with rows to compare.
        for f in ["segments/holdout.csv", "reports/winback-uplift.csv", "reports/retention-after-return.csv"] {
            #expect(
                (reference[f].map { String(decoding: $0, as: UTF8.self) }?.split(separator: "\n").count ?? 0) > 3,
                "\(f)")
        }
        for threads in [1, 3] {
            let work = Paths.temporary() + "/work"
            let o = Self.options(pipeline, output: Paths.temporary(), threads: threads)
            let quiet = Progress(mode: .quiet)
            for i in [2, 0, 1] {
                _ = try ShardedRun.partition(o, work: work, shards: 4, task: i, tasks: 3, progress: quiet)
            }
            for k in [3, 1, 0, 2] { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 4, progress: quiet) }
            let s = try ShardedRun.merge(o, work: work, shards: 4, progress: quiet)
            Self.expectSame(publishedFiles(s.published), reference)
            let parts = filesBelow(work + "/parts").filter { $0.hasSuffix(".part") }
            #expect(parts.count == 12)
        }
    }

    @Test(
        "files written in many sections (a few rows each), with 1 and 2 partition tasks, give the files of a run in memory"
    )
    func sectionsOfLargeFiles() throws {
        let pipeline = try Self.world(customers: 300, seed: 21)
        let reference = try Self.inMemory(pipeline)
        for (tasks, spill) in [(1, 7), (2, 50), (1, 1)] {
            let work = WorkFolder(Paths.temporary() + "/work")
            let p = try ResolvedPipeline.resolve(Self.options(pipeline, output: Paths.temporary()))
            var sections = 0
            for i in 0..<tasks {
                _ = try Partition.run(p, work: work, shards: 3, task: i, tasks: tasks, spillRows: spill)
            }
            for k in 0..<3 {
                for i in 0..<tasks {
                    let (m, _) = try #require(
                        try IntermediateFile.readJSON(PartitionMarker.self, from: work.task(i) + "/_SUCCESS"))
                    let part = try #require(m.parts.first { $0.shard == k })
                    let reader = try PartReader(
                        path: work.part(task: i, shard: k), bytes: part.bytes, sha256: part.sha256)
                    sections += try reader.sectionsByFile().reduce(0) { $0 + $1.offsets.count }
                }
                _ = try ShardRun.run(p, work: work, shard: k, shards: 3)
            }
            #expect(sections > p.transactionFiles.count * 3, "files are written in several sections each")
            let s = try Merge.run(p, work: work, shards: 3, progress: Progress(mode: .quiet))
            Self.expectSame(publishedFiles(s.published), reference)
        }
    }

    @Test("one transactionId under two customers is two transactions: four shards keep what a run in memory keeps")
    func transactionIdsUnderTwoCustomers() throws {
        let pipeline = try Self.world(customers: 400, seed: 31)
        let dir = (pipeline as NSString).deletingLastPathComponent
        let files = try FileManager.default.contentsOfDirectory(atPath: dir)
            .filter { $0.hasPrefix("transactions-") && $0.hasSuffix(".jsonl.gz") }.sorted()
        // A file sorted after every other: each row of the last month again, newer than any
        // version, under the customer of the row after it (versions for a run that
        // deduplicated across customers, which would then drop the originals).
        let lines = String(decoding: try ReadSupport.readAll(dir + "/" + files.last!), as: UTF8.self)
            .split(separator: "\n").map(String.init)
        let original = #""originalTransactionId":\s*"[0-9]+""#
        let signed = #""signedDate":\s*[0-9]+"#
        func field(_ line: String) -> String { String(line[line.range(of: original, options: .regularExpression)!]) }
        var moved: [String] = []
        for (i, line) in lines.enumerated() where field(line) != field(lines[(i + 1) % lines.count]) {
            moved.append(
                line.replacingOccurrences(
                    of: original, with: field(lines[(i + 1) % lines.count]), options: .regularExpression
                ).replacingOccurrences(of: signed, with: #""signedDate":4102444800000"#, options: .regularExpression))
        }
        #expect(moved.count > 100)
        let before = try counters(pipeline)
        _ = try ReadSupport.write(
            ReadSupport.gzip(moved.joined(separator: "\n") + "\n"),
            to: URL(fileURLWithPath: dir + "/transactions-9999-99.jsonl.gz"))
        let reference = try Self.inMemory(pipeline)
        // Every moved row is a transaction of its own: none supersedes the row it copies.
        let after = try counters(pipeline)
        #expect(after["rowsRead"] == before["rowsRead"]! + moved.count)
        #expect(after["duplicates"] == before["duplicates"])
        let work = Paths.temporary() + "/work"
        let o = Self.options(pipeline, output: Paths.temporary())
        let quiet = Progress(mode: .quiet)
        _ = try ShardedRun.partition(o, work: work, shards: 4, task: 0, tasks: 1, progress: quiet)
        for k in 0..<4 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 4, progress: quiet) }
        let s = try ShardedRun.merge(o, work: work, shards: 4, progress: quiet)
        Self.expectSame(publishedFiles(s.published), reference)
    }

    /// The manifest's counters (docs/rules.md §4.4) of a run in memory.
    private func counters(_ pipeline: String) throws -> [String: Int] {
        let s = try PipelineRun.run(
            Self.options(pipeline, output: Paths.temporary()), progress: Progress(mode: .quiet))
        let manifest = try #require(FileManager.default.contents(atPath: s.published + "/manifest.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: manifest) as? [String: Any])
        return try #require(object["counters"] as? [String: Int])
    }

    @Test("with audience.requireApple strict, shards keep and drop the rows a run in memory does")
    func requireAppleSharded() throws {
        let pipeline = try Self.world(customers: 500, seed: 11)
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try (text + "\naudience:\n  requireApple: strict\n").write(toFile: pipeline, atomically: true, encoding: .utf8)
        let reference = try Self.inMemory(pipeline)
        let work = Paths.temporary() + "/work"
        let o = Self.options(pipeline, output: Paths.temporary())
        let quiet = Progress(mode: .quiet)
        for i in 0..<2 { _ = try ShardedRun.partition(o, work: work, shards: 3, task: i, tasks: 2, progress: quiet) }
        for k in 0..<3 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 3, progress: quiet) }
        let s = try ShardedRun.merge(o, work: work, shards: 3, progress: quiet)
        Self.expectSame(publishedFiles(s.published), reference)
        let manifest = try String(contentsOfFile: s.published + "/manifest.json", encoding: .utf8)
        #expect(manifest.contains("\"requireApple\" : \"strict\""))
        let disagreements = reference["reports/apple-disagreements.csv"].map { String(decoding: $0, as: UTF8.self) }
        #expect((disagreements?.split(separator: "\n").count ?? 0) > 1)
    }

    @Test("the command line: task and shard indexes by flag, SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX")
    func commandLineIndexes() throws {
        let pipeline = try Self.world(customers: 300, seed: 6)
        let reference = try Self.inMemory(pipeline)
        let work = Paths.temporary() + "/work"
        let output = Paths.temporary()
        let common = ["--as-of", "2026-11-22", "--work", work]
        func expectOK(_ r: CLI.Result) { #expect(r.status == 0, "\(r.stderr)") }
        expectOK(try CLI.run(["partition", pipeline, "--shards", "4", "--tasks", "3", "--task", "0"] + common))
        expectOK(
            try CLI.run(
                ["partition", pipeline, "--shards", "4", "--tasks", "3"] + common,
                environment: ["SLURM_ARRAY_TASK_ID": "1"]))
        expectOK(
            try CLI.run(
                ["partition", pipeline, "--shards", "4", "--tasks", "3"] + common,
                environment: ["JOB_COMPLETION_INDEX": "2"]))
        expectOK(try CLI.run(["run", pipeline, "--shards", "4", "--shard", "0"] + common))
        expectOK(try CLI.run(["run", pipeline, "--shards", "4"] + common, environment: ["SLURM_ARRAY_TASK_ID": "1"]))
        expectOK(try CLI.run(["run", pipeline, "--shards", "4"] + common, environment: ["JOB_COMPLETION_INDEX": "2"]))
        expectOK(
            try CLI.run(["run", pipeline, "--shards", "4"] + common, environment: ["AWS_BATCH_JOB_ARRAY_INDEX": "3"]))
        let merged = try CLI.run(["merge", pipeline, "--shards", "4", "--output", output] + common)
        expectOK(merged)
        Self.expectSame(publishedFiles(merged.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), reference)
        // No index at all is a usage error.
        let none = try CLI.run(["run", pipeline, "--shards", "4"] + common, environment: ["UNRELATED": "1"])
        #expect(none.status == 64)
        #expect(none.stderr.contains("SLURM_ARRAY_TASK_ID"))
        let outside = try CLI.run(["run", pipeline, "--shards", "4", "--shard", "4"] + common)
        #expect(outside.status == 64)
    }

    @Test("a retried partition task or shard changes nothing")
    func retriesChangeNothing() throws {
        let (pipeline, work, o) = try Self.stages(customers: 300, seed: 7)
        let quiet = Progress(mode: .quiet)
        for i in 0..<2 { _ = try ShardedRun.partition(o, work: work, shards: 3, task: i, tasks: 2, progress: quiet) }
        for k in 0..<3 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 3, progress: quiet) }
        let first = publishedFiles(try ShardedRun.merge(o, work: work, shards: 3, progress: quiet).published)
        // A shard retried: the merge gives the same files.
        _ = try ShardedRun.shard(o, work: work, shard: 1, shards: 3, progress: quiet)
        let o2 = Self.options(pipeline, output: Paths.temporary())
        Self.expectSame(
            publishedFiles(try ShardedRun.merge(o2, work: work, shards: 3, progress: quiet).published), first)
        // A partition task retried: the shards read before it must run again, then all agree.
        _ = try ShardedRun.partition(o, work: work, shards: 3, task: 1, tasks: 2, progress: quiet)
        let o3 = Self.options(pipeline, output: Paths.temporary())
        try expectWinBackError(exit: 66, "merge used shards computed from an earlier partition") {
            _ = try ShardedRun.merge(o3, work: work, shards: 3, progress: quiet)
        }
        for k in 0..<3 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 3, progress: quiet) }
        Self.expectSame(
            publishedFiles(try ShardedRun.merge(o3, work: work, shards: 3, progress: quiet).published), first)
        #expect(!filesBelow(work).contains { $0.contains(".tmp-") })
    }

    @Test("a merge with a shard missing exits 66 naming it and publishes nothing; a shard before partition, 66")
    func missingInputs() throws {
        let pipeline = try Self.world(customers: 200, seed: 8)
        let work = Paths.temporary() + "/work"
        let output = Paths.temporary()
        let quiet = Progress(mode: .quiet)
        let o = Self.options(pipeline, output: output)
        try expectWinBackError(exit: 66, "a shard ran with no partition") {
            _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: quiet)
        }
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 0, tasks: 2, progress: quiet)
        if let e = try expectWinBackError(
            exit: 66, "a shard ran with a partition task missing",
            {
                _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: quiet)
            })
        {
            #expect("\(e)".contains("task 1 of 2"))
        }
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 1, tasks: 2, progress: quiet)
        _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: quiet)
        if let e = try expectWinBackError(
            exit: 66, "merged with a shard missing",
            {
                _ = try ShardedRun.merge(o, work: work, shards: 2, progress: quiet)
            })
        {
            #expect("\(e)".contains("shard 1 of 2"))
        }
        let name = (try PipelineConfig.load(path: pipeline)).name
        #expect(!FileManager.default.fileExists(atPath: output + "/\(name)/latest"))
    }

    @Test("a shard count or pipeline that differs from the partition's fails with 78")
    func mismatches() throws {
        let (pipeline, work, o) = try Self.stages(customers: 200, seed: 9)
        let quiet = Progress(mode: .quiet)
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 0, tasks: 1, progress: quiet)
        if let e = try expectWinBackError(
            exit: 78, "a shard ran with another shard count",
            {
                _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 3, progress: quiet)
            })
        {
            #expect("\(e)".contains("shard count"))
        }
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try (text + "\n# changed\n").write(toFile: pipeline, atomically: true, encoding: .utf8)
        if let e = try expectWinBackError(
            exit: 78, "a shard ran with another pipeline file",
            {
                _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: quiet)
            })
        {
            #expect("\(e)".contains("pipeline file"))
        }
    }

    @Test("a memory limit partitions the run into shards and publishes the same files; nothing is left behind")
    func memoryLimit() throws {
        let pipeline = try Self.world()
        let reference = try Self.inMemory(pipeline)
        let output = Paths.temporary()
        var o = Self.options(pipeline, output: output)
        o.memory = 64_000_000
        let p = try ResolvedPipeline.resolve(o)
        // The shard count follows the input's size: this small world fits in one shard at 64 MB,
        // a hundred times its input would not.
        let gz = p.transactionFiles.reduce(0) { $0 + InputFiles.size($1) }
        #expect(ShardedRun.shardCount(p, memory: 64_000_000) == 1)
        #expect(ShardedRun.shardCount(estimate: 100 * 2.0 * Double(gz), memory: 64_000_000) > 1)
        #expect(ShardedRun.shardCount(estimate: 10e9, memory: 2_000_000_000) == 6)
        // Near the 32 MB minimum the run's own code and buffers take most of the limit: a shard
        // gets an eighth of it; above 64 MB, what the run's own 48 MiB leave.
        #expect(ShardedRun.room(32_000_000) == 4_000_000)
        #expect(ShardedRun.room(64_000_000) == 64_000_000 - (48 << 20))
        #expect(ShardedRun.room(2_000_000_000) == 2_000_000_000 - (48 << 20))
        #expect(ShardedRun.shardCount(estimate: 31e6, memory: 32_000_000) == 8)
        // Through the pipeline's entry point (one shard), and with several shards.
        let s = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        Self.expectSame(publishedFiles(s.published), reference)
        let several = try ShardedRun.bounded(
            Self.options(pipeline, output: Paths.temporary()), memory: 64_000_000, progress: Progress(mode: .quiet),
            shards: 5)
        Self.expectSame(publishedFiles(several.published), reference)
        let root = (s.published as NSString).deletingLastPathComponent
        let entries = try FileManager.default.contentsOfDirectory(atPath: root)
        #expect(!entries.contains { $0.hasPrefix(".work-") })
        // A killed run's parts are removed by the next run under the lock.
        try FileManager.default.createDirectory(atPath: root + "/.work-999999/parts", withIntermediateDirectories: true)
        _ = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: root)).contains { $0.hasPrefix(".work-") })
    }

    @Test("the reject budget covers the whole sharded run: merge fails with 65 and publishes nothing")
    func rejectBudgetOverTheRun() throws {
        let pipeline = try Self.world(customers: 200, seed: 10)
        let folder = (pipeline as NSString).deletingLastPathComponent
        // A file of rejected lines, read by one partition task only.
        try String(repeating: "{not json\n", count: 50).write(
            toFile: folder + "/transactions-9999-01.jsonl", atomically: true, encoding: .utf8)
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        text = text.replacingOccurrences(of: "transactions-*.jsonl.gz", with: "transactions-*.jsonl*")
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        let work = Paths.temporary() + "/work"
        let output = Paths.temporary()
        let quiet = Progress(mode: .quiet)
        let o = Self.options(pipeline, output: output)
        for i in 0..<3 { _ = try ShardedRun.partition(o, work: work, shards: 2, task: i, tasks: 3, progress: quiet) }
        for k in 0..<2 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 2, progress: quiet) }
        try expectWinBackError(exit: 65, "published past the reject budget") {
            _ = try ShardedRun.merge(o, work: work, shards: 2, progress: quiet)
        }
        let name = (try PipelineConfig.load(path: pipeline)).name
        #expect(!FileManager.default.fileExists(atPath: output + "/\(name)/latest"))
        let rejects = try String(contentsOfFile: output + "/\(name)/.failed-2026-11-22/rejects.csv", encoding: .utf8)
        #expect(rejects.split(separator: "\n").count == 51)
    }
}

extension ShardedRunTests {
    @Test("an input file that appears between partition and shard fails the shard with 78")
    func inputsChanged() throws {
        let (pipeline, work, o) = try Self.stages(customers: 200, seed: 12)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let quiet = Progress(mode: .quiet)
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 0, tasks: 1, progress: quiet)
        try FileManager.default.copyItem(
            atPath: folder + "/transactions-2026-10.jsonl.gz", toPath: folder + "/transactions-2026-10b.jsonl.gz")
        if let e = try expectWinBackError(
            exit: 78, "a shard ran on another set of input files",
            {
                _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: quiet)
            })
        {
            #expect("\(e)".contains("input files"))
        }
    }
}

extension ShardedRunTests {
    @Test("a signed world (renewal info among the transactions) sharded equals the run in memory")
    func signedWorldSharded() throws {
        let dir = Paths.temporary() + "/world"
        var g = GenerateOptions(customers: 300, seed: 13, asOf: Self.asOf, format: .appstoreSigned)
        g.threads = 2
        _ = try WorldGenerator.generate(g, to: dir)
        let pipeline = dir + "/pipeline.yaml"
        let reference = try Self.inMemory(pipeline)
        #expect(reference["reports/apple-agreement.csv"] != nil)
        let work = Paths.temporary() + "/work"
        let o = Self.options(pipeline, output: Paths.temporary())
        let quiet = Progress(mode: .quiet)
        for i in 0..<2 { _ = try ShardedRun.partition(o, work: work, shards: 3, task: i, tasks: 2, progress: quiet) }
        let found = filesBelow(work + "/parts").filter { $0.hasSuffix("renewals.json") }
        #expect(found.count == 2)
        let carried = try found.reduce(0) {
            $0 + (try IntermediateFile.readJSON([FoundRenewal].self, from: work + "/parts/" + $1)?.0.count ?? 0)
        }
        #expect(carried > 0)
        for k in 0..<3 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 3, progress: quiet) }
        let s = try ShardedRun.merge(o, work: work, shards: 3, progress: quiet)
        Self.expectSame(publishedFiles(s.published), reference)
    }
}
