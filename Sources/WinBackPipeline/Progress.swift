import Foundation
import Synchronization
import WinBackModel
import WinBackSupport

/// Tells the operator what a run is doing, on stderr only (stdout is for results).
///
/// On a terminal: a progress line redrawn in place (bytes read of total, rate, ETA). Without
/// one (cron): one concise line per finished stage. JSON (`--log-format json`, docs/rules.md
/// §10.4): the same events, one JSON object per line. Quiet: nothing.
///
/// What a line quotes is escaped (docs/rules.md §6, §6.2): messages with ``ControlEscape``'s
/// `escaped`, and the file names of the `path`, `file` and `folder` fields as names, so that
/// no name splits a line or hides its bytes.
public final class Progress: Sendable {
    public enum Mode: Sendable { case quiet, terminal, log, json }

    public let mode: Mode
    /// The pipeline's name, for JSON lines; set once the pipeline file is read.
    public var pipeline: String {
        get { state.withLock { $0.pipelineName } }
        set { state.withLock { $0.pipelineName = newValue } }
    }

    /// The stage under way and its counters, touched from the reading threads (``advance(_:)``)
    /// and the pipeline's own.
    private struct State {
        package var pipelineName = ""
        package var total = 0
        package var done = 0
        package var stageName = ""
        package var stageStart = Date()
        package var lastDraw = Date.distantPast
        package var drew = false
    }
    private let state = Mutex(State())

    public init(mode: Mode) { self.mode = mode }

    /// Terminal mode when stderr is a TTY, log mode otherwise; quiet when asked.
    public static func automatic(quiet: Bool, json: Bool = false) -> Progress {
        Progress(mode: quiet ? .quiet : json ? .json : (System.isTerminal(2) ? .terminal : .log))
    }

    public func begin(_ stage: String, totalBytes: Int = 0) {
        state.withLock {
            $0.stageName = stage
            $0.stageStart = Date()
            $0.total = totalBytes
            $0.done = 0
        }
    }

    /// Adds bytes read; thread-safe; redraws at most ten times a second.
    public func advance(_ bytes: Int) {
        guard mode == .terminal else { return }
        state.withLock { s in
            s.done += bytes
            let now = Date()
            guard now.timeIntervalSince(s.lastDraw) >= 0.1 else { return }
            s.lastDraw = now
            let elapsed = max(now.timeIntervalSince(s.stageStart), 0.001)
            let rate = Double(s.done) / elapsed
            let eta = rate > 0 && s.total > s.done ? Double(s.total - s.done) / rate : 0
            let line = String(
                format: "\r%@: %@ of %@  %@/s  ETA %.0fs ", s.stageName, Progress.mb(s.done), Progress.mb(s.total),
                Progress.mb(Int(rate)), eta)
            FileHandle.standardError.write(Data(line.utf8))
            s.drew = true
        }
    }

    /// Ends a stage with a one-line summary; returns its wall seconds.
    @discardableResult
    public func end(_ summary: String) -> Double {
        let (seconds, name, clear) = state.withLock { s in
            defer { s.drew = false }
            return (Date().timeIntervalSince(s.stageStart), s.stageName, s.drew)
        }
        switch mode {
        case .quiet: break
        case .json:
            emit(
                "info", "stage_finished",
                [
                    "stage": name, "summary": summary, "seconds": (seconds * 1000).rounded() / 1000,
                    "peakResidentBytes": System.peakResidentBytes,
                ])
        case .terminal, .log:
            let prefix = clear ? "\r\u{1B}[K" : ""
            note(
                prefix
                    + String(
                        format: "winback: %@: %@ (%.2f s, peak %@)", name, ControlEscape.escaped(summary), seconds,
                        Progress.mb(System.peakResidentBytes)))
        }
        return seconds
    }

    /// A line on stderr, unless quiet.
    public func note(_ line: String) {
        guard mode != .quiet else { return }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// An event: `winback: <message>` in the text log, or a JSON line with the event's name
    /// and fields (docs/rules.md §10.4).
    public func event(_ name: String, _ message: String, fields: [String: Any] = [:]) {
        switch mode {
        case .quiet: break
        case .json: emit("info", name, fields.merging(["message": message]) { a, _ in a })
        case .terminal, .log: note("winback: " + ControlEscape.escaped(message))
        }
    }

    /// A warning: printed even when quiet (it asks for action).
    public func warn(_ name: String, _ message: String, fields: [String: Any] = [:]) {
        if mode == .json {
            emit("warning", name, fields.merging(["message": message]) { a, _ in a })
        } else {
            FileHandle.standardError.write(Data(("winback: warning: " + ControlEscape.escaped(message) + "\n").utf8))
        }
    }

    /// An error that ends the command: printed even when quiet. `message` is a
    /// ``WinBackError``'s description: its parts already escaped, one problem a line after it.
    public func error(_ message: String, code: String, exitCode: Int32) {
        if mode == .json {
            emit("error", "failed", ["message": message, "code": code, "exitCode": Int(exitCode)])
        } else {
            FileHandle.standardError.write(Data("winback: error (\(code)): \(message)\n".utf8))
        }
    }

    /// One JSON object on a line: time, level, event, pipeline, then the event's fields.
    private func emit(_ level: String, _ event: String, _ fields: [String: Any]) {
        var object = fields.mapValues { v -> Any in Progress.escapedField(v) }
        for key in Progress.nameFields {
            if let name = fields[key] as? String { object[key] = ControlEscape.name(name) }
        }
        object["time"] = Timestamp.iso(Int64((Date().timeIntervalSince1970 * 1000).rounded()))
        object["level"] = level
        object["event"] = event
        object["pipeline"] = pipeline
        guard
            var data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        data.append(0x0A)
        FileHandle.standardError.write(data)
    }

    /// Fields that hold a file name or object key (written with ``ControlEscape/name(_:)``).
    package static let nameFields = ["path", "file", "folder"]

    /// A JSON field's value with the controls of its text escaped.
    package static func escapedField(_ v: Any) -> Any {
        if let s = v as? String { return ControlEscape.escaped(s) }
        if let a = v as? [String] { return a.map(ControlEscape.escaped) }
        return v
    }

    package static func mb(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1_000_000) }
}
