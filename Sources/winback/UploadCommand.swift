import ArgumentParser
import WinBack

struct UploadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload a published run to the pipeline's output.upload again (\(S3Location.prefixForm)).",
        discussion: """
            Copies <output>/<name>/<date of as-of>/ to <prefix>/<name>/<date>/, every file with its SHA-256 \
            for the server to check, then _SUCCESS (the files and their SHA-256) last, then <prefix>/<name>/latest \
            when the run is the newest. A run uploads by itself after publishing; this repeats an upload that \
            failed (exit 75: try again later; 77: the credentials were refused). Credentials and the endpoint \
            come from the environment as AWS's tools find them (AWS_ENDPOINT_URL_S3 for an S3-compatible store).
            """)

    @OptionGroup var pipeline: PipelineOptions

    @Option(name: .customLong("output"), help: "Output directory, overriding the file's output.directory.")
    var output: String?

    @OptionGroup var log: LogOptions

    func run() throws {
        print(
            try log.reporting {
                try Upload.again(
                    RunOptions(pipelinePath: pipeline.pipeline, asOf: pipeline.asOf, output: output), progress: $0)
            })
    }
}
