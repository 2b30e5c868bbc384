import ArgumentParser
import WinBack

struct PartitionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "partition",
        abstract: "Split a share of the inputs by customer into part files (the first stage of an array job).",
        discussion: """
            Task i of M reads input files i, i+M, i+2M, … (in sorted path order) and writes, for every \
            shard, the rows of that shard's customers to DIR/parts/task-<i>/shard-<k>.part, then a \
            _SUCCESS marker. Then `winback run --work DIR --shard k --shards N` for every shard, and \
            `winback merge --work DIR --shards N`. --task defaults to SLURM_ARRAY_TASK_ID, \
            JOB_COMPLETION_INDEX or AWS_BATCH_JOB_ARRAY_INDEX, so one command line serves every task \
            of an array. A retried task replaces its own outputs. Every task must use the same \
            pipeline file, catalog, --shards and winback build.
            """)

    @OptionGroup var pipeline: PipelineOptions

    @Option(help: "The work folder all tasks share (a shared filesystem).")
    var work: String

    @Option(help: "How many shards the customers are split into.")
    var shards: Int

    @Option(help: "This task's index, 0..<tasks (default: the scheduler's array index).")
    var task: Int?

    @Option(help: "How many partition tasks share the input files.")
    var tasks: Int

    @Option(help: "Worker threads (default: the file's threads, else one per core).")
    var threads: Int?

    @OptionGroup var log: LogOptions

    func validate() throws { try checkThreads(threads) }

    func run() throws {
        try log.reporting { progress in
            _ = try ShardedRun.partition(
                RunOptions(pipelinePath: pipeline.pipeline, asOf: pipeline.asOf, threads: threads), work: work,
                shards: shards, task: task, tasks: tasks, progress: progress)
        }
    }
}
