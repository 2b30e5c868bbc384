import ArgumentParser
import WinBack

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

/// How a long-running command tells what it is doing, on stderr (docs/rules.md §10.4).
struct LogOptions: ParsableArguments {
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    @Flag(help: "No progress or stage lines on stderr (errors and warnings are still printed).")
    var quiet = false

    @Option(
        name: .customLong("log-format"),
        help: """
            text (default): a progress line on a terminal, one line per stage otherwise; json: one JSON \
            object per line (time, level, event, pipeline and the event's fields), for log collectors.
            """)
    var format: Format = .text

    /// The progress reporter these options ask for.
    func progress() -> WinBack.Progress { .automatic(quiet: quiet, json: format == .json) }

    /// Runs `body` with the progress reporter these options ask for, which also reports a
    /// winback error `body` throws (ending the command with its exit code).
    func reporting<T>(_ body: (WinBack.Progress) throws -> T) throws -> T {
        let progress = progress()
        return try reportingErrors(progress) { try body(progress) }
    }
}

/// Throws the usage error of a `--threads` outside what a run accepts.
func checkThreads(_ threads: Int?) throws {
    if let t = threads, !PipelineConfig.threadCounts.contains(t) {
        throw ValidationError("--threads expects \(PipelineConfig.threadCountsText), found \(t)")
    }
}
