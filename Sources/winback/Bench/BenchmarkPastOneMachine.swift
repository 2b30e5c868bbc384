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
        /// The same world read from S3 (docs/rules.md §11): copied once under a key prefix,
        /// then a run from disk and a run from S3 in turn in every round.
        case fromS3(S3Location)
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

        var other = pipeline
        if case .fromS3(let base) = how { other = try s3World(dir, files: files, base: base, log: log) }
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
            case .fromS3:
                partRuns.append(
                    try child(o.executable, ["run", other, "--quiet", "--output", dir + "/out-partitioned"] + threads))
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
        let wall = median(partRuns.map(\.seconds)) / median(memoryRuns.map(\.seconds))
        let cpu = median(partRuns.map(\.cpuSeconds)) / median(memoryRuns.map(\.cpuSeconds))
        var lines = [
            "winback benchmark past one machine — \(o.customers) customers, seed \(o.seed), \(o.runs) rounds (medians)",
            "input:          \(files.count) files, \(mb(compressed)) gzipped",
            line("in memory:     ", memoryRuns),
        ]
        switch how {
        case .fromS3(let base):
            lines.append(line("from \(base.uri):", partRuns))
            lines.append(
                String(
                    format: "from S3 / from disk: %.2f × wall, %.2f × CPU; published files %@", wall, cpu,
                    identical ? "identical (manifest aside)" : "DIFFER"))
            return lines
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

    /// The world's inputs copied under `base` (objects already there with the same size are
    /// kept), and a pipeline file beside the world's that reads them from there.
    static func s3World(_ dir: String, files: [String], base: S3Location, log: (String) -> Void) throws -> String {
        let client = try S3Client.shared()
        let prefix = base.key.isEmpty || base.key.hasSuffix("/") ? base.key : base.key + "/"
        let inputs = files + [dir + "/data/renewal-info.jsonl.gz", dir + "/data/offers.json"]
        let there = Dictionary(
            try client.list(bucket: base.bucket, prefix: prefix).map { ($0.location.key, $0.size) },
            uniquingKeysWith: { a, _ in a })
        var copied = 0
        for path in inputs {
            let key = prefix + (path as NSString).lastPathComponent
            let size = InputFiles.size(path)
            if there[key] == size { continue }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw WinBackError(.noInput, "cannot read", path: path)
            }
            try client.put(S3Location(bucket: base.bucket, key: key), data)
            copied += 1
        }
        let uri = S3Location(bucket: base.bucket, key: prefix).uri
        if copied > 0 { log("copied \(copied) input files to \(uri)") }
        let text = try String(contentsOfFile: dir + "/pipeline.yaml", encoding: .utf8)
            .replacingOccurrences(of: "\"data/transactions-", with: "\"\(uri)transactions-")
            .replacingOccurrences(of: "\"data/renewal-info", with: "\"\(uri)renewal-info")
            .replacingOccurrences(of: "offers: data/offers.json", with: "offers: \(uri)offers.json")
        let path = dir + "/pipeline-s3.yaml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func mb(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1_000_000) }

    /// A report line of runs measured in turn: median wall and CPU time, the largest peak RSS.
    static func line(_ name: String, _ runs: [ChildRun]) -> String {
        String(
            format: "%@ %.3f s wall, %.3f s CPU, peak RSS %@", name, median(runs.map(\.seconds)),
            median(runs.map(\.cpuSeconds)), mb(runs.map(\.peakRSSBytes).max() ?? 0))
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
