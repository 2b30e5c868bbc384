import Foundation
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackWrite

/// `output.metrics` (docs/rules.md §10.3): a Prometheus text-format file for node_exporter's
/// textfile collector, written after every run that read its pipeline file, succeeded or not:
/// to a temporary name beside it, then renamed over it, so a scrape never reads half a file.
public enum MetricsFile {
    /// What one run ended with.
    public struct Run: Sendable {
        public var pipeline: String
        public var started: Date
        public var finished: Date
        public var exitCode: Int32
        /// Counts, when the run got as far as reading and evaluating (nil: only the run's own
        /// gauges are written).
        public var rowsRead: Int?
        public var rowsRejected: Int?
        public var states: StateCounts?
        public var eligible: [(String, Int)] = []
        public var heldOut: Int?
    }

    /// The file's text. `lastSuccess` is the last successful run's end (this run's when it
    /// succeeded); 0 when the pipeline never succeeded.
    public static func text(_ r: Run, lastSuccess: Double) -> String {
        var out = ""
        let pipeline = "pipeline=\"\(label(r.pipeline))\""
        func metric(_ name: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP winback_\(name) \(help)\n# TYPE winback_\(name) gauge\n"
            for s in samples {
                out += "winback_\(name){\(pipeline)\(s.labels.isEmpty ? "" : "," + s.labels)} \(s.value)\n"
            }
        }
        metric(
            "last_run_timestamp_seconds", "When the last run ended, in seconds since the epoch.",
            [("", seconds(r.finished))])
        metric(
            "last_success_timestamp_seconds",
            "When the last successful run ended, in seconds since the epoch (0: never).",
            [("", decimal(lastSuccess))])
        metric("last_exit_code", "The exit code of the last run (0: published).", [("", String(r.exitCode))])
        metric(
            "run_duration_seconds", "How long the last run took, in seconds.",
            [("", decimal(r.finished.timeIntervalSince(r.started)))])
        if let v = r.rowsRead { metric("rows_read", "Transaction rows the last run read.", [("", String(v))]) }
        if let v = r.rowsRejected {
            metric("rows_rejected", "Transaction lines the last run rejected (see rejects.csv).", [("", String(v))])
        }
        if let s = r.states {
            metric(
                "customers", "Customers of the last run by state at the as-of instant.",
                [
                    ("state=\"active\"", String(s.active)), ("state=\"billing_retry\"", String(s.billingRetry)),
                    ("state=\"churned\"", String(s.churned)), ("state=\"not_subscriber\"", String(s.notSubscriber)),
                ])
        }
        if !r.eligible.isEmpty {
            metric(
                "eligible", "Customers eligible for each offer in the last run.",
                r.eligible.map { ("offer=\"\(label($0.0))\"", String($0.1)) })
        }
        if let v = r.heldOut {
            metric(
                "held_out", "Customers the experiment's holdout left out of best-offer in the last run.",
                [("", String(v))])
        }
        return out
    }

    /// Writes the file for `r` at `path` (docs/rules.md §10.3): mode 0640, or 0640 and `group`'s.
    /// On failure the previous file's last success is kept. A file that cannot be written is a
    /// warning on stderr, never a different exit code for the run.
    public static func write(_ r: Run, to path: String, group: String?, progress: Progress) {
        var lastSuccess = r.exitCode == 0 ? r.finished.timeIntervalSince1970 : 0
        if r.exitCode != 0, let previous = try? String(contentsOfFile: path, encoding: .utf8) {
            lastSuccess = previousSuccess(previous, pipeline: r.pipeline) ?? 0
        }
        let folder = (path as NSString).deletingLastPathComponent
        // A fresh name nobody can have planted a file or a link at (created exclusively, never
        // through a link), 0640 whatever the umask, then renamed over the old file.
        let tmp =
            (folder.isEmpty ? "." : folder)
            + "/.\((path as NSString).lastPathComponent).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            let f = try OutputFile(path: tmp, exclusive: true)
            try f.write(Array(text(r, lastSuccess: lastSuccess).utf8))
            _ = try f.finish()
            try System.secureFile(tmp, mode: 0o640, group: group.flatMap(System.groupID))
            try System.rename(tmp, path)
        } catch {
            System.unlinkIfPresent(tmp)
            progress.warn("metrics", "cannot write the metrics file: \(error)", fields: ["path": path])
        }
    }

    /// The last success recorded for `pipeline` in a previous file.
    static func previousSuccess(_ text: String, pipeline: String) -> Double? {
        let prefix = "winback_last_success_timestamp_seconds{pipeline=\"\(label(pipeline))\"} "
        for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
            return Double(line.dropFirst(prefix.count))
        }
        return nil
    }

    /// A label value in the text format: backslash, quote and line feed escaped.
    static func label(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func seconds(_ d: Date) -> String { decimal(d.timeIntervalSince1970) }

    /// Three decimals, no exponent.
    static func decimal(_ v: Double) -> String { String(format: "%.3f", v) }

    /// The run of `p` described by its manifest.
    static func run(_ m: Manifest, exitCode: Int32, counted: Bool) -> Run {
        var r = Run(pipeline: m.pipeline, started: m.started, finished: m.finished, exitCode: exitCode)
        if counted {
            r.rowsRead = m.counters.rowsRead
            r.rowsRejected = m.counters.rejected
            r.states = m.states
            r.eligible = m.eligible
            r.heldOut = m.experiment == nil ? nil : (m.heldOut.last?.1 ?? 0)
        }
        return r
    }

    /// The exit code the command line gives for `error`.
    public static func exitCode(_ error: Error) -> Int32 {
        (error as? WinBackError)?.code.exitCode ?? 1
    }

    /// After a run of the pipeline at `path` failed with `error`: the file, when the pipeline
    /// file could be read and names one (and the pipeline's name for the log's failure line).
    public static func failed(pipelinePath path: String, started: Date, error: Error, progress: Progress) {
        let abs = InputFiles.absolute(path, base: FileManager.default.currentDirectoryPath)
        guard let data = FileManager.default.contents(atPath: abs), let text = String(data: data, encoding: .utf8)
        else { return }
        let (config, _) = PipelineConfig.parse(text, path: abs)
        guard let config else { return }
        // The failure's log line names the pipeline even when it failed before resolving it.
        if progress.pipeline.isEmpty { progress.pipeline = config.name }
        guard let metrics = config.metricsPath else { return }
        let r = Run(
            pipeline: config.name.isEmpty ? "unknown" : config.name, started: started, finished: Date(),
            exitCode: exitCode(error))
        write(r, to: config.resolve(metrics), group: config.outputGroup, progress: progress)
    }
}
