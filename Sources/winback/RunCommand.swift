import ArgumentParser
import Foundation
import WinBack

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a pipeline: read exports, evaluate every offer, publish segments and reports.",
        discussion: """
            Publishes <output>/<name>/<YYYY-MM-DD of as-of>/ atomically and points <output>/<name>/latest \
            at the newest date. A failed run publishes nothing and keeps rejects.csv and manifest.json in \
            <output>/<name>/.failed-<date>/. Prints the published folder on stdout; progress goes to stderr. \
            With --work, --shard and --shards, evaluates one shard of an array job instead (see `winback \
            partition`); with --memory, runs partitioned within that much memory.
            """)

    @OptionGroup var pipeline: PipelineOptions

    @Option(name: .customLong("output"), help: "Output directory, overriding the file's output.directory.")
    var output: String?

    @Option(help: "Worker threads, overriding the file's threads (default: one per core).")
    var threads: Int?

    @Option(
        help: """
            The library that inflates .gz inputs, overriding the file's inflater: zlib, isal (ISA-L's igzip, \
            faster, where libisal is installed) or auto (isal where installed, else zlib).
            """)
    var inflater: InflaterChoice?

    @OptionGroup var log: LogOptions

    @Option(
        help: """
            Run under this much memory (e.g. 2GB, 512MB): the inputs are partitioned by customer into a \
            folder beside the output and the shards evaluated one after another; the published files are \
            the same. Overrides the file's limits.memory.
            """)
    var memory: String?

    @Option(help: "With --shards: the work folder of an array job (see `winback partition`).")
    var work: String?

    @Option(help: "With --work: the shard to evaluate, 0..<shards (default: the scheduler's array index).")
    var shard: Int?

    @Option(help: "With --work: how many shards the run has.")
    var shards: Int?

    func validate() throws {
        try checkThreads(threads)
        if let m = memory, case .problem(let why) = MemorySize.read(m) { throw ValidationError("--memory \(why)") }
        if (work == nil) != (shards == nil) { throw ValidationError("--work and --shards go together") }
        if shard != nil && work == nil { throw ValidationError("--shard needs --work and --shards") }
        if work != nil && memory != nil { throw ValidationError("--memory and --work are separate ways to run") }
    }

    func run() throws {
        let progress = log.progress()
        Allocator.configureForBatch()
        try reportingErrors(progress) {
            var options = RunOptions(
                pipelinePath: pipeline.pipeline, asOf: pipeline.asOf, output: output, threads: threads)
            options.inflater = inflater?.resolved()
            options.memory = memory.flatMap(MemorySize.parse)
            if let work, let shards {
                _ = try ShardedRun.shard(
                    options, work: work, shard: shard, shards: shards, progress: progress)
                return
            }
            let run = try PipelineRun.runHoldingMemory(options, progress: progress)
            print(run.summary.published)
            // Published: the process ends with the run's memory still held, leaving it to the
            // system at once rather than freeing millions of objects piece by piece first.
            withExtendedLifetime(run.memory) { Foundation.exit(0) }
        }
    }
}

extension Inflater: ExpressibleByArgument {}
extension InflaterChoice: ExpressibleByArgument {}
extension InputFormat: ExpressibleByArgument {}
