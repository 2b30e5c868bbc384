import Foundation
import WinBackDelivery
import WinBackModel
import WinBackPipeline
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
        public var states: CustomerStates?
        public var eligible: [(String, Int)] = []
        public var heldOut: Int?
        /// Rows entered, exited and changed per segment since the baseline run (docs/rules.md §10.5).
        var segmentChanges: [SegmentChangeCount] = []
        /// Rows of each destination's `-exited-` files: type, audience, rows (docs/rules.md §10.5).
        public var destinationExited: [(destination: String, audience: String, rows: Int)] = []
        /// With `output.postgres` (docs/rules.md §14.2): whether its tables lag the published
        /// files (the run published, then could not write them); nil without it.
        public var postgresBehind: Bool?
    }

    /// Every metric this tool writes, with its HELP text, in the order written.
    static let families: [(name: String, help: String)] = [
        ("winback_last_run_timestamp_seconds", "When the last run ended, in seconds since the epoch."),
        (
            "winback_last_success_timestamp_seconds",
            "When the last successful run ended, in seconds since the epoch (no sample: none recorded)."
        ),
        ("winback_last_exit_code", "The exit code of the last run (0: published)."),
        ("winback_run_duration_seconds", "How long the last run took, in seconds."),
        ("winback_rows_read", "Transaction rows the last run read."),
        ("winback_rows_rejected", "Transaction lines the last run rejected (see rejects.csv)."),
        ("winback_customers", "Customers of the last run by state at the as-of instant."),
        ("winback_eligible", "Customers eligible for each offer in the last run."),
        ("winback_held_out", "Customers the experiment's holdout left out of best-offer in the last run."),
        (
            "winback_segment_changes",
            "Customers who entered, exited or changed offer in each segment since the baseline run."
        ),
        (
            "winback_destination_exited",
            "Identity values in each destination's files of the baseline run and not in the last run's."
        ),
        (
            "winback_postgres_behind",
            "1 when the last run published its files but could not write output.postgres's tables, else 0."
        ),
    ]

    /// The previous file is read only when it is a regular file smaller than this
    /// (docs/rules.md §6.2).
    static let previousLimit = 1 << 20

    /// How long a run waits for another run writing the same file (docs/rules.md §10.3).
    public static let lockTimeout: TimeInterval = 10

    /// The samples of run `r`, every one labelled with its pipeline, with the HELP and TYPE
    /// lines of every metric this tool writes. `lastSuccess` is the last successful run's end
    /// (this run's when it succeeded); nil writes no last-success sample (never 0).
    static func exposition(_ r: Run, lastSuccess: Double?) -> MetricsExposition {
        var e = MetricsExposition()
        for f in families {
            e.help[f.name] = f.help
            e.type[f.name] = "gauge"
        }
        func add(_ name: String, _ value: String, _ label: (String, String)? = nil, _ more: (String, String)? = nil) {
            var labels = [MetricsExposition.Label(name: "pipeline", value: r.pipeline)]
            for l in [label, more].compactMap({ $0 }) { labels.append(.init(name: l.0, value: l.1)) }
            e.samples.append(.init(name: "winback_" + name, labels: labels, value: value))
        }
        add("last_run_timestamp_seconds", seconds(r.finished))
        if let lastSuccess { add("last_success_timestamp_seconds", decimal(lastSuccess)) }
        add("last_exit_code", String(r.exitCode))
        add("run_duration_seconds", decimal(r.finished.timeIntervalSince(r.started)))
        if let v = r.rowsRead { add("rows_read", String(v)) }
        if let v = r.rowsRejected { add("rows_rejected", String(v)) }
        if let s = r.states {
            add("customers", String(s.active), ("state", "active"))
            add("customers", String(s.billingRetry), ("state", "billing_retry"))
            add("customers", String(s.churned), ("state", "churned"))
            add("customers", String(s.notSubscriber), ("state", "not_subscriber"))
        }
        for (offer, n) in r.eligible { add("eligible", String(n), ("offer", offer)) }
        if let v = r.heldOut { add("held_out", String(v)) }
        for c in r.segmentChanges {
            for (change, n) in [("entered", c.entered), ("exited", c.exited), ("changed", c.changed)] {
                add("segment_changes", String(n), ("segment", c.segment), ("change", change))
            }
        }
        for d in r.destinationExited {
            add("destination_exited", String(d.rows), ("destination", d.destination), ("audience", d.audience))
        }
        if let b = r.postgresBehind { add("postgres_behind", b ? "1" : "0") }
        return e
    }

    /// The file's text for run `r` alone.
    public static func text(_ r: Run, lastSuccess: Double?) -> String { exposition(r, lastSuccess: lastSuccess).text }

    /// Writes the file for `r` at `path` (docs/rules.md §10.3, §6.2): under the lock of the
    /// file, the previous file is read (through no link, only a regular file under 1 MiB),
    /// every series of other pipelines is kept and this pipeline's replaced, and the result is
    /// written to a fresh name beside it, mode 0640 (and `group`'s), then renamed over it. On
    /// failure the previous file's last success of this pipeline is kept; with none, no
    /// last-success sample is written. A file that cannot be written is a warning on stderr,
    /// never a different exit code for the run.
    public static func write(
        _ r: Run, to path: String, group: String?, progress: Progress, lockTimeout: TimeInterval = lockTimeout
    ) {
        let folder = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let dir = folder.isEmpty ? "." : folder
        // A fresh name nobody can have planted a file or a link at (created exclusively, never
        // through a link), 0640 whatever the umask, then renamed over the old file.
        let tmp = dir + "/.\(name).tmp-\(System.processID)-\(UInt32.random(in: 0...UInt32.max))"
        do {
            let lock = try MetricsLock(dir + "/.\(name).lock", timeout: lockTimeout)
            defer { lock.release() }
            let previous = self.previous(path, progress: progress) ?? MetricsExposition()
            let lastSuccess =
                r.exitCode == 0
                ? r.finished.timeIntervalSince1970
                : previous.value(of: "winback_last_success_timestamp_seconds", pipeline: r.pipeline).flatMap {
                    $0.isFinite && $0 > 0 ? $0 : nil
                }
            let merged = previous.replacing(pipeline: r.pipeline, with: exposition(r, lastSuccess: lastSuccess))
            let f = try OutputFile(path: tmp, exclusive: true, group: group.flatMap(System.groupID))
            try f.write(Array(merged.text.utf8))
            _ = try f.finish()
            try System.rename(tmp, path)
        } catch {
            System.unlinkIfPresent(tmp)
            progress.warn(
                "metrics", "cannot write the metrics file: \(SystemError.words(error))", fields: ["path": path])
        }
    }

    /// The previous file at `path`, when it is a regular file under 1 MiB opened through no
    /// link (docs/rules.md §6.2); otherwise nil, with a warning unless there is none. Lines
    /// that do not parse are dropped, with a warning.
    static func previous(_ path: String, progress: Progress) -> MetricsExposition? {
        func ignored(_ why: String) -> MetricsExposition? {
            progress.warn(
                "metrics", "the previous metrics file \(why): ignored; a new file replaces it", fields: ["path": path])
            return nil
        }
        let fd: Int32
        let size: Int
        do { (fd, size) = try System.openRegularFile(path, followLinks: false) } catch let e as SystemError {
            return e.errno == ENOENT ? nil : ignored("cannot be opened (\(e.message))")
        } catch let e as System.NotRegularFile {
            return ignored("is \(e.what), not a regular file")
        } catch {
            return ignored("cannot be opened (\(SystemError.words(error)))")
        }
        defer { System.closeQuietly(fd) }
        guard size < previousLimit else { return ignored("is \(size) bytes, 1 MiB or more") }
        // Read at most the limit: a file growing meanwhile is not followed further.
        let bytes: [UInt8]
        do { bytes = try System.read(fd, upTo: previousLimit) } catch {
            return ignored("cannot be read (\(SystemError.words(error)))")
        }
        guard bytes.count < previousLimit else { return ignored("grew to 1 MiB or more while read") }
        var e = MetricsExposition.parse(bytes)
        if let first = e.dropped.first {
            let excerpt = ControlEscape.escaped(first.text.prefix(120))
            progress.warn(
                "metrics",
                "the previous metrics file has \(counted(e.dropped.count, "line")) that do not "
                    + "parse, dropped (line \(first.line): \(excerpt))", fields: ["path": path])
            e.dropped = []
        }
        return e
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
            r.segmentChanges = m.changes?.segments ?? []
            r.destinationExited = m.destinations.map { ($0.type.rawValue, $0.audience.rawValue, $0.exited) }
        }
        return r
    }

    /// The exit code the command line gives for `error`.
    public static func exitCode(_ error: Error) -> Int32 {
        (error as? WinBackError)?.code.exitCode ?? 1
    }

    /// After a run of a pipeline failed with `error`: the file, when the pipeline file could
    /// be read (`config`, as the run parsed it, problems or not) and names one outside the
    /// output folder (`output`, the command line's, else the file's), and the pipeline's name
    /// for the log's failure line.
    public static func failed(
        _ config: PipelineConfig?, output: String? = nil, started: Date, error: Error, progress: Progress
    ) {
        guard let config else { return }
        // The failure's log line names the pipeline even when it failed before resolving it.
        if progress.pipeline.isEmpty { progress.pipeline = config.name }
        guard let metrics = config.metricsPath else { return }
        let cwd = System.currentDirectory
        if let out = output.map({ InputFiles.absolute($0, base: cwd) })
            ?? (config.outputDirectory.isEmpty ? nil : config.resolve(config.outputDirectory)),
            MetricsPlace.isInside(config.resolve(metrics), output: out)
        {
            return  // a configuration error (docs/rules.md §6.2): nothing is written there
        }
        var r = Run(
            pipeline: config.name.isEmpty ? "unknown" : config.name, started: started, finished: Date(),
            exitCode: exitCode(error))
        if config.postgres != nil { r.postgresBehind = (error as? WinBackError)?.behind == "postgres" }
        write(r, to: config.resolve(metrics), group: config.outputGroup, progress: progress)
    }
}

/// The lock of a metrics file (docs/rules.md §10.3): flock(2) on `.<name>.lock` beside it,
/// opened through no link, held from reading the previous file until the new one is renamed
/// over it, so that pipelines sharing the file never lose each other's series. Waited for up
/// to a bound: a run holds it for milliseconds.
struct MetricsLock {
    let fd: Int32

    init(_ path: String, timeout: TimeInterval) throws {
        let fd: Int32
        do { fd = try System.openOrCreate(path) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot open the lock file", path: path)
        }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let locked: Bool
            do { locked = try System.tryLock(fd) } catch let e as SystemError {
                System.closeQuietly(fd)
                throw e.winBack(.cannotCreateOutput, "cannot lock", path: path)
            }
            if locked { break }
            guard Date() < deadline else {
                System.closeQuietly(fd)
                throw WinBackError(
                    .locked, "another run has held the lock for more than \(Int(timeout.rounded())) s", path: path)
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        self.fd = fd
    }

    /// Closes the lock file, which releases the lock.
    func release() { System.closeQuietly(fd) }
}
