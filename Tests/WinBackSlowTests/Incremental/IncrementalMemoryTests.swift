import Foundation
import Testing
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackTestSupport
import WinBackTesting
import WinBackWrite

@testable import WinBack

/// Incremental memory-bounded runs (docs/rules.md §12, rule 7): the state is kept per shard,
/// and what they publish is what a plain run in memory publishes.
@Suite("Incremental runs under a memory limit: the state per shard", .serialized, .tags(.slow))
struct IncrementalMemoryTests {
    typealias T = IncrementalRunTests

    /// A memory-bounded night of `pipeline` into `output` with `shards` shards.
    static func boundedNight(
        _ pipeline: String, output: String, shards: Int, threads: Int = 2
    ) throws -> T.Night {
        var o = RunOptions(pipelinePath: pipeline, output: output, threads: threads)
        o.now = T.asOf
        let s = try ShardedRun.bounded(o, memory: 64 << 20, progress: Progress(mode: .quiet), shards: shards)
        return try T.read(published: s.published)
    }

    /// A world whose newest month is held back, its pipelines, and the held-back files.
    static func world() throws -> (dir: String, p: (plain: String, incremental: String), held: [String]) {
        let dir = try T.world(customers: 500, seed: 11)
        let p = try T.pipelines(dir)
        let files = T.transactionFiles(dir)
        let held = Array(files.suffix(1))
        for f in held { try FileManager.default.moveItem(atPath: dir + "/" + f, toPath: dir + "/held-" + f) }
        return (dir, p, held)
    }

    static func restore(_ dir: String, _ held: [String]) throws {
        for f in held { try FileManager.default.moveItem(atPath: dir + "/held-" + f, toPath: dir + "/" + f) }
    }

    @Test(
        "3 shards: the first night keeps a rows file a shard, the next reads one file; both equal a plain run in memory"
    )
    func shardsKeepTheirRows() throws {
        let (dir, p, held) = try Self.world()
        let output = Paths.temporary()
        let first = try Self.boundedNight(p.incremental, output: output, shards: 3)
        T.expect(first, "created")
        let plainBefore = try T.night(p.plain, output: Paths.temporary())
        T.expectSame(first.files, plainBefore.files)
        let state = T.stateFolder(output)
        #expect(T.rowsFiles(state) == ["rows-0.part", "rows-1.part", "rows-2.part"])
        try Self.restore(dir, held)
        for threads in [1, 3] {
            let before = try Data(contentsOf: URL(fileURLWithPath: state + "/ledger.json"))
            let night = try Self.boundedNight(p.incremental, output: output, shards: 3, threads: threads)
            T.expect(night, "absorbed", read: threads == 1 ? 1 : 0)
            let plain = try T.night(p.plain, output: Paths.temporary(), threads: threads)
            T.expectSame(night.files, plain.files)
            for key in ["counters", "inputs"] {
                #expect(T.canonical(night.manifest[key]) == T.canonical(plain.manifest[key]), "\(key)")
            }
            #expect(night.rowsInState == T.winners(plain))
            // The night's file changed the published files: it was read, not ignored.
            #expect(night.files != first.files)
            if threads == 1 { #expect(try Data(contentsOf: URL(fileURLWithPath: state + "/ledger.json")) != before) }
        }
    }

    @Test(
        "rows that compress far better than exports: the run partitions again, keeps the state in the shards it needed, and the next night uses it"
    )
    func repartitionedStateKept() throws {
        let (dir, p, held) = try Self.world()
        // 60,000 customers of one row each, alike but for their ids.
        let model = try #require(
            try T.rows(dir).first {
                $0.object["environment"] as? String == "Production" && $0.object["offerType"] == nil
                    && $0.object["revocationDate"] == nil
            })
        let template = model.json(["transactionId": "ID", "originalTransactionId": "ID"])
        #expect(template.components(separatedBy: "\"ID\"").count == 3)
        let lines = (0..<60_000).map {
            template.replacingOccurrences(of: "\"ID\"", with: "\"\(3_000_000_000_000_000 + $0)\"")
        }
        try T.write(lines, to: dir + "/transactions-1999-bulk.jsonl.gz", level: 9)
        let output = Paths.temporary()
        func night() throws -> T.Night {
            var o = RunOptions(pipelinePath: p.incremental, output: output, threads: 2)
            o.now = T.asOf
            return try T.read(
                published: ShardedRun.bounded(o, memory: 32_000_000, progress: Progress(mode: .quiet)).published)
        }
        let first = try night()
        T.expect(first, "created")
        let shards = try #require((first.manifest["memory"] as? [String: Any])?["shards"] as? Int)
        #expect(shards >= 2)
        #expect(T.rowsFiles(T.stateFolder(output)).count == shards)
        let plainBefore = try T.night(p.plain, output: Paths.temporary())
        T.expectSame(first.files, plainBefore.files)

        try Self.restore(dir, held)
        let second = try night()
        T.expect(second, "absorbed", read: 1)
        #expect((second.manifest["memory"] as? [String: Any])?["shards"] as? Int == shards)
        let plain = try T.night(p.plain, output: Paths.temporary())
        T.expectSame(second.files, plain.files)
        #expect(second.files != first.files)
    }

    @Test("another shard count, a damaged shard's rows file: the state is rebuilt, and the files equal a plain run")
    func rebuiltPerShard() throws {
        let (dir, p, held) = try Self.world()
        let output = Paths.temporary()
        _ = try Self.boundedNight(p.incremental, output: output, shards: 3)
        try Self.restore(dir, held)
        let plain = try T.night(p.plain, output: Paths.temporary())

        let four = try Self.boundedNight(p.incremental, output: output, shards: 4)
        T.expect(four, "rebuilt", reason: ["kept in 3 shards", "uses 4"])
        T.expectSame(four.files, plain.files)
        #expect(T.rowsFiles(T.stateFolder(output)).count == 4)

        // A flipped byte in the middle of shard 2's rows.
        let path = T.stateFolder(output) + "/rows-2.part"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.count > 100)
        bytes[bytes.count / 2] ^= 0x20
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let damaged = try Self.boundedNight(p.incremental, output: output, shards: 4)
        T.expect(damaged, "rebuilt", reason: ["damaged"])
        T.expectSame(damaged.files, plain.files)

        // Rebuilt, the state is good again.
        let again = try Self.boundedNight(p.incremental, output: output, shards: 4)
        T.expect(again, "absorbed", read: 0)
        T.expectSame(again.files, plain.files)
    }

    @Test("a state kept in memory is not a memory-bounded run's: switching rebuilds, the files stay a plain run's")
    func inMemoryAndBoundedDoNotShare() throws {
        let (dir, p, held) = try Self.world()
        let output = Paths.temporary()
        _ = try T.night(p.incremental, output: output)
        try Self.restore(dir, held)
        let bounded = try Self.boundedNight(p.incremental, output: output, shards: 2)
        T.expect(bounded, "rebuilt", reason: ["a run in memory kept the state", "memory-bounded (2 shards)"])
        let plain = try T.night(p.plain, output: Paths.temporary())
        T.expectSame(bounded.files, plain.files)
        let back = try T.night(p.incremental, output: output)
        T.expect(back, "rebuilt", reason: ["memory-bounded run kept the state in 2 shards", "this run is in memory"])
        T.expectSame(back.files, plain.files)
    }
}

/// The pieces of a state (docs/rules.md §12): a piece none of whose rows lost is kept as it is,
/// one with a row that lost is written again, and either way the files are a plain run's.
@Suite("Incremental runs: the state's pieces kept or written again", .serialized, .tags(.slow))
struct IncrementalPieceTests {
    typealias T = IncrementalRunTests

    static func ledger(_ output: String) throws -> [String: Any] {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: T.stateFolder(output) + "/ledger.json"))
        // The checksum line follows the JSON.
        let body = bytes.prefix(bytes.count - ("sha256 ".count + 64 + 1))
        return try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
    }

    static func pieces(_ output: String) throws -> [String] {
        try (ledger(output)["rowsFiles"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
    }

    @Test(
        "small pieces: untouched ones are linked into the next state, the one holding a version that lost is written again; ties and newer versions as a plain run"
    )
    func piecesKeptOrWritten() throws {
        let pieceRows = 400
        let world = try T.world(customers: 400, seed: 6)
        let p = try T.pipelines(world)
        let newest = try #require(T.transactionFiles(world).last)
        try FileManager.default.moveItem(atPath: world + "/" + newest, toPath: world + "/held")
        let output = Paths.temporary()
        let (first, _) = try T.compare(p, output: output, pieceRows: pieceRows)
        T.expect(first, "created")
        let generation1 = try Self.pieces(output)
        #expect(generation1.count >= 6, "\(generation1)")
        #expect(generation1.allSatisfy { $0.hasPrefix("rows-1-") })

        // The night's file: only new rows, so every full piece is kept.
        try FileManager.default.moveItem(atPath: world + "/held", toPath: world + "/" + newest)
        let (second, _) = try T.compare(p, output: output, pieceRows: pieceRows)
        T.expect(second, "absorbed", read: 1)
        let generation2 = try Self.pieces(output)
        let kept = generation2.filter { $0.hasPrefix("rows-1-") }
        #expect(kept.count >= generation1.count - 2, "\(generation2)")
        #expect(generation2.contains { $0.hasPrefix("rows-2-") })
        #expect(second.files != first.files)

        // A newer version of an absorbed transaction and an equal-signedDate one, in a file that
        // sorts before every other: the first wins, the second loses; their pieces are written
        // again, the others kept.
        let c = try T.candidates(world, second)
        try #require(c.count >= 2)
        let (newer, tie) = (c[0], c[1])
        try T.write(
            [
                newer.json(["signedDate": newer.signed + 60_000, "expiresDate": newer.expires + 10 * T.day]),
                tie.json(["expiresDate": tie.expires + 10 * T.day]),
            ], to: world + "/transactions-0000-late.jsonl.gz")
        let (third, _) = try T.compare(p, output: output, pieceRows: pieceRows)
        T.expect(third, "absorbed", read: 1)
        #expect(third.bestOffer(newer.customer) != second.bestOffer(newer.customer))
        #expect(third.bestOffer(tie.customer) == second.bestOffer(tie.customer))
        let generation3 = try Self.pieces(output)
        #expect(generation3.contains { $0.hasPrefix("rows-3-") })
        #expect(generation3.filter { !$0.hasPrefix("rows-3-") }.count >= generation2.count - 4, "\(generation3)")
        #expect(Set(generation3).count == generation3.count)
        // Every piece the ledger lists is in the state, and nothing else is.
        T.expectStateFiles(T.stateFolder(output))
        #expect(T.rowsFiles(T.stateFolder(output)) == generation3.sorted())

        // And the night after, everything from the state.
        let (fourth, _) = try T.compare(p, output: output, pieceRows: pieceRows)
        T.expect(fourth, "absorbed", read: 0)
        T.expectSame(fourth.files, third.files)
    }
}

/// `winback validate` says what the next incremental run would do with its state, and changes
/// nothing (docs/rules.md §12).
@Suite("Incremental runs: validate previews the state", .serialized, .tags(.slow))
struct IncrementalValidateTests {
    typealias T = IncrementalRunTests

    @Test("validate: no state yet, then the files the state holds, then why it would be rebuilt; the state untouched")
    func preview() throws {
        let world = try T.world(customers: 200, seed: 12)
        let output = Paths.temporary()
        let p = try T.pipelines(world) { $0.replacingOccurrences(of: "directory: out", with: "directory: \(output)") }
        #expect(try String(contentsOfFile: p.incremental, encoding: .utf8).contains("directory: \(output)"))
        let files = T.transactionFiles(world).count
        #expect(
            PipelineValidation.check(pipelinePath: p.incremental).summary.hasSuffix(
                "incremental: the next run reads every file (no state yet)"))
        _ = try T.night(p.incremental, output: output)
        let state = T.stateFolder(output)
        let ledger = try Data(contentsOf: URL(fileURLWithPath: state + "/ledger.json"))
        #expect(
            PipelineValidation.check(pipelinePath: p.incremental).summary.hasSuffix(
                "incremental: the next run takes \(files) files from the state and reads 0"))
        try T.write(["{}"], to: world + "/transactions-9999-new.jsonl.gz")
        #expect(
            PipelineValidation.check(pipelinePath: p.incremental).summary.hasSuffix(
                "incremental: the next run takes \(files) files from the state and reads 1"))
        try FileManager.default.removeItem(atPath: world + "/" + T.transactionFiles(world)[0])
        let gone = PipelineValidation.check(pipelinePath: p.incremental).summary
        #expect(gone.contains("incremental: the next run reads every file ("), "\(gone)")
        #expect(gone.contains("is gone"), "\(gone)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: state + "/ledger.json")) == ledger)
        #expect(PipelineValidation.check(pipelinePath: p.plain).summary.contains("incremental") == false)
    }
}

/// What a killed incremental run leaves (docs/rules.md §12, rule 6).
@Suite("Incremental runs: what a killed run leaves", .serialized, .tags(.slow))
struct IncrementalKilledRunTests {
    typealias T = IncrementalRunTests

    /// Every file of a folder, by name.
    static func contents(_ folder: String) -> [String: Data] {
        var out: [String: Data] = [:]
        for f in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
            out[f] = FileManager.default.contents(atPath: folder + "/" + f)
        }
        return out
    }

    @Test(
        "a run killed (SIGKILL) while it reads and stages its next state leaves the state as it was; the next run uses it"
    )
    func killedWhileReading() throws {
        let world = try T.world(customers: 2_000, seed: 14)
        let p = try T.pipelines(world)
        let output = Paths.temporary()
        let root = output + "/\(T.name)"
        T.expect(try T.night(p.incremental, output: output), "created")
        let before = Self.contents(T.stateFolder(output))
        #expect(before.count >= 2)
        // Another consecutiveGapDays: the night reads every file again and stages a new state.
        let text = try String(contentsOfFile: p.incremental, encoding: .utf8)
        let other = world + "/other-gap.yaml"
        try (text + "consecutiveGapDays: 45\n").write(toFile: other, atomically: true, encoding: .utf8)
        let run = try CLI.start(["run", other, "--as-of", "2026-11-22", "--output", output, "--threads", "1"])
        var staged = false
        for _ in 0..<20_000 where !staged {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
            staged = entries.contains { $0.hasPrefix(".staging-state-") }
            if !staged { usleep(500) }
        }
        kill(run.process.processIdentifier, SIGKILL)
        run.process.waitUntilExit()
        #expect(staged)
        #expect(run.process.terminationReason == .uncaughtSignal, "the run ended before it was killed")
        #expect(Self.contents(T.stateFolder(output)) == before)
        #expect(
            ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).contains {
                $0.hasPrefix(".staging-state-")
            })

        let (next, _) = try T.compare(p, output: output)
        T.expect(next, "absorbed", read: 0)
        #expect(
            !((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).contains { $0.hasPrefix(".staging-") }
        )
    }

    @Test(
        "a killed run's half-written next state is ignored and removed under the lock; the state it did not replace is used"
    )
    func halfWrittenNextStateIgnored() throws {
        let (world, p, output, first) = try T.firstNight(seed: 13)
        let root = output + "/\(T.name)"
        let (ledger, _) = try #require(
            try IntermediateFile.readJSON(StateLedger.self, from: T.stateFolder(output) + "/ledger.json"))
        // A killed run leaves its next state staged beside the state: rows written, no ledger;
        // or, killed while swapping without an exchange, the previous state moved aside.
        let fm = FileManager.default
        for leftover in [".staging-state-424242", ".staging-state-old-424242"] {
            try fm.createDirectory(atPath: root + "/" + leftover, withIntermediateDirectories: false)
            try Data("not a state".utf8).write(to: URL(fileURLWithPath: root + "/\(leftover)/rows-9-0.part"))
        }
        try Data("{}\n".utf8).write(to: URL(fileURLWithPath: root + "/.staging-state-424242/ledger.json"))
        let (second, _) = try T.compare(p, output: output)
        T.expect(second, "absorbed", read: 0, fromState: T.transactionFiles(world).count)
        T.expectSame(second.files, first.files)
        let entries = try fm.contentsOfDirectory(atPath: root)
        #expect(!entries.contains { $0.hasPrefix(".staging-") }, "\(entries)")
        // The state was used and replaced by an equal one: same settings, files, counts,
        // rejects and renewal info, the same rows in its rows files, one generation on.
        let (next, _) = try #require(
            try IntermediateFile.readJSON(StateLedger.self, from: T.stateFolder(output) + "/ledger.json"))
        #expect(next.generation == ledger.generation + 1)
        #expect(next.settings == ledger.settings)
        #expect(next.files == ledger.files)
        #expect(next.rejects == ledger.rejects)
        #expect(next.shardRows == ledger.shardRows)
        #expect(next.rowsFiles.reduce(0) { $0 + $1.rows } == ledger.rowsFiles.reduce(0) { $0 + $1.rows })
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(try encoder.encode(next.renewals) == encoder.encode(ledger.renewals))
        T.expectStateFiles(T.stateFolder(output))
    }
}
