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

    @Option(help: "The library that inflates .gz inputs, for the floor and the pipeline: zlib or isal.")
    var inflater: Inflater = .zlib

    @Option(
        help: """
            The world's format: appstore-ndjson, or appstore-signed (its floor is then the larger of \
            inflating and verifying every JWS once with the chain cached, at the measured verifications \
            per second per core).
            """)
    var format = "appstore-ndjson"

    func validate() throws {
        if format != "appstore-ndjson" && format != "appstore-signed" {
            throw ValidationError("--format must be appstore-ndjson or appstore-signed")
        }
    }

    func run() throws {
        var o = Benchmark.Options(executable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path)
        o.customers = customers
        o.seed = seed
        o.cache = cache
        o.runs = max(1, runs)
        if let threads { o.threads = threads }
        o.inflater = inflater
        o.format = format
        let lines = try reportingErrors { try Benchmark.run(o, log: { FileHandleStderr.write($0 + "\n") }) }
        for l in lines { print(l) }
    }
}
