import Foundation
import WinBack

extension Benchmark {
    /// The full run against the night after (docs/rules.md §12): the transaction files of the
    /// world's as-of month (and any later) are the night's new files; every earlier month's is
    /// in a state kept the night before. Each round runs the full run, then the incremental night starting from that
    /// same state; returns the report's lines: wall time, CPU time and peak resident memory of
    /// each, their ratio, the state's size against the gzipped inputs, and whether the
    /// published files are identical.
    public static func incremental(_ o: Options, log: @escaping (String) -> Void) throws -> [String] {
        let world = try self.world(o, log: log)
        let fm = FileManager.default
        let files = try InputFiles.resolve(["data/transactions-*.jsonl.gz"], base: world)
        // The night's new files: the as-of month's (2026-11) and any later; every earlier
        // month's was absorbed the night before.
        let isNew = { (path: String) in (path as NSString).lastPathComponent >= "transactions-2026-11" }
        let fresh = files.filter(isNew)
        guard !fresh.isEmpty, fresh.count < files.count else {
            throw WinBackError(.software, "the benchmark's world has no month before the as-of month", path: world)
        }
        // Both runs read the same paths: links to the world's files in a folder of their own.
        let dir = world + "/incremental"
        try? fm.removeItem(atPath: dir)
        try fm.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        func place(_ path: String) throws {
            let to = dir + "/data/" + (path as NSString).lastPathComponent
            do { try fm.linkItem(atPath: path, toPath: to) } catch { try fm.copyItem(atPath: path, toPath: to) }
        }
        for f in files where !isNew(f) { try place(f) }
        let signed = o.format == .appstoreSigned
        let pipeline = { (incremental: Bool) in
            """
            name: bench
            transactions:
              format: \(o.format.rawValue)
              paths: ["data/transactions-*.jsonl.gz"]\(signed ? "\napple:\n  roots: [../data/test-root.pem]" : "")
            renewalInfo: ["../data/renewal-info.jsonl.gz"]
            offers: ../data/offers.json
            asOf: 2026-11-22
            output:
              directory: out
            limits:
              maxRejectedFraction: 0.01
            incremental: \(incremental)

            """
        }
        try pipeline(false).write(toFile: dir + "/full.yaml", atomically: true, encoding: .utf8)
        try pipeline(true).write(toFile: dir + "/incremental.yaml", atomically: true, encoding: .utf8)
        let threads = ["--threads", String(o.threads)]
        let full = ["run", dir + "/full.yaml", "--quiet", "--output", dir + "/out-full"] + threads
        let night = ["run", dir + "/incremental.yaml", "--quiet", "--output", dir + "/out-incremental"] + threads

        log("the night before: keeping a state of \(files.count - fresh.count) files …")
        _ = try child(o.executable, night)
        let state = dir + "/out-incremental/bench/.state"
        let before = dir + "/state-before"
        try fm.moveItem(atPath: state, toPath: before)
        for f in fresh { try place(f) }
        let compressed = files.reduce(0) { $0 + InputFiles.size($1) }

        var fullRuns: [ChildRun] = []
        var nightRuns: [ChildRun] = []
        var identical = true
        var stateBytes = 0
        for i in 0..<o.runs {
            log("round \(i + 1)/\(o.runs): the full run, then the night after …")
            try? fm.removeItem(atPath: dir + "/out-full")
            fullRuns.append(try child(o.executable, full))
            // The night, like the full run, publishes into a folder with no earlier run (its
            // state aside): replacing the last round's run of the same date would time the
            // deletion of its files and the changes against it, which the full run has not.
            try? fm.removeItem(atPath: dir + "/out-incremental")
            try fm.createDirectory(
                atPath: dir + "/out-incremental/bench", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try fm.copyItem(atPath: before, toPath: state)
            nightRuns.append(try child(o.executable, night))
            identical =
                identical && sameOutputs(dir + "/out-full/bench/latest", dir + "/out-incremental/bench/latest")
                && absorbed(dir + "/out-incremental/bench/latest/manifest.json", read: fresh.count)
            stateBytes = filesBelow(state).reduce(0) { $0 + InputFiles.size(state + "/" + $1) }
        }
        let wall = median(nightRuns.map(\.seconds)) / median(fullRuns.map(\.seconds))
        let cpu = median(nightRuns.map(\.cpuSeconds)) / median(fullRuns.map(\.cpuSeconds))
        let peak =
            Double(nightRuns.map(\.peakRSSBytes).max() ?? 0) / Double(max(1, fullRuns.map(\.peakRSSBytes).max() ?? 0))
        return [
            "winback benchmark of incremental nights — \(o.customers) customers, seed \(o.seed), \(o.format.rawValue), "
                + "\(o.runs) rounds (medians)",
            "input:          \(files.count) files, \(mb(compressed)) gzipped; the night's new files: "
                + fresh.map { "\(($0 as NSString).lastPathComponent) (\(mb(InputFiles.size($0))))" }.joined(
                    separator: ", "),
            line("full run:      ", fullRuns),
            line("night after:   ", nightRuns),
            String(
                format: "night / full:  %.2f × wall, %.2f × CPU, %.2f × peak RSS; published files %@", wall, cpu, peak,
                identical ? "identical (manifest aside)" : "DIFFER"),
            String(
                format: "state:          %@ = %.2f × the gzipped input", mb(stateBytes),
                Double(stateBytes) / Double(max(1, compressed))),
        ]
    }

    /// Whether the manifest at `path` says the run took its files from the state and read `read`.
    static func absorbed(_ path: String, read: Int) -> Bool {
        guard let data = FileManager.default.contents(atPath: path),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let block = json["incremental"] as? [String: Any]
        else { return false }
        return block["state"] as? String == "absorbed" && block["filesRead"] as? Int == read
    }
}
