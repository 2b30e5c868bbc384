import Foundation
import Testing
import WinBackTestSupport

/// A run hands its segment lists to the steps after the writers in memory (docs/rules.md
/// §10.5, §10.2): seen from outside, under strace, on the sample's second night.
@Suite("A run reads back no file it wrote", .tags(.slow))
struct WriteStreamTests {
    static let strace = ["/usr/bin/strace", "/bin/strace"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Whether strace can trace a process here (a container may forbid ptrace).
    static let traces: Bool = {
        guard let strace else { return false }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: strace)
        p.arguments = ["-f", "-e", "trace=openat", "-o", "/dev/null", "/bin/true"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }()

    @Test(
        "the sample's second night opens no file of its own run for reading, the pipeline file and the baseline's manifest once each",
        .enabled(if: traces, "strace is not installed (Debian: apt-get install strace), or cannot trace here"))
    func secondNight() throws {
        let root = Paths.temporary() + "/stream-\(UUID().uuidString)"
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/Pipelines", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/Data", withIntermediateDirectories: true)
        try fm.copyItem(atPath: Paths.repo + "/Pipelines/sample.yaml", toPath: root + "/Pipelines/sample.yaml")
        try fm.copyItem(atPath: Paths.repo + "/Data/sample", toPath: root + "/Data/sample")
        defer { try? fm.removeItem(atPath: root) }
        let pipeline = root + "/Pipelines/sample.yaml"
        let first = try CLI.run(["run", pipeline, "--as-of", "2026-11-01", "--quiet"])
        #expect(first.status == 0, "\(first.stderr)")
        let log = root + "/openat.log"
        let second = try CLI.run(
            ["run", pipeline, "--quiet"], launcher: [Self.strace!, "-f", "-e", "trace=openat", "-o", log])
        #expect(second.status == 0, "\(second.stderr)")
        let opens = StraceLog.opens(try String(contentsOfFile: log, encoding: .utf8))
        let output = root + "/Output/sample/"
        let baseline = output + "2026-11-01/"
        // What this run made: every file it opened to write, and every file of its folder.
        let written = Set(opens.filter { $0.flags.contains("O_WRONLY") || $0.flags.contains("O_CREAT") }.map(\.path))
        #expect(written.contains { $0.hasSuffix("/segments/best-offer.csv") }, "the trace saw no segment written")
        let readBack = opens.filter { o in
            o.flags.hasPrefix("O_RDONLY") && !o.flags.contains("O_DIRECTORY")
                && (written.contains(o.path) || (o.path.hasPrefix(output) && !o.path.hasPrefix(baseline)))
        }
        #expect(readBack.isEmpty, "files of the run opened for reading: \(readBack.map(\.path))")
        #expect(opens.filter { $0.path == pipeline }.count == 1, "the pipeline file is read once")
        #expect(opens.filter { $0.path == baseline + "manifest.json" }.count == 1, "the baseline's manifest once")
        // The baseline's segment files are read: the changes are made against them.
        #expect(opens.contains { $0.path == baseline + "segments/best-offer.csv" })
    }
}
