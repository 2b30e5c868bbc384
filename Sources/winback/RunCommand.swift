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
            <output>/<name>/.failed-<date>/. Prints the published folder on stdout; progress goes to stderr.
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

    @Flag(help: "No progress or stage lines on stderr (errors are still printed).")
    var quiet = false

    func validate() throws {
        if let t = threads, t < 1 { throw ValidationError("--threads must be at least 1") }
    }

    func run() throws {
        Allocator.configureForBatch()
        try reportingErrors {
            var options = RunOptions(
                pipelinePath: pipeline.pipeline, asOf: pipeline.asOf, output: output, threads: threads)
            options.inflater = inflater?.resolved()
            // Published: print the folder and end, leaving the run's memory to the system.
            options.published = { summary in
                print(summary.published)
                Foundation.exit(0)
            }
            _ = try PipelineRun.run(options, progress: .automatic(quiet: quiet))
        }
    }
}

extension Inflater: ExpressibleByArgument {}
extension InflaterChoice: ExpressibleByArgument {}
