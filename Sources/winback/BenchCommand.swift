import ArgumentParser
import Foundation
import WinBack

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmark the pipeline on a generated world against the gzip floor.",
        discussion: """
            Generates `generate --customers N --seed S` once into the cache folder, then reports input \
            sizes, the floor (inflating every file with the same inflater and thread count, discarding \
            the bytes), the pipeline's median wall time over several runs, its ratio to the floor, \
            uncompressed MB/s, peak resident memory (of the pipeline process alone), and the same with \
            one thread. With --inflater isal, the zlib floor is shown too. Each round measures \
            everything once, in turn, so that a machine whose speed drifts affects the floor and the \
            pipeline alike; medians over the rounds are reported. Use a release build: \
            swift build -c release.
            """)

    @Option(help: "Customers in the generated world.")
    var customers = 200_000

    @Option(help: "Seed of the generated world.")
    var seed: UInt64 = 1

    @Option(help: "Folder caching generated worlds.")
    var cache = "bench-cache"

    @Option(help: "Runs per measurement (the median is reported).")
    var runs = 3

    @Option(help: "Threads (default: one per core).")
    var threads: Int?

    @Option(
        help: """
            The library that inflates .gz inputs, for the floor and the pipeline: zlib, isal, or auto (ISA-L \
            where this machine has it, as a run's default).
            """)
    var inflater: InflaterChoice = .auto

    @Option(
        help: """
            The world's format: decoded (appstore-ndjson), or signed (appstore-signed: its floor is then the larger of \
            inflating and verifying every JWS once with the chain cached, at the measured verifications \
            per second per core).
            """)
    var format = InputFormat.appstoreNDJSON

    @Option(
        help: """
            Instead of the floor: the run in memory against `run --memory SIZE` (e.g. 256MB), in turn; \
            wall, CPU, peak memory, identical outputs.
            """)
    var memory: String?

    @Option(
        help: """
            Instead of the floor: the run in memory against the array job's stages run one after \
            another (partition with --tasks tasks, N shards, merge); also the part files' size.
            """)
    var shards: Int?

    @Flag(
        help: """
            Instead of the floor: the full run against the night after (incremental: true), in turn: every \
            month before the as-of month kept in a state the night before, the as-of month's files read that night; \
            wall, CPU, peak memory, the state's size, identical outputs. With --format for a signed world.
            """)
    var incremental = false

    @Option(help: "With --shards: partition tasks (default: 2).")
    var tasks: Int?

    @Option(
        name: .customLong("from-s3"),
        help: """
            Instead of the floor: the world read from disk against the same world read from S3, in \
            turn: \(S3Location.prefixForm), where the inputs are copied once (credentials and endpoint from \
            the environment, e.g. AWS_ENDPOINT_URL_S3 for a server on loopback).
            """)
    var fromS3: String?

    func validate() throws {
        try checkThreads(threads)
        if format != .appstoreNDJSON && format != .appstoreSigned {
            throw ValidationError(
                "--format must be \(InputFormat.appstoreNDJSON.rawValue) or \(InputFormat.appstoreSigned.rawValue)")
        }
        if let m = memory, case .problem(let why) = MemorySize.read(m) { throw ValidationError("--memory \(why)") }
        if let s = shards, s < 1 { throw ValidationError("--shards must be at least 1") }
        if [memory != nil, shards != nil, fromS3 != nil, incremental].filter({ $0 }).count > 1 {
            throw ValidationError("--memory, --shards, --from-s3 and --incremental are separate benchmarks")
        }
        if let u = fromS3, S3Location(uri: u) == nil {
            throw ValidationError("--from-s3 expects \(S3Location.prefixForm)")
        }
        if let tasks {
            if tasks < 1 { throw ValidationError("--tasks must be at least 1") }
            if shards == nil { throw ValidationError("--tasks needs --shards") }
        }
    }

    func run() throws {
        var o = Benchmark.Options(executable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path)
        o.customers = customers
        o.seed = seed
        o.cache = cache
        o.runs = max(1, runs)
        if let threads { o.threads = threads }
        o.inflater = inflater.resolved()
        o.format = format
        let log = { (s: String) in FileHandleStderr.write(s + "\n") }
        let lines = try reportingErrors {
            if incremental { return try Benchmark.incremental(o, log: log) }
            if let m = memory.flatMap(MemorySize.parse) { return try Benchmark.partitioned(o, .memory(m), log: log) }
            if let shards { return try Benchmark.partitioned(o, .shards(shards, tasks: tasks ?? 2), log: log) }
            if let u = fromS3.flatMap(S3Location.init(uri:)) {
                return try Benchmark.partitioned(o, .fromS3(u), log: log)
            }
            return try Benchmark.run(o, log: log)
        }
        for l in lines { print(l) }
    }
}
