import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// Faults a nightly cron run must survive (docs/rules.md §6).
@Suite("Reliability: faults, exit codes, atomic publish, lock", .serialized, .tags(.slow))
struct ReliabilityTests {
    /// A copy of the golden world whose output goes to `<world>/out`.
    func world() throws -> String { try Paths.copyFixture("golden") }

    func run(_ world: String, asOf: String? = nil) throws -> RunSummary {
        var o = RunOptions(pipelinePath: world + "/pipeline.yaml", asOf: asOf, threads: 2)
        o.now = ms("2026-11-22T06:00:00Z")
        return try PipelineRun.run(o, progress: Progress(mode: .quiet))
    }

    func expectFailure(_ code: WinBackError.Code, _ body: () throws -> Void, mentioning: String...) {
        do {
            try body()
            Issue.record("expected a failure with code \(code)")
        } catch let e as WinBackError {
            #expect(e.code == code, "\(e)")
            for m in mentioning { #expect("\(e)".contains(m), "\(e) should mention \(m)") }
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Replaces the pipeline's output directory and other keys by editing its text.
    func editPipeline(_ world: String, _ edit: (String) -> String) throws {
        let path = world + "/pipeline.yaml"
        try write(edit(try String(contentsOfFile: path, encoding: .utf8)), to: path)
    }

    @Test("a run over the reject budget exits 65, publishes nothing and keeps its rejects in .failed-<date>")
    func rejectBudget() throws {
        let w = try world()
        _ = try run(w)  // a good run to protect
        let before = try FileManager.default.destinationOfSymbolicLink(atPath: w + "/out/golden/2026-11-22")
        try editPipeline(w) {
            $0.replacingOccurrences(of: "maxRejectedFraction: 0.1", with: "maxRejectedFraction: 0.001")
        }
        expectFailure(.badData, { _ = try run(w) }, mentioning: "1 of 83 rows rejected")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: w + "/out/golden/2026-11-22") == before)
        #expect(FileManager.default.fileExists(atPath: w + "/out/golden/2026-11-22/segments/best-offer.csv"))
        let failed = w + "/out/golden/.failed-2026-11-22"
        let rejects = try String(contentsOfFile: failed + "/rejects.csv", encoding: .utf8)
        #expect(rejects.contains("transactions-b.jsonl.gz,3,invalid JSON"))
        let manifest = try String(contentsOfFile: failed + "/manifest.json", encoding: .utf8)
        #expect(manifest.contains("\"status\" : \"failed\""))
        #expect(manifest.contains("maxRejectedFraction"))
        #expect(filesBelow(w + "/out/golden").allSatisfy { !$0.contains(".staging-") })
    }

    @Test("a corrupt gzip fails with 65 naming the file and the byte offset; the last good run stays")
    func corruptGzip() throws {
        let w = try world()
        _ = try run(w)
        let path = w + "/input/transactions-a.jsonl.gz"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        for i in 200..<260 { bytes[i] ^= 0x5A }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        expectFailure(.badData, { _ = try run(w) }, mentioning: "transactions-a.jsonl.gz", "byte offset")
        #expect(FileManager.default.fileExists(atPath: w + "/out/golden/latest/segments/best-offer.csv"))
    }

    @Test("a truncated gzip fails with 65 and says truncated")
    func truncatedGzip() throws {
        let w = try world()
        let path = w + "/input/transactions-b.jsonl.gz"
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        try data.prefix(data.count - 30).write(to: URL(fileURLWithPath: path))
        expectFailure(.badData, { _ = try run(w) }, mentioning: "transactions-b.jsonl.gz", "truncated")
    }

    @Test("a glob matching nothing fails with 66 naming the glob")
    func globMatchesNothing() throws {
        let w = try world()
        try editPipeline(w) {
            $0.replacingOccurrences(of: "input/transactions-*.jsonl.gz", with: "input/nothing-*.jsonl.gz")
        }
        expectFailure(.noInput, { _ = try run(w) }, mentioning: "nothing-*.jsonl.gz")
    }

    @Test("an unreadable input fails with 66 naming the file")
    func unreadableInput() throws {
        let w = try world()
        let path = w + "/input/transactions-a.jsonl.gz"
        // Replace the file by a dangling symlink: it matches the glob but cannot be opened.
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: w + "/gone")
        expectFailure(.noInput, { _ = try run(w) }, mentioning: "transactions-a.jsonl.gz")
    }

    @Test("a second run while the lock is held exits 75 at once; a lock file with no holder blocks nothing")
    func lockHeld() throws {
        let w = try world()
        let holder = Publisher(root: w + "/out/golden", date: "2026-11-22")
        try holder.begin()
        expectFailure(.locked, { _ = try run(w) }, mentioning: "another run", ".lock")
        holder.fail(keeping: [])  // releases the lock
        // The lock file is still there, as after a killed run: it must not block.
        #expect(FileManager.default.fileExists(atPath: w + "/out/golden/.lock"))
        _ = try run(w)
    }

    @Test("re-running a date replaces it; latest follows the highest date, not the newest run")
    func republishAndLatest() throws {
        let w = try world()
        let first = try run(w)
        let v1 = try FileManager.default.destinationOfSymbolicLink(atPath: first.published)
        _ = try run(w, asOf: "2026-10-01")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: w + "/out/golden/latest") == "2026-11-22")
        let again = try run(w)
        let v2 = try FileManager.default.destinationOfSymbolicLink(atPath: again.published)
        #expect(v1 != v2)
        #expect(!FileManager.default.fileExists(atPath: w + "/out/golden/" + v1))  // old version cleaned up
        #expect(FileManager.default.fileExists(atPath: w + "/out/golden/2026-10-01/segments/best-offer.csv"))
        // Relative links, so the output folder can be moved or mounted elsewhere.
        #expect(!v2.hasPrefix("/"))
    }

    @Test("the same inputs give the same bytes whatever the thread count and the order of the globs")
    func determinism() throws {
        let w = try world()
        let a = try run(w)
        let reference = filesBelow(a.published).filter { $0 != "manifest.json" }
        var digests: [String: Data] = [:]
        for f in reference { digests[f] = FileManager.default.contents(atPath: a.published + "/" + f) }
        try editPipeline(w) {
            $0.replacingOccurrences(
                of: "paths: [\"input/transactions-*.jsonl.gz\"]",
                with: "paths: [\"input/transactions-b.jsonl.gz\", \"input/*.jsonl.gz\"]"
            ).replacingOccurrences(of: "directory: out", with: "directory: out2")
        }
        for threads in [1, 3, 8] {
            var o = RunOptions(pipelinePath: w + "/pipeline.yaml", threads: threads)
            o.now = ms("2026-11-22T06:00:00Z")
            o.output = w + "/out-t\(threads)"
            let b = try PipelineRun.run(o, progress: Progress(mode: .quiet))
            #expect(filesBelow(b.published).filter { $0 != "manifest.json" } == reference)
            for f in reference {
                #expect(
                    FileManager.default.contents(atPath: b.published + "/" + f) == digests[f],
                    "\(f) differs with \(threads) threads")
            }
        }
    }
}

/// The command line: exit codes, stdout only for results, stderr lines under cron.
@Suite("Command line", .serialized, .tags(.slow))
struct CommandLineTests {
    @Test("run prints the published folder on stdout and one line per stage on stderr without a terminal")
    func runUnderCron() throws {
        let w = try Paths.copyFixture("golden")
        let r = try CLI.run(["run", "pipeline.yaml", "--as-of", "2026-11-22"], cwd: w)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == w + "/out/golden/2026-11-22\n")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("winback: read: 2 files") })
        #expect(lines.contains { $0.hasPrefix("winback: evaluate: 11 customers") })
        #expect(lines.contains { $0.hasPrefix("winback: write:") })
        #expect(!r.stderr.contains("\r"))
        let quiet = try CLI.run(["run", "pipeline.yaml", "--as-of", "2026-11-22", "--quiet"], cwd: w)
        #expect(quiet.status == 0)
        #expect(quiet.stderr == "")
    }

    @Test("on a terminal, run redraws a progress line with bytes read, rate and ETA")
    func progressOnTerminal() throws {
        let w = try Paths.copyFixture("golden")
        // script(1) gives the run a pseudo-terminal.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        p.arguments = ["-qfec", "\(CLI.binary) run pipeline.yaml", "/dev/null"]
        p.currentDirectoryURL = URL(fileURLWithPath: w)
        let out = Pipe()
        p.standardOutput = out
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
        #expect(text.contains("\rread: "))
        #expect(text.contains(" of ") && text.contains("/s") && text.contains("ETA"))
        #expect(text.contains("\r\u{1B}[Kwinback: read: 2 files"))
    }

    @Test(
        "exit codes follow sysexits",
        arguments: [
            ("usage", 64), ("bad-config", 78), ("missing-pipeline", 78), ("bad-catalog", 78), ("no-match", 66),
            ("glob-folder", 66), ("corrupt", 65), ("locked", 75), ("unwritable-output", 73),
        ])
    func exitCodes(fault: String, expected: Int32) throws {
        let w = try Paths.copyFixture("golden")
        var args = ["run", "pipeline.yaml"]
        var lock: Publisher?
        switch fault {
        case "usage": args.append("--threads=zero")
        case "bad-config":
            let p = w + "/pipeline.yaml"
            try (try String(contentsOfFile: p, encoding: .utf8) + "consecutiveGapDayz: 30\n")
                .write(toFile: p, atomically: true, encoding: .utf8)
        case "missing-pipeline": args[1] = "nope.yaml"
        case "bad-catalog":
            try "{\"offers\": [{\"offerId\": \"x\"}]}".write(
                toFile: w + "/input/offers.json", atomically: true, encoding: .utf8)
        case "no-match":
            try FileManager.default.removeItem(atPath: w + "/input/transactions-a.jsonl.gz")
            try FileManager.default.removeItem(atPath: w + "/input/transactions-b.jsonl.gz")
        case "glob-folder":
            try FileManager.default.createDirectory(
                atPath: w + "/input/transactions-z.jsonl.gz", withIntermediateDirectories: false)
        case "corrupt":
            try Data([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff]).write(
                to: URL(fileURLWithPath: w + "/input/transactions-a.jsonl.gz"))
        case "locked":
            lock = Publisher(root: w + "/out/golden", date: "2026-11-22")
            try lock?.begin()
        case "unwritable-output":
            try "a file".write(toFile: w + "/blocker", atomically: true, encoding: .utf8)
            args += ["--output", w + "/blocker/out"]
        default: break
        }
        let r = try CLI.run(args, cwd: w)
        #expect(r.status == expected, "\(fault): \(r.stderr)")
        #expect(r.stdout == "")
        if expected != 64 { #expect(r.stderr.contains("winback: error")) }
        lock?.fail(keeping: [])
    }

    @Test(
        "a run killed while it runs (begun, its files staged, nothing published yet) or later leaves the previous run published as it was, and the next run succeeds"
    )
    func killedMidRun() throws {
        let w = try Paths.copyFixture("golden")
        let first = try CLI.run(["run", "pipeline.yaml", "--quiet"], cwd: w)
        #expect(first.status == 0, "\(first.stderr)")
        let root = w + "/out/golden"
        let published = root + "/2026-11-22"
        let previous = try FileManager.default.destinationOfSymbolicLink(atPath: published)
        let golden = Paths.fixtures + "/golden/expected/segments"
        var killedRunning = 0
        var killedBeforePublish = 0
        for delay in [0, 0, 0, 0, 1, 2, 5, 10, 20, 40] {
            let p = try CLI.start(["run", "pipeline.yaml", "--quiet"], cwd: w)
            let pid = p.process.processIdentifier
            // The run's staging folder: made once it holds the lock, renamed away as it publishes.
            let staging = root + "/.staging-2026-11-22-\(pid)"
            let deadline = Date().addingTimeInterval(60)
            while !FileManager.default.fileExists(atPath: staging) && p.process.isRunning && Date() < deadline {
                usleep(100)
            }
            usleep(useconds_t(delay * 1000))
            kill(pid, SIGKILL)
            p.process.waitUntilExit()
            guard p.process.terminationReason == .uncaughtSignal else {
                // It ended before the kill: then it published the same run.
                #expect(p.process.terminationStatus == 0, "a run that ended before the kill at \(delay) ms")
                continue
            }
            killedRunning += 1
            // Its staging folder still there: killed after it began and before it published.
            if FileManager.default.fileExists(atPath: staging) {
                killedBeforePublish += 1
                #expect(
                    try FileManager.default.destinationOfSymbolicLink(atPath: published) == previous,
                    "a run killed before it published at \(delay) ms replaced the published one")
            }
            // Whatever the moment, the published date is a complete run.
            for f in filesBelow(golden) {
                #expect(
                    FileManager.default.contents(atPath: published + "/segments/" + f)
                        == FileManager.default.contents(atPath: golden + "/" + f), "after a kill at \(delay) ms: \(f)")
            }
        }
        // The kills landed while the runs ran, some of them between the staging and the publish.
        #expect(killedRunning >= 4, "\(killedRunning) of 10 runs were killed while running")
        #expect(killedBeforePublish >= 1, "no run was killed between its staging and its publish")
        let next = try CLI.run(["run", "pipeline.yaml", "--quiet"], cwd: w)
        #expect(next.status == 0, "\(next.stderr)")
        let leftovers = (try FileManager.default.contentsOfDirectory(atPath: root))
            .filter { $0.hasPrefix(".staging-") || $0.hasPrefix(".link-") }
        #expect(leftovers == [])
    }

    @Test("a link a killed run made but never renamed into place is removed by the next run")
    func staleLinkIsRemoved() throws {
        let w = try Paths.copyFixture("golden")
        let root = w + "/out/golden"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // What a run killed between symlink(2) and rename(2) leaves behind.
        #expect(symlink(".run-2026-11-22-1-99999", root + "/.link-2026-11-22-99999") == 0)
        #expect(symlink("2026-11-22", root + "/.link-latest-99999") == 0)
        let r = try CLI.run(["run", "pipeline.yaml", "--quiet"], cwd: w)
        #expect(r.status == 0, "\(r.stderr)")
        let leftovers = (try FileManager.default.contentsOfDirectory(atPath: root)).filter { $0.hasPrefix(".link-") }
        #expect(leftovers == [])
        #expect(FileManager.default.fileExists(atPath: root + "/2026-11-22/manifest.json"))
    }

    @Test("a misspelt catalog key fails validate and run with exit 78, naming the offer and the key")
    func misspeltCatalogKey() throws {
        let w = try Paths.copyFixture("golden")
        let catalog = w + "/input/offers.json"
        let text = try String(contentsOfFile: catalog, encoding: .utf8)
        #expect(text.contains("\"territories\""))
        try text.replacingOccurrences(of: "\"territories\"", with: "\"territory\"")
            .write(toFile: catalog, atomically: true, encoding: .utf8)
        let problem = "field 'territory': unknown key (did you mean 'territories'?)"
        let validate = try CLI.run(["validate", "pipeline.yaml"], cwd: w)
        #expect(validate.status == 78)
        #expect(validate.stderr.contains(problem), "\(validate.stderr)")
        #expect(!validate.stdout.contains("valid"))
        let run = try CLI.run(["run", "pipeline.yaml", "--quiet"], cwd: w)
        #expect(run.status == 78)
        #expect(run.stderr.contains(problem), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w + "/out/golden/latest"))
    }

    @Test("a pipeline file's problems are printed one a line, a name's line break escaped")
    func problemsOneALine() throws {
        let w = try Paths.copyFixture("golden")
        let yaml = try String(contentsOfFile: w + "/pipeline.yaml", encoding: .utf8)
        try (yaml + "colour: blue\n\"bad\\nkey\": 1\n").write(
            toFile: w + "/pipeline.yaml", atomically: true, encoding: .utf8)
        let r = try CLI.run(["run", "pipeline.yaml", "--quiet"], cwd: w)
        #expect(r.status == 78)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("winback: error (configuration): pipeline.yaml: invalid pipeline file") == true)
        #expect(lines.filter { $0.hasPrefix("  - ") }.count == 2, "\(r.stderr)")
        #expect(lines.contains { $0.hasPrefix("  - ") && $0.contains("'colour'") }, "\(r.stderr)")
        #expect(lines.contains { $0.hasPrefix("  - ") && $0.contains("bad\\x0Akey") }, "\(r.stderr)")
        #expect(!r.stderr.contains("\\x0A  - "), "\(r.stderr)")
    }

    @Test(
        "a thread count outside 1–256 is a usage error from every command that takes one, as in the file",
        arguments: [
            ["run", "pipeline.yaml", "--threads", "0"], ["run", "pipeline.yaml", "--threads", "257"],
            ["bench", "--threads", "300", "--cache", "unused"],
            [
                "partition", "pipeline.yaml", "--work", "w", "--shards", "2", "--tasks", "1", "--task", "0",
                "--threads", "0",
            ],
        ])
    func threadCounts(arguments: [String]) throws {
        let w = try Paths.copyFixture("golden")
        let r = try CLI.run(arguments, cwd: w)
        #expect(r.status == 64, "\(arguments): \(r.stderr)")
        #expect(r.stderr.contains("--threads expects a number of threads from 1 to 256, found "), "\(r.stderr)")
        #expect(
            !FileManager.default.fileExists(atPath: w + "/unused") && !FileManager.default.fileExists(atPath: w + "/w"))
        #expect(!FileManager.default.fileExists(atPath: w + "/out"))
    }

    @Test("options that only work with another are usage errors without it")
    func optionsWithoutTheirPartner() throws {
        let w = try Paths.copyFixture("golden")
        for (arguments, message) in [
            (["generate", "--customers", "10", "--out", "g", "--holdout", "5%"], "--holdout needs --experiment NAME"),
            (["bench", "--tasks", "3", "--cache", "unused"], "--tasks needs --shards"),
        ] {
            let r = try CLI.run(arguments, cwd: w)
            #expect(r.status == 64, "\(arguments): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(r.stderr)")
            #expect(
                !FileManager.default.fileExists(atPath: w + "/g")
                    && !FileManager.default.fileExists(atPath: w + "/unused"))
        }
    }

    @Test("--memory below 32 MB is a usage error saying so")
    func memoryBelowMinimum() throws {
        let w = try Paths.copyFixture("golden")
        let r = try CLI.run(["run", "pipeline.yaml", "--memory", "8MB"], cwd: w)
        #expect(r.status == 64)
        #expect(r.stderr.contains("--memory '8MB' is below the 32 MB minimum"), "\(r.stderr)")
    }

    @Test("a folder a glob matches is an input error (66) from validate and run, naming it; nothing is published")
    func folderMatchedByAGlob() throws {
        let w = try Paths.copyFixture("golden")
        let folder = w + "/input/transactions-z.jsonl.gz"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for command in ["validate", "run"] {
            let r = try CLI.run([command, "pipeline.yaml"], cwd: w)
            #expect(r.status == 66, "\(command): \(r.stderr)")
            #expect(r.stderr.contains(folder + ": is a folder, not a regular file"), "\(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: w + "/out"))
    }

    @Test(
        "a catalog or pipeline file that is a FIFO is a configuration error (78) naming it, from validate and run, without hanging",
        .timeLimit(.minutes(1)))
    func fifoConfiguration() throws {
        let w = try Paths.copyFixture("golden")
        try FileManager.default.removeItem(atPath: w + "/input/offers.json")
        #expect(mkfifo(w + "/input/offers.json", 0o600) == 0)
        for command in ["validate", "run", "explain"] {
            var arguments = [command, "pipeline.yaml"]
            if command == "explain" { arguments += ["--customer", "2000000000001001"] }
            let r = try CLI.run(arguments, cwd: w)
            #expect(r.status == 78, "\(command): \(r.stderr)")
            #expect(
                r.stderr.contains(w + "/input/offers.json: is a FIFO (named pipe), not a regular file"), "\(r.stderr)")
        }
        #expect(mkfifo(w + "/fifo.yaml", 0o600) == 0)
        for command in ["validate", "run"] {
            let r = try CLI.run([command, "fifo.yaml"], cwd: w)
            #expect(r.status == 78, "\(command): \(r.stderr)")
            #expect(r.stderr.contains("fifo.yaml: is a FIFO (named pipe), not a pipeline file"), "\(r.stderr)")
        }
    }

    @Test("validate reports every problem at once with exit 78, and exit 0 when valid")
    func validate() throws {
        let w = try Paths.copyFixture("golden")
        let ok = try CLI.run(["validate", "pipeline.yaml"], cwd: w)
        #expect(ok.status == 0, "\(ok.stderr)")
        let p = w + "/pipeline.yaml"
        try
            (try String(contentsOfFile: p, encoding: .utf8)
            .replacingOccurrences(of: "name: golden", with: "name: Golden!")
            .replacingOccurrences(of: "input/transactions-*", with: "input/missing-*") + "threadz: 2\n")
            .write(toFile: p, atomically: true, encoding: .utf8)
        try """
        {"offers": [{"offerId": "a", "subscriptionGroupId": "1", "productId": "p",
          "customerEligibilityPaidSubscriptionDurationInMonths": 25,
          "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 0, "maximum": 3},
          "territories": ["XXX"]}]}
        """.write(toFile: w + "/input/offers.json", atomically: true, encoding: .utf8)
        let bad = try CLI.run(["validate", "pipeline.yaml"], cwd: w)
        #expect(bad.status == 78)
        for needle in ["name", "threadz", "missing-*", "25", "minimum", "XXX"] {
            #expect(bad.stderr.contains(needle), "validate should report \(needle): \(bad.stderr)")
        }
    }
}
