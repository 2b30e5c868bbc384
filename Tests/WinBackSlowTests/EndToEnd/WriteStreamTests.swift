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

    /// One `openat` of the trace that succeeded: its path and flags.
    struct Open {
        var path: String
        var flags: String
    }

    /// The successful `openat` calls of a `strace -f -e trace=openat` log (an interrupted
    /// call's two halves joined).
    static func opens(_ log: String) -> [Open] {
        var joined: [String] = []
        var pending: [String: String] = [:]
        for line in log.split(separator: "\n").map(String.init) {
            let pid = String(line.prefix { $0 != " " })
            if line.hasSuffix("<unfinished ...>") {
                pending[pid] = String(line.dropLast("<unfinished ...>".count))
            } else if line.contains("resumed>"), let start = pending.removeValue(forKey: pid),
                let rest = line.range(of: "resumed>")
            {
                joined.append(start + line[rest.upperBound...])
            } else {
                joined.append(line)
            }
        }
        return joined.compactMap { line in
            guard line.contains("openat("), let eq = line.range(of: ") = ", options: .backwards),
                Int(line[eq.upperBound...].prefix { $0 != " " }).map({ $0 >= 0 }) == true,
                let q1 = line.firstIndex(of: "\""), let q2 = line[line.index(after: q1)...].firstIndex(of: "\"")
            else { return nil }
            let path = String(line[line.index(after: q1)..<q2])
            let flags = line[line.index(after: q2)...].split(separator: ",", omittingEmptySubsequences: false)
                .dropFirst().first.map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
            return Open(path: path, flags: flags ?? "")
        }
    }

    @Test("the trace is read as strace writes it: flags, failed calls, a call cut in two by another thread")
    func parse() {
        let log = """
            101 openat(AT_FDCWD, "/o/.staging-1/segments/best-offer.csv", O_WRONLY|O_CREAT|O_TRUNC|O_NOFOLLOW|O_CLOEXEC, 0640) = 7
            101 openat(AT_FDCWD, "/o/missing", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
            102 openat(AT_FDCWD, "/o/.staging-1/segments/best-offer.csv", O_RDONLY|O_NONBLOCK|O_CLOEXEC <unfinished ...>
            101 openat(AT_FDCWD, "/o/.staging-1", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 8
            102 <... openat resumed>) = 9
            """
        let opens = Self.opens(log)
        #expect(
            opens.map(\.path) == [
                "/o/.staging-1/segments/best-offer.csv", "/o/.staging-1", "/o/.staging-1/segments/best-offer.csv",
            ])
        #expect(opens.map { $0.flags.hasPrefix("O_RDONLY") } == [false, true, true])
        #expect(opens[0].flags.contains("O_WRONLY") && opens[1].flags.contains("O_DIRECTORY"))
    }

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
        let opens = Self.opens(try String(contentsOfFile: log, encoding: .utf8))
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
