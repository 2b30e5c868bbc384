import Foundation
import WinBack

extension Benchmark {
    /// How a run past one machine is measured against the run in memory (docs/rules.md §8).
    public enum Partitioned: Sendable {
        /// `run --memory`: the three stages in one process.
        case memory(Int)
        /// The array job's stages as separate processes, one after another: `partition` with
        /// `tasks` tasks, `run --shard` for each of `shards` shards, `merge`.
        case shards(Int, tasks: Int)
    }

    /// Rounds of the run in memory and the partitioned run in turn; returns the report's lines:
    /// wall time, CPU time, peak resident memory (the largest of any process), the bytes of the
    /// part files against the gzipped input, and whether the published files are identical.
    public static func partitioned(_ o: Options, _ how: Partitioned, log: @escaping (String) -> Void) throws -> [String]
    {
        let dir = try world(o, log: log)
        let pipeline = dir + "/pipeline.yaml"
        let files = try InputFiles.resolve(["data/transactions-*.jsonl.gz"], base: dir)
        let compressed = files.reduce(0) { $0 + InputFiles.size($1) }
        let threads = ["--threads", String(o.threads)]
        func fresh(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

        var memoryRuns: [ChildRun] = []
        var partRuns: [ChildRun] = []
        var partBytes = 0
        var identical = true
        for i in 0..<o.runs {
            log("round \(i + 1)/\(o.runs): in memory, then partitioned …")
            fresh(dir + "/out")
            memoryRuns.append(
                try child(o.executable, ["run", pipeline, "--quiet", "--output", dir + "/out"] + threads))
            fresh(dir + "/out-partitioned")
            switch how {
            case .memory(let bytes):
                partRuns.append(
                    try child(
                        o.executable,
                        ["run", pipeline, "--quiet", "--output", dir + "/out-partitioned", "--memory", String(bytes)]
                            + threads))
            case .shards(let n, let tasks):
                let work = dir + "/work"
                fresh(work)
                var stages: [ChildRun] = []
                let common = ["--quiet", "--work", work, "--shards", String(n)]
                for t in 0..<tasks {
                    stages.append(
                        try child(
                            o.executable,
                            ["partition", pipeline, "--task", String(t), "--tasks", String(tasks)] + common + threads))
                }
                partBytes = filesBelow(work + "/parts").filter { $0.hasSuffix(".part") }.reduce(0) {
                    $0 + InputFiles.size(work + "/parts/" + $1)
                }
                for k in 0..<n {
                    stages.append(try child(o.executable, ["run", pipeline, "--shard", String(k)] + common + threads))
                }
                stages.append(
                    try child(o.executable, ["merge", pipeline, "--output", dir + "/out-partitioned"] + common))
                partRuns.append(
                    ChildRun(
                        seconds: stages.reduce(0) { $0 + $1.seconds },
                        peakRSSBytes: stages.map(\.peakRSSBytes).max() ?? 0,
                        cpuSeconds: stages.reduce(0) { $0 + $1.cpuSeconds }))
                fresh(work)
            }
            identical = identical && sameOutputs(dir + "/out/bench/latest", dir + "/out-partitioned/bench/latest")
        }
        let mb = { (b: Int) in String(format: "%.1f MB", Double(b) / 1_000_000) }
        func line(_ name: String, _ runs: [ChildRun]) -> String {
            String(
                format: "%@ %.3f s wall, %.3f s CPU, peak RSS %@", name, median(runs.map(\.seconds)),
                median(runs.map(\.cpuSeconds)), mb(runs.map(\.peakRSSBytes).max() ?? 0))
        }
        let wall = median(partRuns.map(\.seconds)) / median(memoryRuns.map(\.seconds))
        let cpu = median(partRuns.map(\.cpuSeconds)) / median(memoryRuns.map(\.cpuSeconds))
        var lines = [
            "winback benchmark past one machine — \(o.customers) customers, seed \(o.seed), \(o.runs) rounds (medians)",
            "input:          \(files.count) files, \(mb(compressed)) gzipped",
            line("in memory:     ", memoryRuns),
        ]
        switch how {
        case .memory(let bytes):
            lines.append(line("--memory \(mb(bytes)):", partRuns))
        case .shards(let n, let tasks):
            lines.append(line("\(tasks) tasks, \(n) shards:", partRuns))
            lines.append(
                String(
                    format: "part files:     %@ = %.2f × the gzipped input", mb(partBytes),
                    Double(partBytes) / Double(max(1, compressed))))
        }
        lines.append(
            String(
                format: "partitioned / in memory: %.2f × wall, %.2f × CPU; published files %@", wall, cpu,
                identical ? "identical (manifest aside)" : "DIFFER"))
        return lines
    }

    /// Whether two published runs hold the same files with the same bytes, manifest aside.
    static func sameOutputs(_ a: String, _ b: String) -> Bool {
        let ra = URL(fileURLWithPath: a).resolvingSymlinksInPath().path
        let rb = URL(fileURLWithPath: b).resolvingSymlinksInPath().path
        let fa = filesBelow(ra).filter { $0 != "manifest.json" }
        guard fa == filesBelow(rb).filter({ $0 != "manifest.json" }), !fa.isEmpty else { return false }
        return fa.allSatisfy {
            FileManager.default.contents(atPath: ra + "/" + $0) == FileManager.default.contents(atPath: rb + "/" + $0)
        }
    }

    /// Every file below `dir`, relative, sorted.
    static func filesBelow(_ dir: String) -> [String] {
        (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []).filter {
            System.kind(dir + "/" + $0) == .file
        }.sorted()
    }
}
