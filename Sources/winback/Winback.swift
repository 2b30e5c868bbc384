import ArgumentParser
import Foundation
import WinBack

@main
struct Winback: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "winback",
        abstract: "Win-back offer audiences and redemption reports from App Store transaction exports.",
        discussion: """
            Exit codes: 0 success, 64 usage, 65 bad data (reject budget exceeded, corrupt gzip), \
            66 input missing or unreadable, 73 cannot create output, 74 an object read ended early, \
            75 another run holds the lock or S3 failed for now (run again later), 77 S3 refused the credentials, \
            78 bad configuration.
            """,
        version: ToolVersion.current,
        subcommands: [
            RunCommand.self, ValidateCommand.self, ExplainCommand.self, GenerateCommand.self, BenchCommand.self,
            PartitionCommand.self, MergeCommand.self, UploadCommand.self,
        ])
}

/// Runs `body`, turning a ``WinBackError`` into its message on stderr (through `progress`, as
/// text or JSON) and its exit code.
func reportingErrors<T>(_ progress: WinBack.Progress? = nil, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let e as WinBackError {
        if let progress {
            progress.error("\(e)", code: "\(e.code)", exitCode: e.code.exitCode)
        } else {
            FileHandleStderr.write("winback: error (\(e.code)): \(e)\n")
        }
        throw ExitCode(e.code.exitCode)
    } catch let e as ExitCode {
        throw e
    } catch {
        // An error no stage named: said in words (never an error domain and a code), exit 70.
        let e = WinBackError.unexpected(error)
        if let progress {
            progress.error("\(e)", code: "\(e.code)", exitCode: e.code.exitCode)
        } else {
            FileHandleStderr.write("winback: error (\(e.code)): \(e)\n")
        }
        throw ExitCode(e.code.exitCode)
    }
}

enum FileHandleStderr {
    static func write(_ s: String) {
        FileHandle.standardError.write(Data(s.utf8))
    }
}
