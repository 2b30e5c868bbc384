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

/// Hostile input and a hostile folder (docs/rules.md §6.1), and intermediate files checked end
/// to end (§8.1): whatever a broken exporter, a full disk or an attacker left, a run ends with a
/// sysexits code and a message naming the file, never a signal, and never a different audience
/// published.
///
/// The tests run as root here; the one that needs it (giving the published folder to group
/// root) says so.
@Suite("Hostile input and a hostile folder", .serialized, .tags(.slow))
struct HostileInputTests {
    static let date = "2026-11-22"
    static let quiet = Progress(mode: .quiet)

    // MARK: Helpers

    /// A generated world in `format` and its pipeline file, with `limits` (YAML lines under
    /// `limits:`) added.
    static func world(
        customers: Int = 40, seed: UInt64 = 17, format: InputFormat = .appstoreNDJSON, limits: [String] = []
    ) throws -> String {
        let dir = Paths.temporary() + "/world"
        var o = GenerateOptions(customers: customers, seed: seed, asOf: ShardedRunTests.asOf, format: format)
        o.threads = 2
        _ = try WorldGenerator.generate(o, to: dir)
        let pipeline = dir + "/pipeline.yaml"
        if !limits.isEmpty { try setLimits(pipeline, limits) }
        return pipeline
    }

    /// Replaces (or adds) the `limits:` section of a generated pipeline file.
    static func setLimits(_ pipeline: String, _ limits: [String]) throws {
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        if let r = text.range(of: "limits:\n") {
            let end =
                text[r.upperBound...].range(of: "\n[a-z]", options: .regularExpression)?.lowerBound ?? text.endIndex
            text.removeSubrange(r.lowerBound..<(end == text.endIndex ? end : text.index(after: end)))
        }
        text += "limits:\n" + limits.map { "  \($0)\n" }.joined()
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
    }

    static func folder(_ pipeline: String) -> String { (pipeline as NSString).deletingLastPathComponent }

    static func options(_ pipeline: String, output: String, asOf: String = date) -> RunOptions {
        var o = RunOptions(pipelinePath: pipeline, asOf: asOf, output: output, threads: 2)
        o.now = ShardedRunTests.asOf
        return o
    }

    /// Runs `body`, which must fail with a `WinBackError` whose exit code is one of `codes` and
    /// whose message names `naming`.
    @discardableResult
    static func expectFailure(
        _ codes: Set<Int32>, naming: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) -> WinBackError? {
        do {
            try body()
            Issue.record("\(what): no failure", sourceLocation: sourceLocation)
        } catch let e as WinBackError {
            #expect(codes.contains(e.code.exitCode), "\(what): \(e)", sourceLocation: sourceLocation)
            #expect("\(e)".contains(naming), "\(what): '\(e)' does not name \(naming)", sourceLocation: sourceLocation)
            return e
        } catch {
            Issue.record("\(what): not a WinBackError: \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    /// A command's result that must have exit `status` and name `naming` on stderr.
    static func expectExit(
        _ r: CLI.Result, _ status: Int32, naming: String, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(r.status == status, "\(what): exit \(r.status): \(r.stderr)", sourceLocation: sourceLocation)
        #expect(
            r.stderr.contains(naming), "\(what): stderr does not name \(naming): \(r.stderr)",
            sourceLocation: sourceLocation)
    }

    /// Runs the command line, killing it (and failing) if it has not ended after `seconds`.
    static func runWithin(
        _ seconds: Double, _ args: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> CLI.Result {
        let p = try CLI.start(args)
        let deadline = Date().addingTimeInterval(seconds)
        while p.process.isRunning && Date() < deadline { usleep(10_000) }
        if p.process.isRunning {
            kill(p.process.processIdentifier, SIGKILL)
            Issue.record("\(args.prefix(2)) still running after \(seconds) s: killed", sourceLocation: sourceLocation)
        }
        let out = p.out.fileHandleForReading.readDataToEndOfFile()
        let err = p.err.fileHandleForReading.readDataToEndOfFile()
        p.process.waitUntilExit()
        return CLI.Result(
            status: p.process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }

    /// Flips the bits of `mask` in the byte at `offset` of `path` (twice restores it).
    static func flip(_ path: String, at offset: Int, mask: UInt8 = 0x01) throws {
        guard let h = FileHandle(forUpdatingAtPath: path) else {
            throw WinBackError(.noInput, "cannot open to flip a byte", path: path)
        }
        defer { try? h.close() }
        try h.seek(toOffset: UInt64(offset))
        let byte = try h.read(upToCount: 1) ?? Data()
        try h.seek(toOffset: UInt64(offset))
        try h.write(contentsOf: Data([byte[0] ^ mask]))
    }

    static func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// Puts `data` back at `path`, whatever is there now (a link, a longer file, nothing).
    static func restore(_ path: String, _ data: Data) throws {
        try? FileManager.default.removeItem(atPath: path)
        guard FileManager.default.createFile(atPath: path, contents: data) else {
            throw WinBackError(.cannotCreateOutput, "cannot restore", path: path)
        }
    }

    /// Where the links of a published pipeline point, and its hidden entries: what a failed
    /// run must leave as it was.
    static func state(_ root: String) -> [String: String] {
        var out: [String: String] = [:]
        for e in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where e != ".lock" {
            out[e] = (try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + e)) ?? "(not a link)"
        }
        return out
    }

    /// The decompressed lines of a gzip file, each with its LF.
    static func gunzippedLines(_ path: String) throws -> [[UInt8]] {
        let all = try ReadSupport.readAll(path, chunk: 1 << 16)
        return all.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map { Array($0) + [0x0A] }
    }

    /// Rewrites gzip file `path` with `inserted` (written by `write`) before its line `line`
    /// (1-based).
    static func insert(into path: String, beforeLine line: Int, _ write: (GzipWriter) throws -> Void) throws {
        let lines = try gunzippedLines(path)
        #expect(lines.count >= line, "\(path) has \(lines.count) lines")
        let w = try GzipWriter(path: path + ".new", level: 1)
        for l in lines[..<(line - 1)] { try w.write(l) }
        try write(w)
        for l in lines[(line - 1)...] { try w.write(l) }
        try w.close()
        try System.rename(path + ".new", path)
    }

    /// Writes `count` bytes `byte` through `w`, a mebibyte at a time.
    static func writeRepeated(_ byte: UInt8, count: Int, to w: GzipWriter) throws {
        let block = [UInt8](repeating: byte, count: 1 << 20)
        var left = count
        while left > 0 {
            let n = min(left, block.count)
            try w.write(Array(block[0..<n]))
            left -= n
        }
    }

    /// The data rows of a rejects.csv (header left out).
    static func rejectRows(_ path: String) throws -> [Substring] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return text.split(separator: "\n").dropFirst().map { $0 }
    }

    /// A published run's files but the manifest and rejects.csv (which say what was rejected).
    static func audience(_ link: String) -> [String: Data] {
        publishedFiles(link).filter { $0.key != "rejects.csv" }
    }

    // MARK: §8.1: every intermediate file checked

    /// The size of the part file is checked before its first byte is read, every length against
    /// the bytes left, each section's rows by CRC-32 and the whole file by SHA-256: no flip of
    /// any byte may be read as different rows.
    @Test("every byte of a part file flipped: the shard fails with 65 naming it; cut, grown, linked or deleted too")
    func everyBytePartFile() throws {
        let pipeline = try ShardedRunTests.world(customers: 50, seed: 21)
        let reference = try ShardedRunTests.inMemory(pipeline)
        let work = Paths.temporary() + "/work"
        let o = ShardedRunTests.options(pipeline, output: Paths.temporary())
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 0, tasks: 1, progress: Self.quiet)
        _ = try ShardedRun.shard(o, work: work, shard: 1, shards: 2, progress: Self.quiet)
        let part = WorkFolder(work).part(task: 0, shard: 0)
        let good = try #require(Self.bytes(part))
        #expect(good.count > 2000)

        /// Shard 0 then the merge: either fails with 65 naming the part file, or (were SHA-256
        /// ever fooled) publishes exactly the run in memory.
        func expectRejected(_ what: String, codes: Set<Int32> = [65]) {
            do {
                _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: Self.quiet)
            } catch let e as WinBackError {
                #expect(codes.contains(e.code.exitCode), "\(what): \(e)")
                #expect("\(e)".contains(part), "\(what): '\(e)' does not name the part file")
                return
            } catch {
                Issue.record("\(what): not a WinBackError: \(error)")
                return
            }
            do {
                let s = try ShardedRun.merge(o, work: work, shards: 2, progress: Self.quiet)
                let got = publishedFiles(s.published)
                if got != reference { Issue.record("\(what): a different audience was published with success") }
            } catch let e as WinBackError {
                #expect(e.code.exitCode == 65, "\(what): \(e)")
            } catch {
                Issue.record("\(what): not a WinBackError: \(error)")
            }
        }

        // Each case reads the part file from the start, about 11 ms in a debug build: flipping
        // every byte of this one (about 19 KB) would take minutes. So every byte of the first 256
        // (the magic, the first section's header, strings and first rows) and of the last 32 (the
        // last rows and their CRC), and 64 bytes spread evenly over the rest.
        let head = 256
        let tail = 32
        let spread = (0..<64).map { head + $0 * (good.count - head - tail) / 64 }
        for offset in Array(0..<head) + spread + Array((good.count - tail)..<good.count) {
            try Self.flip(part, at: offset)
            expectRejected("byte \(offset) of \(good.count) flipped")
            try Self.flip(part, at: offset)
        }
        // Every other bit of the magic and of the first section's file index.
        for offset in 0..<12 {
            for bit in 1..<8 {
                try Self.flip(part, at: offset, mask: 1 << bit)
                expectRejected("bit \(bit) of byte \(offset) flipped")
                try Self.flip(part, at: offset, mask: 1 << bit)
            }
        }

        try Self.restore(part, good.prefix(good.count - 1))
        expectRejected("cut short by a byte")
        try Self.restore(part, good.prefix(good.count / 2))
        expectRejected("cut in half")
        try Self.restore(part, Data())
        expectRejected("empty")
        try Self.restore(part, good + Data([0]))
        expectRejected("grown by a byte")
        let copy = Paths.temporary() + "/good.part"
        try good.write(to: URL(fileURLWithPath: copy))
        try FileManager.default.removeItem(atPath: part)
        try FileManager.default.createSymbolicLink(atPath: part, withDestinationPath: copy)
        expectRejected("a link to a good copy")
        #expect(Self.bytes(copy) == good)
        try FileManager.default.removeItem(atPath: part)
        expectRejected("deleted", codes: [65, 66])

        // Put back, the same part file gives the run in memory.
        try Self.restore(part, good)
        _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: Self.quiet)
        let s = try ShardedRun.merge(o, work: work, shards: 2, progress: Self.quiet)
        ShardedRunTests.expectSame(publishedFiles(s.published), reference)
    }

    @Test("every shard output and partition file altered: merge or shard fails with 65 naming it, nothing published")
    func everyShardOutputAltered() throws {
        let pipeline = try ShardedRunTests.world(customers: 60, seed: 22)
        let work = Paths.temporary() + "/work"
        let output = Paths.temporary()
        let o = ShardedRunTests.options(pipeline, output: output)
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 0, tasks: 1, progress: Self.quiet)
        for k in 0..<2 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 2, progress: Self.quiet) }
        let first = try ShardedRun.merge(o, work: work, shards: 2, progress: Self.quiet)
        let published = publishedFiles(first.published)
        let root = (first.published as NSString).deletingLastPathComponent
        let before = Self.state(root)
        #expect(before["latest"] == Self.date)

        /// Alters `path` with `change`, requires `run` to fail naming it, then puts it back.
        func expectRefused(
            _ path: String, _ what: String, codes: Set<Int32> = [65], change: (String) throws -> Void,
            run: () throws -> Void
        ) throws {
            let good = try #require(Self.bytes(path))
            try change(path)
            Self.expectFailure(codes, naming: path, "\((path as NSString).lastPathComponent) \(what)") { try run() }
            try Self.restore(path, good)
            // Nothing published, nothing staged: the previous run is as it was.
            let after = Self.state(root).filter { !$0.key.hasPrefix(".failed-") }
            #expect(after == before.filter { !$0.key.hasPrefix(".failed-") }, "\(path) \(what)")
            #expect(publishedFiles(root + "/latest") == published)
        }
        let flipMiddle: (String) throws -> Void = { path in
            let size = try #require(Self.bytes(path)).count
            try Self.flip(path, at: size / 2)
        }
        let appendLine: (String) throws -> Void = { path in
            let h = try #require(FileHandle(forWritingAtPath: path))
            defer { try? h.close() }
            try h.seekToEnd()
            try h.write(contentsOf: Data("2000000000000001,extra\n".utf8))
        }
        let merge = { _ = try ShardedRun.merge(o, work: work, shards: 2, progress: Self.quiet) }

        let shard0 = work + "/shards/0"
        let files = filesBelow(shard0)
        for name in ["_SUCCESS", "reports.json", "reports/apple-disagreements.csv", "segments/best-offer.csv"] {
            #expect(files.contains(name), "shard 0 has no \(name)")
        }
        #expect(files.contains { $0.hasSuffix(".xml") })
        for name in files {
            try expectRefused(shard0 + "/" + name, "with a byte flipped", change: flipMiddle, run: merge)
            try expectRefused(shard0 + "/" + name, "with a line appended", change: appendLine, run: merge)
        }
        for name in ["segments/best-offer.csv", "reports.json"] {
            try expectRefused(
                shard0 + "/" + name, "deleted", codes: [65, 66],
                change: { try FileManager.default.removeItem(atPath: $0) }, run: merge)
        }

        // The partition task's own files: its marker and renewals are read by the shard, its
        // rejects by the merge.
        let shardThenMerge = {
            _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: Self.quiet)
            try merge()
        }
        for name in ["_SUCCESS", "rejects.json", "renewals.json"] {
            let path = work + "/parts/task-0/" + name
            try expectRefused(path, "with a byte flipped", change: flipMiddle, run: shardThenMerge)
            try expectRefused(path, "with a line appended", change: appendLine, run: shardThenMerge)
        }

        // Put back, the outputs merge again into the same run.
        for k in 0..<2 { _ = try ShardedRun.shard(o, work: work, shard: k, shards: 2, progress: Self.quiet) }
        let again = try ShardedRun.merge(o, work: work, shards: 2, progress: Self.quiet)
        #expect(publishedFiles(again.published) == published)
    }

    // MARK: §6.1: bounded reading

    @Test("a gzip bomb of 2 million rejected lines: 65, rejects.csv lists 100 000 and counts the rest")
    func rejectBomb() throws {
        let pipeline = try Self.world()
        let bomb = Self.folder(pipeline) + "/transactions-9999-99.jsonl.gz"
        let w = try GzipWriter(path: bomb, level: 9)
        let block = [UInt8](String(repeating: "{}\n", count: 20_000).utf8)
        for _ in 0..<100 { try w.write(block) }
        try w.close()
        #expect(try #require(Self.bytes(bomb)).count < 100_000)
        let output = Paths.temporary()

        /// rejects.csv: 100 000 rows of the bomb, then one saying how many more.
        func expectBounded(_ path: String) throws {
            let rows = try Self.rejectRows(path)
            #expect(rows.count == 100_001)
            #expect(rows.dropLast().allSatisfy { $0.hasPrefix("transactions-9999-99.jsonl.gz,") })
            #expect(rows.last == ",,not_listed,1900000 more rejected rows not listed (limits.maxRejectsListed: 100000)")
        }
        let failed = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        Self.expectExit(failed, 65, naming: "rejects.csv", "the bomb over the budget")
        #expect(failed.stderr.contains("2000000 of"), "\(failed.stderr)")
        try expectBounded(output + "/generated/.failed-\(Self.date)/rejects.csv")
        #expect(!FileManager.default.fileExists(atPath: output + "/generated/latest"))

        try Self.setLimits(pipeline, ["maxRejectedFraction: 1"])
        let ok = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(ok.status == 0, "\(ok.stderr)")
        try expectBounded(output + "/generated/latest/rejects.csv")
    }

    @Test(
        "a line longer than limits.maxLineBytes is rejected unread and the other rows read",
        arguments: [(nil, 40 << 20), ("1KiB", 2048)] as [(String?, Int)])
    func longLine(limit: String?, length: Int) throws {
        var limits = ["maxRejectedFraction: 0.5"]
        if let limit { limits.append("maxLineBytes: \(limit)") }
        let pipeline = try Self.world(limits: limits)
        let reference = try ShardedRunTests.inMemory(pipeline)
        let file = "transactions-2025-06.jsonl.gz"
        try Self.insert(into: Self.folder(pipeline) + "/" + file, beforeLine: 4) { w in
            try Self.writeRepeated(UInt8(ascii: "a"), count: length, to: w)
            try w.write("\n")
        }
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try Self.rejectRows(output + "/generated/latest/rejects.csv")
        #expect(rows.count == 1)
        let bytes = limit == nil ? 16 << 20 : 1024
        #expect(
            rows.first?.hasPrefix(
                "\(file),4,line longer than limits.maxLineBytes (\(bytes) bytes): skipped unread,aaaa") == true,
            "\(rows)")
        // Every other row was read: the audience and reports are the run's without the line.
        #expect(Self.audience(output + "/generated/latest") == reference.filter { $0.key != "rejects.csv" })
    }

    @Test("a CSV record with a 20 MiB quoted field is rejected unread and the other records read")
    func longQuotedField() throws {
        let pipeline = try Self.world(format: .csv, limits: ["maxRejectedFraction: 0.5"])
        let reference = try ShardedRunTests.inMemory(pipeline)
        let file = "transactions-2025-06.csv.gz"
        try Self.insert(into: Self.folder(pipeline) + "/" + file, beforeLine: 3) { w in
            try w.write("2000000000000001,1000000000000001,\"")
            try Self.writeRepeated(UInt8(ascii: "x"), count: 20 << 20, to: w)
            try w.write("\",USA\n")
        }
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try Self.rejectRows(output + "/generated/latest/rejects.csv")
        #expect(rows.count == 1)
        #expect(rows.first?.hasPrefix("\(file),3,line longer than limits.maxLineBytes") == true, "\(rows)")
        #expect(Self.audience(output + "/generated/latest") == reference.filter { $0.key != "rejects.csv" })
    }

    // MARK: §6.1: only regular files are input

    @Test("a FIFO matched by the glob, /dev/zero and a folder given by path: run and validate exit 66 naming them")
    func specialFiles() throws {
        let pipeline = try Self.world(customers: 10)
        let dir = Self.folder(pipeline)
        let fifo = dir + "/transactions-fifo.jsonl.gz"
        #expect(mkfifo(fifo, 0o600) == 0)
        for command in ["run", "validate"] {
            let r = try Self.runWithin(20, [command, pipeline] + (command == "run" ? ["--quiet"] : []))
            Self.expectExit(r, 66, naming: fifo, "\(command) with a FIFO in the glob")
            #expect(r.stderr.contains("FIFO"))
        }
        try FileManager.default.removeItem(atPath: fifo)

        try FileManager.default.createDirectory(atPath: dir + "/a-folder", withIntermediateDirectories: true)
        let original = try String(contentsOfFile: pipeline, encoding: .utf8)
        for (path, named) in [("/dev/zero", "/dev/zero"), ("a-folder", dir + "/a-folder")] {
            try original.replacingOccurrences(
                of: "paths: [\"transactions-*.jsonl.gz\"]", with: "paths: [\"transactions-*.jsonl.gz\", \"\(path)\"]"
            ).write(toFile: pipeline, atomically: true, encoding: .utf8)
            for command in ["run", "validate"] {
                let r = try Self.runWithin(20, [command, pipeline] + (command == "run" ? ["--quiet"] : []))
                Self.expectExit(r, 66, naming: named, "\(command) with \(path) as a transaction file")
            }
        }
        // Renewal info given as a device.
        try original.replacingOccurrences(
            of: "renewalInfo: [\"renewal-info.jsonl.gz\"]", with: "renewalInfo: [\"/dev/zero\"]"
        )
        .write(toFile: pipeline, atomically: true, encoding: .utf8)
        let r = try Self.runWithin(20, ["run", pipeline, "--quiet"])
        Self.expectExit(r, 66, naming: "/dev/zero", "run with /dev/zero as renewal info")
    }

    @Test("explain and validate on a pipeline whose glob matches a FIFO exit 66 at once")
    func explainAndValidateOnAFIFO() throws {
        let pipeline = try Self.world(customers: 10)
        let fifo = Self.folder(pipeline) + "/transactions-zz.jsonl.gz"
        #expect(mkfifo(fifo, 0o600) == 0)
        let started = Date()
        let explain = try Self.runWithin(20, ["explain", pipeline, "--customer", "1000000000000001"])
        Self.expectExit(explain, 66, naming: fifo, "explain")
        let validate = try Self.runWithin(20, ["validate", pipeline])
        Self.expectExit(validate, 66, naming: fifo, "validate")
        #expect(Date().timeIntervalSince(started) < 20)
    }

    // MARK: §6.1: the output folder is not trusted

    @Test("a link planted as the lock: 73 naming it, its target untouched (and a dangling one not created)")
    func plantedLock() throws {
        let pipeline = try Self.world(customers: 10)
        let output = Paths.temporary()
        let root = output + "/generated"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let target = Paths.temporary() + "/precious.txt"
        try "precious\n".write(toFile: target, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: root + "/.lock", withDestinationPath: target)
        Self.expectFailure([73], naming: root + "/.lock", "a planted lock link") {
            _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious\n")
        #expect(!FileManager.default.fileExists(atPath: root + "/latest"))

        let nowhere = Paths.temporary() + "/not-there"
        try FileManager.default.removeItem(atPath: root + "/.lock")
        try FileManager.default.createSymbolicLink(atPath: root + "/.lock", withDestinationPath: nowhere)
        Self.expectFailure([73], naming: root + "/.lock", "a dangling lock link") {
            _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        }
        #expect(!FileManager.default.fileExists(atPath: nowhere))
    }

    @Test("the output folder itself a link: 73, its target untouched; a link at .failed-<date>: replaced, not followed")
    func plantedFolderLinks() throws {
        let pipeline = try Self.world(customers: 10, limits: ["maxRejectedFraction: 0"])
        let output = Paths.temporary()
        let root = output + "/generated"
        let target = Paths.temporary() + "/target"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        try "precious\n".write(toFile: target + "/keep.txt", atomically: true, encoding: .utf8)
        #expect(chmod(target, 0o755) == 0)
        try FileManager.default.createSymbolicLink(atPath: root, withDestinationPath: target)
        Self.expectFailure([73], naming: root, "the output folder a link") {
            _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        }
        #expect(try Self.status(target).st_mode & 0o777 == 0o755)
        #expect(try FileManager.default.contentsOfDirectory(atPath: target) == ["keep.txt"])

        // A failed run (one rejected line, no budget) keeps its rejects in .failed-<date>.
        try FileManager.default.removeItem(atPath: root)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let failed = root + "/.failed-\(Self.date)"
        try FileManager.default.createSymbolicLink(atPath: failed, withDestinationPath: target)
        let bad = Self.folder(pipeline) + "/transactions-9999-99.jsonl.gz"
        let w = try GzipWriter(path: bad)
        try w.write("{}\n")
        try w.close()
        Self.expectFailure([65], naming: "maxRejectedFraction", "one rejected line") {
            _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        }
        #expect(System.linkKind(failed) == System.folderType)
        #expect(try String(contentsOfFile: failed + "/rejects.csv", encoding: .utf8).contains("transactions-9999-99"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: target) == ["keep.txt"])
        #expect(try String(contentsOfFile: target + "/keep.txt", encoding: .utf8) == "precious\n")
    }

    @Test(
        "a folder or file where latest or the date's link belongs: 73 before any swap, the previous run as it was",
        arguments: ["latest folder", "latest file", "date folder", "date file"])
    func nonLinkWhereALinkBelongs(planted: String) throws {
        let pipeline = try Self.world(customers: 20)
        let output = Paths.temporary()
        let root = output + "/generated"
        _ = try PipelineRun.run(Self.options(pipeline, output: output, asOf: "2026-11-01"), progress: Self.quiet)
        let previous = publishedFiles(root + "/latest")
        let name = planted.hasPrefix("latest") ? "latest" : Self.date
        let path = root + "/" + name
        try? FileManager.default.removeItem(atPath: path)
        if planted.hasSuffix("folder") {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            try "mine\n".write(toFile: path + "/mine.txt", atomically: true, encoding: .utf8)
        } else {
            try "mine\n".write(toFile: path, atomically: true, encoding: .utf8)
        }
        let before = Self.state(root)

        Self.expectFailure([73], naming: path, "\(planted) planted") {
            _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        }
        let after = Self.state(root)
        #expect(after.filter { !$0.key.hasPrefix(".failed-") } == before, "\(after)")
        #expect(after["2026-11-01"]?.hasPrefix(".run-2026-11-01-") == true)
        if name == "latest" {
            #expect(after[Self.date] == nil, "the date was linked although latest could not be")
        } else {
            #expect(after["latest"] == "2026-11-01")
        }
        #expect(!after.keys.contains { $0.hasPrefix(".link-") || $0.hasPrefix(".staging-") })
        #expect(publishedFiles(root + "/2026-11-01") == previous)
        let mine = planted.hasSuffix("folder") ? path + "/mine.txt" : path
        #expect(try String(contentsOfFile: mine, encoding: .utf8) == "mine\n")
    }

    @Test("links planted under staging, link, work and failed-tmp names are removed by the next run, targets untouched")
    func plantedLeftoverLinks() throws {
        let pipeline = try Self.world(customers: 10)
        let output = Paths.temporary()
        let root = output + "/generated"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let targets = Paths.temporary()
        try "precious\n".write(toFile: targets + "/file.txt", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: targets + "/folder", withIntermediateDirectories: true)
        try "precious\n".write(toFile: targets + "/folder/keep.txt", atomically: true, encoding: .utf8)
        let pid = getpid()
        // This process's id: the names the run itself is about to use.
        let planted = [
            ".staging-\(Self.date)-\(pid)": "/folder", ".staging-2026-01-01-99999": "/file.txt",
            ".link-latest-\(pid)": "/file.txt", ".link-\(Self.date)-99999": "/folder", ".work-99999": "/folder",
            ".failed-tmp-\(pid)": "/folder", ".failed-tmp-99999": "/file.txt",
        ]
        for (name, target) in planted {
            try FileManager.default.createSymbolicLink(atPath: root + "/" + name, withDestinationPath: targets + target)
        }
        _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        let left = try FileManager.default.contentsOfDirectory(atPath: root)
        for name in planted.keys { #expect(!left.contains(name), "\(name) left") }
        #expect(try String(contentsOfFile: targets + "/file.txt", encoding: .utf8) == "precious\n")
        #expect(filesBelow(targets) == ["file.txt", "folder/keep.txt"])
        #expect(try String(contentsOfFile: targets + "/folder/keep.txt", encoding: .utf8) == "precious\n")
        #expect(FileManager.default.fileExists(atPath: root + "/latest/segments/best-offer.csv"))
    }

    // MARK: §6.1: audiences are private

    /// Runs `winback args…` under `umask 022`.
    static func runUnderUmask(_ args: [String]) throws -> CLI.Result {
        try CLI.run(args, launcher: ["/bin/sh", "-c", "umask 022; exec \"$0\" \"$@\""])
    }

    static func status(_ path: String) throws -> stat {
        var st = Glibc.stat()
        guard stat(path, &st) == 0 else { throw WinBackError(.noInput, "cannot stat", path: path) }
        return st
    }

    static func groupName(_ gid: gid_t) -> String? {
        guard let g = getgrgid(gid) else { return nil }
        return String(cString: g.pointee.gr_name)
    }

    /// Giving the folder to group root (gid 0) needs root, as the tests run here; elsewhere the
    /// test's own group stands in. As root, a second group (gid 1) shows the group is changed.
    @Test("under umask 022 the published folder is 0700; with output.group 0750 and that group; an unknown group 78")
    func privateOutput() throws {
        let pipeline = try Self.world(customers: 10)
        let output = Paths.temporary()
        let root = output + "/generated"
        // A folder there before, open to all: made private too.
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        #expect(chmod(root, 0o755) == 0)
        let r = try Self.runUnderUmask(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Self.status(root).st_mode & 0o777 == 0o700)
        for f in filesBelow(root + "/latest") {
            #expect(try Self.status(root + "/latest/" + f).st_mode & 0o007 == 0, "\(f) is open to others")
        }

        var gids: [gid_t] = [getuid() == 0 ? 0 : getegid()]
        if getuid() == 0, Self.groupName(1) != nil { gids.append(1) }
        let original = try String(contentsOfFile: pipeline, encoding: .utf8)
        func setGroup(_ group: String) throws {
            try original.replacingOccurrences(
                of: "output:\n  directory: out\n", with: "output:\n  directory: out\n  group: \(group)\n"
            ).write(toFile: pipeline, atomically: true, encoding: .utf8)
        }
        for gid in gids {
            let group = try #require(Self.groupName(gid))
            try setGroup(group)
            let g = try Self.runUnderUmask(["run", pipeline, "--quiet", "--output", output])
            #expect(g.status == 0, "group \(group): \(g.stderr)")
            let st = try Self.status(root)
            #expect(st.st_mode & 0o777 == 0o750, "group \(group)")
            #expect(st.st_gid == gid, "group \(group)")
            // The group reads the published run: its folders 0750 and files 0640, all the group's.
            let run = URL(fileURLWithPath: root + "/latest").resolvingSymlinksInPath().path
            let entries = (FileManager.default.enumerator(atPath: run)?.allObjects as? [String] ?? []) + ["."]
            #expect(entries.count > 10)
            for e in entries {
                let s = try Self.status(run + "/" + e)
                let folder = s.st_mode & S_IFMT == S_IFDIR
                #expect(s.st_mode & 0o777 == (folder ? 0o750 : 0o640), "\(e) under group \(group)")
                #expect(s.st_gid == gid, "\(e) under group \(group)")
            }
        }

        try setGroup("no-such-group-winback")
        let unknown = try Self.runUnderUmask(["run", pipeline, "--quiet", "--output", output])
        Self.expectExit(unknown, 78, naming: "no-such-group-winback", "an unknown output.group")
        #expect(unknown.stderr.contains("output.group"))
    }

    // MARK: §6.1: leftovers are cleaned

    @Test("folders killed runs and tasks left are removed: by run, by partition, by shard")
    func leftovers() throws {
        let pipeline = try Self.world(customers: 10)
        let output = Paths.temporary()
        let root = output + "/generated"
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/.work-99999", withIntermediateDirectories: true)
        try "x".write(toFile: root + "/.work-99999/x", atomically: true, encoding: .utf8)
        try fm.createDirectory(atPath: root + "/.staging-2026-01-01-99999", withIntermediateDirectories: true)
        _ = try PipelineRun.run(Self.options(pipeline, output: output), progress: Self.quiet)
        let left = try fm.contentsOfDirectory(atPath: root)
        #expect(!left.contains(".work-99999"))
        #expect(!left.contains(".staging-2026-01-01-99999"))

        let work = Paths.temporary() + "/work"
        try fm.createDirectory(atPath: work + "/parts/.tmp-task-0-99999", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: work + "/shards/.tmp-0-99999", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: work + "/shards/.tmp-1-99999", withIntermediateDirectories: true)
        let o = Self.options(pipeline, output: Paths.temporary())
        _ = try ShardedRun.partition(o, work: work, shards: 2, task: 0, tasks: 1, progress: Self.quiet)
        #expect(!fm.fileExists(atPath: work + "/parts/.tmp-task-0-99999"))
        _ = try ShardedRun.shard(o, work: work, shard: 0, shards: 2, progress: Self.quiet)
        #expect(!fm.fileExists(atPath: work + "/shards/.tmp-0-99999"))
        _ = try ShardedRun.shard(o, work: work, shard: 1, shards: 2, progress: Self.quiet)
        _ = try ShardedRun.merge(o, work: work, shards: 2, progress: Self.quiet)
        #expect(!filesBelow(work).contains { $0.contains(".tmp-") })
        #expect(try fm.contentsOfDirectory(atPath: work + "/shards").sorted() == ["0", "1"])
        #expect(try fm.contentsOfDirectory(atPath: work + "/parts") == ["task-0"])
    }
}
