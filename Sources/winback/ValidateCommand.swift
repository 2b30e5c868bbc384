import ArgumentParser
import WinBack

struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a pipeline file, its offer catalog and its input paths; run nothing.",
        discussion:
            "Reports every problem found at once. Exit 0 when valid, 66 when only inputs are missing or not "
            + "regular files, 78 otherwise.")

    @Argument(help: "The pipeline file (YAML).")
    var pipeline: String

    func run() throws {
        let report = PipelineValidation.check(pipelinePath: pipeline)
        // Problems quote paths and values: their control characters are escaped (docs/rules.md §6).
        for line in report.problems { FileHandleStderr.write("winback: \(ControlEscape.escaped(line))\n") }
        for line in report.warnings { FileHandleStderr.write("winback: warning: \(ControlEscape.escaped(line))\n") }
        if report.problems.isEmpty {
            print("\(pipeline): valid — \(report.summary)")
        } else {
            FileHandleStderr.write("winback: \(pipeline): \(report.problems.count) problem(s)\n")
            throw ExitCode(report.exitCode)
        }
    }
}
