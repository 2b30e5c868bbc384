import Foundation
import Testing
import WinBackTestSupport

/// Runs the built `winback` executable (next to the test bundle; `swift build` makes it).
struct CLI {
    static var binary: String {
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [dir.appendingPathComponent("winback").path, Paths.repo + "/.build/debug/winback"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs to completion with no terminal attached (as under cron).
    /// With `launcher` (a program and its first arguments, such as `/usr/bin/time -f %M`), the
    /// binary runs under it.
    static func run(
        _ args: [String], cwd: String? = nil, environment: [String: String] = [:], launcher: [String] = []
    ) throws -> Result {
        let p = try start(args, cwd: cwd, environment: environment, launcher: launcher)
        let out = p.out.fileHandleForReading.readDataToEndOfFile()
        let err = p.err.fileHandleForReading.readDataToEndOfFile()
        p.process.waitUntilExit()
        return Result(
            status: p.process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }

    /// python3, where the machine has it.
    static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Runs `executable` with `arguments`, `environment` added to the test's own: its exit
    /// status, and its output and errors as one text.
    static func output(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (
        status: Int32, text: String
    ) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, text)
    }

    static func start(
        _ args: [String], cwd: String? = nil, environment: [String: String] = [:], launcher: [String] = []
    ) throws -> (process: Process, out: Pipe, err: Pipe) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: launcher.first ?? binary)
        p.arguments = launcher.isEmpty ? args : Array(launcher.dropFirst()) + [binary] + args
        if !environment.isEmpty {
            var env = ProcessInfo.processInfo.environment
            // An array index, or a PostgreSQL server of the machine's, is never the test's.
            for name in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ARRAY_INDEX"]
                + PostgresServer.unset
            {
                env[name] = nil
            }
            env.merge(environment) { $1 }
            p.environment = env
        }
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return (p, out, err)
    }
}
