import Foundation
import WinBack

/// The project's benchmark: a generated world, the gzip floor, and the pipeline measured
/// against it (wall time, throughput, peak memory, scaling with threads).
///
/// The pipeline runs as a child process (this same executable, `run`), so its peak resident
/// memory is its own, read from `wait4`, and not the generator's or the benchmark's.
public enum Benchmark {
    public struct Options: Sendable {
        public var customers = 200_000
        public var seed: UInt64 = 1
        public var cache = "bench-cache"
        public var runs = 3
        /// One per core, as a run's default, at most as many as a run takes.
        public var threads = min(ProcessInfo.processInfo.activeProcessorCount, PipelineConfig.threadCounts.upperBound)
        /// Inflates `.gz` inputs for the floor and the pipeline alike.
        public var inflater: Inflater = .zlib
        /// The executable to run the pipeline with (`winback`).
        public var executable: String
        /// The world's format: `appstore-ndjson`, or `appstore-signed` (whose floor is then the
        /// signature checks, see ``SignedBenchmark``).
        public var format = InputFormat.appstoreNDJSON

        public init(executable: String) { self.executable = executable }
    }

    public struct ChildRun: Sendable {
        public var seconds: Double
        public var peakRSSBytes: Int
        /// User and system CPU time.
        public var cpuSeconds: Double = 0
    }

    /// Generates the world once into the cache; returns its folder.
    public static func world(_ o: Options, log: (String) -> Void) throws -> String {
        let signed = o.format == .appstoreSigned
        let dir = InputFiles.absolute(
            "\(o.cache)/world-\(o.customers)-seed\(o.seed)\(signed ? "-signed" : "")",
            base: FileManager.default.currentDirectoryPath)
        let marker = dir + "/.complete"
        if FileManager.default.fileExists(atPath: marker) { return dir }
        log("generating \(o.customers) customers (seed \(o.seed)) into \(dir) …")
        try? FileManager.default.removeItem(atPath: dir)
        // In a process of its own: a child's peak memory as the system reports it includes the
        // parent's at the time it was started, so the benchmark itself must stay small.
        let generate = Process()
        generate.executableURL = URL(fileURLWithPath: o.executable)
        generate.arguments = [
            "generate", "--customers", String(o.customers), "--seed", String(o.seed), "--out", dir + "/data",
            "--as-of", "2026-11-22", "--format", o.format.rawValue,
        ]
        let out = Pipe()
        generate.standardOutput = out
        try generate.run()
        let said = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        generate.waitUntilExit()
        guard generate.terminationStatus == 0,
            let transactions = said.split(separator: " ").dropFirst(3).first.flatMap({ Int($0) })
        else {
            throw WinBackError(.software, "generating the benchmark's world failed: \(said)", path: dir)
        }
        let pipeline = """
            name: bench
            transactions:
              format: \(o.format.rawValue)
              paths: ["data/transactions-*.jsonl.gz"]\(signed ? "\napple:\n  roots: [data/test-root.pem]" : "")
            renewalInfo: ["data/renewal-info.jsonl.gz"]
            offers: data/offers.json
            asOf: 2026-11-22
            output:
              directory: out
            limits:
              maxRejectedFraction: 0.01
            """
        try pipeline.write(toFile: dir + "/pipeline.yaml", atomically: true, encoding: .utf8)
        guard FileManager.default.createFile(atPath: marker, contents: Data("\(transactions)\n".utf8)) else {
            throw WinBackError(.cannotCreateOutput, "cannot write the world's marker", path: marker)
        }
        return dir
    }

    /// Inflates every file with `threads` threads, discarding the bytes: the floor.
    public static func floor(
        paths: [String], threads: Int, inflater: Inflater = .zlib
    ) throws -> (seconds: Double, bytes: Int) {
        let slots = ResultSlots<Int>(count: paths.count)
        let start = Date()
        let bySize = InputFiles.largestFirst(paths)
        try parallelFor(count: paths.count, threads: threads, order: bySize) { i in
            let source = try openSource(path: paths[i], inflater: inflater)
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var total = 0
            while case let n = try source.read(into: &buffer), n > 0 { total += n }
            slots[i] = total
        }
        return (Date().timeIntervalSince(start), slots.all.reduce(0, +))
    }

    /// Runs `executable args…` and returns its wall time and peak resident memory.
    public static func child(_ executable: String, _ args: [String]) throws -> ChildRun {
        let start = Date()
        let status: Int32
        let peak: Int
        let cpu: Double
        do { (status, peak, cpu) = try System.spawnAndWait(executable, args) } catch let e as SystemError {
            throw e.winBack(.software, "cannot run \(executable)")
        }
        let seconds = Date().timeIntervalSince(start)
        let exited = (status & 0x7f) == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            throw WinBackError(
                .software,
                "the benchmarked run failed (status \(status)): \(([executable] + args).joined(separator: " "))")
        }
        return ChildRun(seconds: seconds, peakRSSBytes: peak, cpuSeconds: cpu)
    }

    /// The report's lines.
    static func report(
        _ o: Options, files: Int, compressed: Int, uncompressed: Int, transactions: String, floor floorSeconds: Double,
        zlibFloor: Double, signedFloor: [String], againstDecoded: [String], wall w: (Double, Int),
        wall1 w1: (Double, Int)
    ) -> [String] {
        let (wall, peak) = w
        let (wall1, peak1) = w1
        let mb = { (b: Int) in String(format: "%.1f MB", Double(b) / 1_000_000) }
        return [
            "winback benchmark — \(o.customers) customers, seed \(o.seed), \(o.runs) runs each (medians)",
            "input:          \(files) files, \(mb(compressed)) gzipped, \(mb(uncompressed)) \(o.format.rawValue), \(transactions) transactions",
            signedFloor.isEmpty
                ? String(
                    format: "floor:          %.3f s  (inflate only, %@, %d threads)", floorSeconds, o.inflater.rawValue,
                    o.threads)
                : String(format: "floor:          %.3f s  (the larger of the two below)", floorSeconds),
        ] + signedFloor + [
            String(
                format: "pipeline:       %.3f s  (%d threads)  = %.2f × floor, %.1f MB/s uncompressed, peak RSS %@",
                wall, o.threads, wall / floorSeconds, Double(uncompressed) / 1_000_000 / wall, mb(peak)),
            String(
                format:
                    "pipeline:       %.3f s  (1 thread)    = %.2f × floor, peak RSS %@; %d threads are %.2f× faster",
                wall1, wall1 / floorSeconds, mb(peak1), o.threads, wall1 / wall),
        ] + againstDecoded
            + (o.inflater == .zlib
                ? []
                : [
                    String(
                        format: "zlib floor:     %.3f s  (inflate only, zlib, %d threads); the pipeline is %.2f × it",
                        zlibFloor, o.threads, wall / zlibFloor)
                ])
    }

    /// A signed world's floor (the larger of its signature checks and its inflating), the lines
    /// that say them, and its run against the decoded world's.
    static func signedReport(
        _ o: Options, walls: [Double], floors: [Double], verifyFloors: [Double], rates: [Double], jws: Int, peak: Int,
        decoded: (walls: [Double], floors: [Double], peak: Int)
    ) -> (Double, [String], [String]) {
        // Signed ≤ 1.3 × (decoded run + inflating the signed files + one verification per
        // JWS − inflating the decoded files): what signing adds, and nothing more, allowed 30 %.
        let decodedWalls = decoded.walls
        let decodedFloors = decoded.floors
        let decodedPeak = decoded.peak
        let decodedWall = median(decodedWalls)
        let budget = decodedWall + median(floors) + median(verifyFloors) - median(decodedFloors)
        let againstDecoded = [
            String(
                format: "decoded run:    %.3f s  (%d threads), peak RSS %@; inflating its files %.3f s", decodedWall,
                o.threads, String(format: "%.1f MB", Double(decodedPeak) / 1_000_000), median(decodedFloors)),
            String(
                format: "signed / (decoded + signed inflate + verify − decoded inflate) = %.3f / %.3f = %.2f; "
                    + "peak RSS %+.1f %% of the decoded run's",
                median(walls), budget, median(walls) / budget,
                (Double(peak) / Double(max(1, decodedPeak)) - 1) * 100),
        ]
        // The floor of a signed world is its signature checks, when they cost more than inflating.
        let verifyFloor = median(verifyFloors)
        let signedFloor = [
            String(
                format: "verify floor:   %.3f s  (%d JWS, ES256, chain cached, %.0f/s per core, %d threads)",
                verifyFloor, jws, median(rates), o.threads),
            String(
                format: "inflate floor:  %.3f s  (%@, %d threads)", median(floors), o.inflater.rawValue, o.threads),
        ]
        return (max(median(floors), verifyFloor), signedFloor, againstDecoded)
    }

    /// The whole benchmark; returns the report's lines.
    public static func run(_ o: Options, log: @escaping (String) -> Void) throws -> [String] {
        let dir = try world(o, log: log)
        let pipeline = dir + "/pipeline.yaml"
        let files = try InputFiles.resolve(["data/transactions-*.jsonl.gz"], base: dir)
        let compressed = files.reduce(0) { $0 + InputFiles.size($1) }
        let transactions =
            (try? String(contentsOfFile: dir + "/.complete", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"

        try o.inflater.requireAvailable()
        var uncompressed = 0
        func measureFloor(_ inflater: Inflater) throws -> Double {
            let f = try floor(paths: files, threads: o.threads, inflater: inflater)
            uncompressed = f.bytes
            return f.seconds
        }
        func pipelineRun(threads: Int) throws -> ChildRun {
            // Each run publishes into an empty output folder, as a nightly run of a new date
            // does; deleting the previous run's files is not part of the timing.
            try? FileManager.default.removeItem(atPath: dir + "/out")
            return try child(
                o.executable,
                ["run", pipeline, "--quiet", "--threads", String(threads), "--inflater", o.inflater.rawValue])
        }
        // Rounds of every measurement in turn, so that the floor and the pipeline see the
        // machine alike even when its speed drifts during the benchmark.
        var floors: [Double] = []
        var zlibFloors: [Double] = []
        var walls: [Double] = []
        var walls1: [Double] = []
        // A signed world's floor is its signature checks too, measured each round like the rest.
        let signed = o.format == .appstoreSigned
        let signedFiles = files + [dir + "/data/renewal-info.jsonl.gz"]
        let jws = signed ? try SignedBenchmark.count(paths: signedFiles, inflater: o.inflater) : 0
        var verifyFloors: [Double] = []
        var rates: [Double] = []
        // And the same world decoded, run in the same rounds: the signed run is measured
        // against it plus what signing adds (inflating more bytes, one verification per JWS).
        var decodedO = o
        decodedO.format = .appstoreNDJSON
        let decodedDir = signed ? try world(decodedO, log: log) : dir
        let decodedFiles = signed ? try InputFiles.resolve(["data/transactions-*.jsonl.gz"], base: decodedDir) : []
        var decodedWalls: [Double] = []
        var decodedFloors: [Double] = []
        var decodedPeak = 0
        var peak = 0
        var peak1 = 0
        for i in 0..<o.runs {
            log(
                "round \(i + 1)/\(o.runs): floor, pipeline with \(o.threads) threads\(o.threads > 1 ? " and with 1" : "") …"
            )
            floors.append(try measureFloor(o.inflater))
            if signed {
                let f = try SignedBenchmark.floor(jws: jws, threads: o.threads)
                verifyFloors.append(f.seconds)
                rates.append(f.perSecondPerCore)
                decodedFloors.append(
                    try floor(
                        paths: decodedFiles + [decodedDir + "/data/renewal-info.jsonl.gz"], threads: o.threads,
                        inflater: o.inflater
                    ).seconds)
                try? FileManager.default.removeItem(atPath: decodedDir + "/out")
                let d = try child(
                    o.executable,
                    [
                        "run", decodedDir + "/pipeline.yaml", "--quiet", "--threads", String(o.threads), "--inflater",
                        o.inflater.rawValue,
                    ])
                decodedWalls.append(d.seconds)
                decodedPeak = max(decodedPeak, d.peakRSSBytes)
            }
            if o.inflater != .zlib { zlibFloors.append(try measureFloor(.zlib)) }
            let r = try pipelineRun(threads: o.threads)
            walls.append(r.seconds)
            peak = max(peak, r.peakRSSBytes)
            if o.threads > 1 {
                let r1 = try pipelineRun(threads: 1)
                walls1.append(r1.seconds)
                peak1 = max(peak1, r1.peakRSSBytes)
            }
        }
        var floorSeconds = median(floors)
        var signedFloor: [String] = []
        var againstDecoded: [String] = []
        if signed {
            (floorSeconds, signedFloor, againstDecoded) = signedReport(
                o, walls: walls, floors: floors, verifyFloors: verifyFloors, rates: rates, jws: jws, peak: peak,
                decoded: (decodedWalls, decodedFloors, decodedPeak))
        }
        let zlibFloor = o.inflater == .zlib ? floorSeconds : median(zlibFloors)
        let wall = median(walls)
        let wall1 = o.threads > 1 ? median(walls1) : wall
        if o.threads == 1 { peak1 = peak }

        return report(
            o, files: files.count, compressed: compressed, uncompressed: uncompressed, transactions: transactions,
            floor: floorSeconds, zlibFloor: zlibFloor, signedFloor: signedFloor, againstDecoded: againstDecoded,
            wall: (wall, peak), wall1: (wall1, peak1))
    }

    static func median(_ xs: [Double]) -> Double {
        let s = xs.sorted()
        return s.isEmpty ? 0 : s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}
