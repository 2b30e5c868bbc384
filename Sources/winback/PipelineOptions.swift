import ArgumentParser

/// Options shared by the commands that read a pipeline file.
struct PipelineOptions: ParsableArguments {
    @Argument(help: "The pipeline file (YAML), e.g. Pipelines/sample.yaml.")
    var pipeline: String

    @Option(
        name: .customLong("as-of"),
        help:
            "Evaluate at this instant instead of the file's asOf: today (00:00 UTC), now, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ."
    )
    var asOf: String?
}
