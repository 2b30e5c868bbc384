import ArgumentParser
import WinBack

struct MergeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the shards of an array job and publish the run (the last stage).",
        discussion: """
            Checks that every partition task and every shard finished (exit 66 naming the missing one, \
            nothing published) with the same pipeline, catalog and shard count (exit 78), then merges \
            the shards' segments and reports, applies the reject budget to the whole run (exit 65) and \
            publishes <output>/<name>/<date>/ atomically, byte-identical to a run in one process. \
            Prints the published folder.
            """)

    @OptionGroup var pipeline: PipelineOptions

    @Option(help: "The work folder the tasks wrote.")
    var work: String

    @Option(help: "How many shards the run has.")
    var shards: Int

    @Option(name: .customLong("output"), help: "Output directory, overriding the file's output.directory.")
    var output: String?

    @OptionGroup var log: LogOptions

    func run() throws {
        let summary = try log.reporting { progress in
            try ShardedRun.merge(
                RunOptions(pipelinePath: pipeline.pipeline, asOf: pipeline.asOf, output: output), work: work,
                shards: shards, progress: progress)
        }
        print(summary.published)
    }
}
