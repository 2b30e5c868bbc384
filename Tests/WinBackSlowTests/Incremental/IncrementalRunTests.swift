import Foundation
import Testing
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackTestSupport
import WinBackTesting
import WinBackWrite

@testable import WinBack

/// Incremental runs (`incremental: true`): a state of the transaction files read is kept under
/// `<output>/<name>/.state`, the next run reads only the files not in it, and what it publishes
/// is, byte for byte, what a plain run over the same inputs publishes.
@Suite("Incremental runs: a state of the files read, and the files of a plain run", .serialized, .tags(.slow))
struct IncrementalRunTests {
    static let asOf = ms("2026-11-22")
    static let day: Int64 = 86_400_000
    static let name = "generated"

    // MARK: - Worlds and pipelines

    /// A generated world without the files of the months after the as-of instant: its newest
    /// transaction file is the as-of's month, whose rows change the published files.
    static func world(
        customers: Int = 400, seed: UInt64 = 3, format: InputFormat = .appstoreNDJSON
    ) throws -> String {
        let dir = Paths.temporary() + "/world"
        var o = GenerateOptions(customers: customers, seed: seed, asOf: asOf, format: format)
        o.threads = 2
        _ = try WorldGenerator.generate(o, to: dir)
        for f in transactionFiles(dir) where f >= "transactions-2026-12" {
            try FileManager.default.removeItem(atPath: dir + "/" + f)
        }
        return dir
    }

    /// The transaction files of a world, sorted.
    static func transactionFiles(_ world: String) -> [String] {
        filesBelow(world).filter { $0.hasPrefix("transactions-") && !$0.contains("/") }.sorted()
    }

    /// Writes the world's pipeline, changed by `edit`, as `plain.yaml`, and with
    /// `incremental: true` as `incremental.yaml`.
    static func pipelines(
        _ world: String, _ edit: (String) -> String = { $0 }
    ) throws -> (plain: String, incremental: String) {
        let text = edit(try String(contentsOfFile: world + "/pipeline.yaml", encoding: .utf8))
        try text.write(toFile: world + "/plain.yaml", atomically: true, encoding: .utf8)
        try (text + "\nincremental: true\n").write(
            toFile: world + "/incremental.yaml", atomically: true, encoding: .utf8)
        return (world + "/plain.yaml", world + "/incremental.yaml")
    }

    /// `<output>/<name>/.state`.
    static func stateFolder(_ output: String) -> String { output + "/\(name)/.state" }

    /// The rows files of a state (`*.part`), sorted.
    static func rowsFiles(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".part") }.sorted()
    }

    /// A state holds its ledger and its rows, nothing else.
    static func expectStateFiles(_ folder: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
        let rows = rowsFiles(folder)
        #expect(!rows.isEmpty, "\(names)", sourceLocation: sourceLocation)
        #expect(names == (rows + ["ledger.json"]).sorted(), sourceLocation: sourceLocation)
    }

    // MARK: - Nights

    /// One run's published files (the manifest aside) and its manifest.
    struct Night {
        var published: String
        var files: [String: Data]
        var manifest: [String: Any]

        var block: [String: Any] { manifest["incremental"] as? [String: Any] ?? [:] }
        var state: String? { block["state"] as? String }
        var reason: String? { block["reason"] as? String }
        var filesRead: Int? { block["filesRead"] as? Int }
        var filesFromState: Int? { block["filesFromState"] as? Int }
        var rowsInState: Int? { block["rowsInState"] as? Int }
        func counter(_ key: String) -> Int? { (manifest["counters"] as? [String: Any])?[key] as? Int }
        /// The best-offer row of customer `group,originalTransactionId`, if listed.
        func bestOffer(_ customer: String) -> String? {
            IncrementalRunTests.text(files["segments/best-offer.csv"]).split(separator: "\n")
                .first { $0.hasPrefix(customer + ",") }.map(String.init)
        }
    }

    static func text(_ data: Data?) -> String { String(decoding: data ?? Data(), as: UTF8.self) }

    static func read(published link: String) throws -> Night {
        let folder = URL(fileURLWithPath: link).resolvingSymlinksInPath().path
        var files: [String: Data] = [:]
        for f in filesBelow(folder) where f != "manifest.json" {
            files[f] = FileManager.default.contents(atPath: folder + "/" + f)
        }
        let data = try #require(FileManager.default.contents(atPath: folder + "/manifest.json"))
        let manifest = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return Night(published: folder, files: files, manifest: manifest)
    }

    /// Runs `pipeline` into `output`, in this process.
    /// `pieceRows` lowers the rows a piece of the state holds (many pieces of a small world).
    static func night(
        _ pipeline: String, output: String, threads: Int = 2, asOf: String? = nil, pieceRows: Int? = nil
    ) throws -> Night {
        var o = RunOptions(pipelinePath: pipeline, output: output, threads: threads)
        o.now = Self.asOf
        o.asOf = asOf
        if let pieceRows { o.statePieceRows = pieceRows }
        let s = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        return try read(published: s.published)
    }

    /// Runs `pipeline` into `output` through the command line, logging JSON lines to stderr.
    static func commandLineNight(_ pipeline: String, output: String) throws -> (Night, log: String) {
        let r = try CLI.run([
            "run", pipeline, "--as-of", "2026-11-22", "--output", output, "--threads", "2", "--log-format", "json",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        return (try read(published: r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), r.stderr)
    }

    /// A night of the incremental pipeline into `output`, and a plain run over the same inputs
    /// into a fresh folder: the same published files, byte for byte, and the same counts.
    @discardableResult
    static func compare(
        _ p: (plain: String, incremental: String), output: String, threads: Int = 2, asOf: String? = nil,
        rows: Bool = true, pieceRows: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (incremental: Night, plain: Night) {
        // The plain run publishes beside a copy of the runs published so far (the state aside),
        // so that both compare their changes with the same baseline (docs/rules.md §10.5).
        let plainOutput = Paths.temporary()
        if FileManager.default.fileExists(atPath: output + "/\(name)") {
            try FileManager.default.copyItem(atPath: output + "/\(name)", toPath: plainOutput + "/\(name)")
            try? FileManager.default.removeItem(atPath: plainOutput + "/\(name)/.state")
        }
        let incremental = try night(p.incremental, output: output, threads: threads, asOf: asOf, pieceRows: pieceRows)
        let plain = try night(p.plain, output: plainOutput, threads: threads, asOf: asOf)
        expectSame(incremental.files, plain.files, rows: rows, sourceLocation: sourceLocation)
        #expect(plain.manifest["incremental"] == nil, sourceLocation: sourceLocation)
        #expect(incremental.manifest["incremental"] != nil, sourceLocation: sourceLocation)
        for key in ["counters", "inputs", "eligible", "outputs"] {
            #expect(
                canonical(incremental.manifest[key]) == canonical(plain.manifest[key]),
                "manifest \(key) differs from the plain run's", sourceLocation: sourceLocation)
        }
        #expect(incremental.rowsInState == winners(plain), sourceLocation: sourceLocation)
        return (incremental, plain)
    }

    /// The rows a run kept after deduplication, of any environment: what the next state holds.
    static func winners(_ n: Night) -> Int {
        let c = ["rowsRead", "rejected", "nonSubscription", "duplicates"].map { n.counter($0) ?? 0 }
        return c[0] - c[1] - c[2] - c[3]
    }

    static func canonical(_ value: Any?) -> String {
        guard let value else { return "nil" }
        let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys])
        return text(data)
    }

    /// The same files, byte for byte; with `rows`, customers listed in the best-offer segment.
    static func expectSame(
        _ a: [String: Data], _ b: [String: Data], rows: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(a.keys.sorted() == b.keys.sorted(), sourceLocation: sourceLocation)
        #expect(a.count > 10, sourceLocation: sourceLocation)
        #expect(a.keys.contains("rejects.csv"), sourceLocation: sourceLocation)
        if rows {
            #expect(
                text(a["segments/best-offer.csv"]).split(separator: "\n").count > 10, "segment rows",
                sourceLocation: sourceLocation)
        }
        for (k, v) in a.sorted(by: { $0.key < $1.key }) where b[k] != v {
            let x = text(v).split(separator: "\n", omittingEmptySubsequences: false)
            let y = text(b[k]).split(separator: "\n", omittingEmptySubsequences: false)
            let i = (0..<min(x.count, y.count)).first { x[$0] != y[$0] } ?? min(x.count, y.count)
            let mine = i < x.count ? String(x[i].prefix(300)) : "(end)"
            let theirs = i < y.count ? String(y[i].prefix(300)) : "(end)"
            Issue.record(
                "\(k) differs from the plain run's at line \(i + 1): \(mine) vs \(theirs)",
                sourceLocation: sourceLocation)
        }
    }

    static func expect(
        _ n: Night, _ state: String, read: Int? = nil, fromState: Int? = nil, reason: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(n.state == state, "reason: \(n.reason ?? "none")", sourceLocation: sourceLocation)
        if let read { #expect(n.filesRead == read, sourceLocation: sourceLocation) }
        // The files read are listed, each one of the inputs.
        let listed = n.block["read"] as? [String] ?? []
        let inputs = Set((n.manifest["inputs"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String })
        #expect(listed.count == n.filesRead, sourceLocation: sourceLocation)
        #expect(listed.allSatisfy { inputs.contains($0) }, sourceLocation: sourceLocation)
        if let fromState { #expect(n.filesFromState == fromState, sourceLocation: sourceLocation) }
        if state == "absorbed" {
            #expect(n.reason == nil, sourceLocation: sourceLocation)
        } else {
            #expect(!(n.reason ?? "").isEmpty, sourceLocation: sourceLocation)
        }
        for word in reason {
            #expect(
                (n.reason ?? "").contains(word), "reason '\(n.reason ?? "")' names \(word)",
                sourceLocation: sourceLocation)
        }
    }

    /// A fresh world of seed `seed`, its pipelines, an output folder and the first night into
    /// it (which creates the state), compared with a plain run.
    static func firstNight(
        seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (world: String, p: (plain: String, incremental: String), output: String, first: Night) {
        let (world, p, output) = try Self.setUp(seed: seed)
        let (first, _) = try Self.compare(p, output: output, sourceLocation: sourceLocation)
        Self.expect(first, "created", sourceLocation: sourceLocation)
        return (world, p, output, first)
    }

    // MARK: - Rows of a world

    /// One transaction line of a world's file.
    struct WorldRow {
        var file: String
        var line: Int
        var object: [String: Any]

        var id: String { object["transactionId"] as? String ?? "" }
        /// `subscriptionGroupIdentifier,originalTransactionId`, as segments list customers.
        var customer: String {
            (object["subscriptionGroupIdentifier"] as? String ?? "") + ","
                + (object["originalTransactionId"] as? String ?? "")
        }
        func number(_ key: String) -> Int64? { (object[key] as? NSNumber)?.int64Value }
        /// A missing signedDate is older than any.
        var signed: Int64 { number("signedDate") ?? Int64.min }
        var expires: Int64 { number("expiresDate") ?? 0 }

        /// The row as a line, with `changes` (nil removes a field).
        func json(_ changes: [String: Any?] = [:]) -> String {
            var o = object
            for (k, v) in changes { o[k] = v }
            let data = try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys, .withoutEscapingSlashes])
            return IncrementalRunTests.text(data)
        }
    }

    /// Every transaction line of the world's transaction files, in sorted path order.
    static func rows(_ world: String) throws -> [WorldRow] {
        var out: [WorldRow] = []
        for f in transactionFiles(world) {
            let lines = text(Data(try ReadSupport.readAll(world + "/" + f))).split(
                separator: "\n", omittingEmptySubsequences: false)
            for (i, line) in lines.enumerated() {
                guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    o["transactionId"] is String
                else { continue }
                out.append(WorldRow(file: f, line: i + 1, object: o))
            }
        }
        return out
    }

    /// Each transaction's winning version, computed here: newest signedDate, then the later
    /// file, then the later line.
    static func winners(_ rows: [WorldRow]) -> [String: WorldRow] {
        var out: [String: WorldRow] = [:]
        for r in rows {
            if let w = out[r.id], w.signed > r.signed { continue }
            out[r.id] = r
        }
        return out
    }

    /// For customers of the best-offer segment of `n`, the winning version of the Production
    /// transaction, not revoked, that ends their last period (its expiresDate is their
    /// last_subscribed_end): a version of it that wins changes their row.
    /// A world, its two pipelines and an output folder for the nights.
    static func setUp(
        customers: Int = 400, seed: UInt64 = 3, format: InputFormat = .appstoreNDJSON
    ) throws -> (world: String, pipelines: (plain: String, incremental: String), output: String) {
        let world = try Self.world(customers: customers, seed: seed, format: format)
        return (world, try Self.pipelines(world), Paths.temporary())
    }

    /// The first incremental night (compared with a plain one) made without the world's newest
    /// export, which is then put back: the next night has one file to read.
    static func firstNightWithoutNewest(
        _ world: String, _ p: (plain: String, incremental: String), output: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let newest = try #require(transactionFiles(world).last, sourceLocation: sourceLocation)
        let aside = Paths.temporary() + "/" + newest
        try FileManager.default.moveItem(atPath: world + "/" + newest, toPath: aside)
        let (first, _) = try compare(p, output: output, sourceLocation: sourceLocation)
        expect(first, "created", sourceLocation: sourceLocation)
        try FileManager.default.moveItem(atPath: aside, toPath: world + "/" + newest)
    }

    /// A world of `seed`, its two pipelines, and the plain pipeline's night on it.
    static func plainNight(seed: UInt64) throws -> (
        world: String, pipelines: (plain: String, incremental: String), night: Night
    ) {
        let world = try Self.world(seed: seed)
        let p = try Self.pipelines(world)
        return (world, p, try Self.night(p.plain, output: Paths.temporary()))
    }

    static func candidates(_ world: String, _ n: Night) throws -> [WorldRow] {
        var ends: [String: String] = [:]
        for l in text(n.files["segments/best-offer.csv"]).split(separator: "\n").dropFirst() {
            let f = l.split(separator: ",", omittingEmptySubsequences: false)
            ends[f[0] + "," + f[1]] = String(f[7])
        }
        let all = try rows(world)
        let winners = winners(all)
        // Transactions of which the world holds one version only.
        let versions = Dictionary(grouping: all, by: \.id).mapValues(\.count)
        let byCustomer = Dictionary(
            grouping: winners.values.filter {
                $0.object["environment"] as? String == "Production" && $0.object["revocationDate"] == nil
                    && $0.object["type"] as? String == "Auto-Renewable Subscription" && versions[$0.id] == 1
            }, by: \.customer)
        var out: [WorldRow] = []
        for (customer, end) in ends.sorted(by: { $0.key < $1.key }) {
            let last = (byCustomer[customer] ?? []).filter { Timestamp.iso($0.expires) == end }
            if last.count == 1 { out.append(last[0]) }
        }
        return out
    }

    /// Writes `lines` gzipped (level 0: stored, so that a changed byte keeps the size).
    static func write(_ lines: [String], to path: String, level: Int32 = 6) throws {
        let bytes = ReadSupport.gzip(Array((lines.joined(separator: "\n") + "\n").utf8), level: level)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Every file of a folder, by name.
    static func snapshot(_ folder: String) -> [String: Data] {
        var out: [String: Data] = [:]
        for f in filesBelow(folder) { out[f] = FileManager.default.contents(atPath: folder + "/" + f) }
        return out
    }

    /// Flips the low bit of the byte in the middle of a file, in place.
    static func flipMiddleByte(_ path: String) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        let middle = size / 2
        try handle.seek(toOffset: middle)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: middle)
        try handle.write(contentsOf: Data([byte ^ 0x01]))
    }

    static func mode(_ path: String) throws -> Int {
        let a = try FileManager.default.attributesOfItem(atPath: path)
        return (try #require(a[.posixPermissions] as? NSNumber)).intValue & 0o777
    }

    // MARK: - Tests

    @Test("a new file is read alone, the others come from the state: the files of a plain run, for 1 and 3 threads")
    func oneNewFile() throws {
        let world = try Self.world()
        let p = try Self.pipelines(world)
        let all = Self.transactionFiles(world)
        let newest = try #require(all.last)
        #expect(newest == "transactions-2026-11.jsonl.gz")
        let aside = Paths.temporary() + "/" + newest
        for threads in [1, 3] {
            let output = Paths.temporary()
            try FileManager.default.moveItem(atPath: world + "/" + newest, toPath: aside)
            let (first, _) = try Self.compare(p, output: output, threads: threads)
            Self.expect(first, "created", read: all.count - 1, fromState: 0)
            Self.expectStateFiles(Self.stateFolder(output))
            try FileManager.default.moveItem(atPath: aside, toPath: world + "/" + newest)
            let (second, _) = try Self.compare(p, output: output, threads: threads)
            Self.expect(second, "absorbed", read: 1, fromState: all.count - 1)
            // The new file's rows change what is published.
            #expect(second.files != first.files)
            #expect((second.rowsInState ?? 0) > (first.rowsInState ?? 0))
            // Nothing new: nothing read.
            let (third, _) = try Self.compare(p, output: output, threads: threads)
            Self.expect(third, "absorbed", read: 0, fromState: all.count)
            Self.expectSame(third.files, second.files)
        }
    }

    @Test(
        "a new file sorting before the absorbed ones: a newer version of an absorbed transaction wins, an older one and one without signedDate lose"
    )
    func newFileSortingFirst() throws {
        let (world, p, output, first) = try Self.firstNight(seed: 4)
        let c = try Self.candidates(world, first)
        try #require(c.count >= 3)
        let (newer, older, unsigned) = (c[0], c[1], c[2])
        let later = "transactions-0000-late.jsonl.gz"
        #expect(later < Self.transactionFiles(world)[0])
        try Self.write(
            [
                newer.json(["signedDate": newer.signed + 60_000, "expiresDate": newer.expires + 10 * Self.day]),
                older.json(["signedDate": older.signed - 60_000, "expiresDate": older.expires + 10 * Self.day]),
                unsigned.json(["signedDate": nil, "expiresDate": unsigned.expires + 10 * Self.day]),
            ], to: world + "/" + later)
        let (second, _) = try Self.compare(p, output: output)
        Self.expect(second, "absorbed", read: 1, fromState: Self.transactionFiles(world).count - 1)
        #expect(second.bestOffer(newer.customer) != first.bestOffer(newer.customer))
        #expect(second.bestOffer(older.customer) == first.bestOffer(older.customer))
        #expect(second.bestOffer(unsigned.customer) == first.bestOffer(unsigned.customer))
        #expect(first.bestOffer(older.customer) != nil)
        #expect(second.counter("duplicates") == (first.counter("duplicates") ?? 0) + 3)
    }

    @Test(
        "equal signedDates: the version of the later file in sorted path order wins, whether that is the state's or the new one"
    )
    func equalSignedDates() throws {
        let (world, p, output, first) = try Self.firstNight(seed: 5)
        let middle = "transactions-2025-06-b.jsonl.gz"
        let c = try Self.candidates(world, first)
        let beforeMiddle = c.filter { $0.file < middle }
        let afterMiddle = c.filter { $0.file > middle }
        try #require(beforeMiddle.count >= 2)
        try #require(afterMiddle.count >= 2)
        let wins = [beforeMiddle[0], beforeMiddle[1]]  // tie against a later new file
        let loses = [afterMiddle[0], afterMiddle[1]]  // tie against an earlier new file
        func tie(_ r: WorldRow) -> String { r.json(["expiresDate": r.expires + 10 * Self.day]) }
        try Self.write([tie(wins[0])], to: world + "/transactions-9999-late.jsonl.gz")
        try Self.write([tie(loses[0])], to: world + "/transactions-0000-early.jsonl.gz")
        try Self.write([tie(wins[1]), tie(loses[1])], to: world + "/" + middle)
        let files = Self.transactionFiles(world)
        #expect(files.first == "transactions-0000-early.jsonl.gz")
        #expect(files.last == "transactions-9999-late.jsonl.gz")
        let (second, _) = try Self.compare(p, output: output)
        Self.expect(second, "absorbed", read: 3, fromState: files.count - 3)
        for r in wins {
            #expect(second.bestOffer(r.customer) != first.bestOffer(r.customer), "\(r.id) of \(r.file)")
        }
        for r in loses {
            #expect(first.bestOffer(r.customer) != nil)
            #expect(second.bestOffer(r.customer) == first.bestOffer(r.customer), "\(r.id) of \(r.file)")
        }
        // The night after: the winners are the state's now, and stay so.
        let (third, _) = try Self.compare(p, output: output)
        Self.expect(third, "absorbed", read: 0, fromState: files.count)
        Self.expectSame(third.files, second.files)
    }

    @Test("a refund arriving months later: the same transactionId, revoked, signed later")
    func lateRefund() throws {
        let (world, p, output, first) = try Self.firstNight(seed: 6)
        let c = try Self.candidates(world, first).filter { $0.file < "transactions-2026" }
        try #require(c.count >= 2)
        let refunds = c.prefix(2).map { r in
            let purchase = r.number("purchaseDate") ?? 0
            return r.json([
                "revocationDate": purchase + 5 * Self.day, "revocationReason": 0,
                "signedDate": Self.asOf - 2 * Self.day,
            ])
        }
        try Self.write(refunds, to: world + "/transactions-2026-11-refunds.jsonl.gz")
        let (second, _) = try Self.compare(p, output: output)
        Self.expect(second, "absorbed", read: 1)
        for r in c.prefix(2) {
            #expect(second.bestOffer(r.customer) != first.bestOffer(r.customer), "\(r.id)")
        }
    }

    @Test(
        "an absorbed winner of another environment is kept in the state: an older Production version read later loses"
    )
    func sandboxWinner() throws {
        let (world, p, reference) = try Self.plainNight(seed: 7)
        let c = try Self.candidates(world, reference)
        try #require(c.count >= 2)
        let g = c[0]
        // An absorbed Sandbox version, newer than the Production one.
        try Self.write(
            [g.json(["environment": "Sandbox", "signedDate": g.signed + 120_000])],
            to: world + "/transactions-5000-sandbox.jsonl.gz")
        let output = Paths.temporary()
        let (first, _) = try Self.compare(p, output: output)
        Self.expect(first, "created")
        // The transaction is not kept: its customer's last period is another one.
        #expect(first.bestOffer(g.customer) != reference.bestOffer(g.customer))
        // A Production version, newer than the first, older than the Sandbox one.
        try Self.write(
            [g.json(["signedDate": g.signed + 60_000, "expiresDate": g.expires + 20 * Self.day])],
            to: world + "/transactions-6000-production.jsonl.gz")
        let (second, plain) = try Self.compare(p, output: output)
        Self.expect(second, "absorbed", read: 1)
        #expect(second.bestOffer(g.customer) == first.bestOffer(g.customer))
        for key in ["duplicates", "sandbox", "otherEnvironment", "rowsRead"] {
            #expect(second.counter(key) == plain.counter(key), "\(key)")
        }
        #expect(second.counter("duplicates") == (first.counter("duplicates") ?? 0) + 1)
        #expect(second.counter("sandbox") == first.counter("sandbox"))
        #expect((second.counter("sandbox") ?? 0) > 0)
    }

    @Test(
        "an absorbed file edited (same size), truncated, removed or renamed rebuilds the state naming it; a touched or rewritten file with the same bytes does not"
    )
    func absorbedFilesChanged() throws {
        let (world, p, reference) = try Self.plainNight(seed: 8)
        let c = try Self.candidates(world, reference).filter { $0.file < "transactions-2026-10" }
        let edited = try #require(c.first)
        // The file to edit, stored uncompressed in its gzip: a changed digit keeps its size.
        let editedPath = world + "/" + edited.file
        let original = try ReadSupport.readAll(editedPath)
        try Data(ReadSupport.gzip(original, level: 0)).write(to: URL(fileURLWithPath: editedPath))
        let output = Paths.temporary()
        let count = Self.transactionFiles(world).count
        let (first, _) = try Self.compare(p, output: output)
        Self.expect(first, "created")

        // Edited in place: one expiresDate a day later, the same size.
        var lines = Self.text(Data(original)).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let old = String(edited.expires)
        lines[edited.line - 1] = lines[edited.line - 1].replacingOccurrences(
            of: old, with: String(edited.expires + Self.day))
        #expect(lines[edited.line - 1].contains(String(edited.expires + Self.day)))
        let before = try FileManager.default.attributesOfItem(atPath: editedPath)[.size] as? NSNumber
        let handle = try #require(FileHandle(forUpdatingAtPath: editedPath))
        try handle.write(contentsOf: Data(ReadSupport.gzip(Array(lines.joined(separator: "\n").utf8), level: 0)))
        try handle.close()
        #expect(try FileManager.default.attributesOfItem(atPath: editedPath)[.size] as? NSNumber == before)
        let (second, _) = try Self.compare(p, output: output)
        Self.expect(second, "rebuilt", read: count, fromState: 0, reason: [edited.file, "SHA-256"])
        #expect(second.bestOffer(edited.customer) != first.bestOffer(edited.customer))
        let (third, _) = try Self.compare(p, output: output)
        Self.expect(third, "absorbed", read: 0, fromState: count)

        // Truncated: its first half of lines only.
        let files = Self.transactionFiles(world).filter { $0 != edited.file }
        let truncated = files[files.count / 2]
        let kept = Self.text(Data(try ReadSupport.readAll(world + "/" + truncated))).split(separator: "\n")
        try Self.write(kept.prefix(kept.count / 2).map(String.init), to: world + "/" + truncated)
        let (fourth, _) = try Self.compare(p, output: output)
        Self.expect(fourth, "rebuilt", read: count, fromState: 0, reason: [truncated, "size"])
        #expect(fourth.files != third.files)

        // Removed.
        let removed = files[3]
        try FileManager.default.removeItem(atPath: world + "/" + removed)
        let (fifth, _) = try Self.compare(p, output: output)
        Self.expect(fifth, "rebuilt", read: count - 1, fromState: 0, reason: [removed, "gone"])
        #expect(fifth.files != fourth.files)

        // Renamed, still matching the glob.
        let renamed = files[5]
        try FileManager.default.moveItem(
            atPath: world + "/" + renamed,
            toPath: world + "/" + renamed.replacingOccurrences(of: ".jsonl.gz", with: "-renamed.jsonl.gz"))
        let (sixth, _) = try Self.compare(p, output: output)
        Self.expect(sixth, "rebuilt", read: count - 1, fromState: 0, reason: [renamed])

        // Touched: another modification time, the same bytes.
        let touched = files[7]
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: 1_000_000_000)], ofItemAtPath: world + "/" + touched)
        let (seventh, _) = try Self.compare(p, output: output)
        Self.expect(seventh, "absorbed", read: 0, fromState: count - 1)
        Self.expectSame(seventh.files, sixth.files)

        // Rewritten with the same bytes: another inode.
        let rewritten = files[9]
        let bytes = try #require(FileManager.default.contents(atPath: world + "/" + rewritten))
        try bytes.write(to: URL(fileURLWithPath: world + "/" + rewritten), options: .atomic)
        let (eighth, _) = try Self.compare(p, output: output)
        Self.expect(eighth, "absorbed", read: 0, fromState: count - 1)
    }

    @Test(
        "format, environment, consecutiveGapDays and limits rebuild the state; the catalog and the as-of instant do not"
    )
    func pipelineChanges() throws {
        let (world, base, output) = try Self.setUp(seed: 9)
        let count = Self.transactionFiles(world).count
        let (first, _) = try Self.compare(base, output: output)
        Self.expect(first, "created")
        let changes: [(edit: (String) -> String, reason: String, rows: Bool)] = [
            ({ $0 + "\nenvironment: Sandbox\n" }, "environment", false),
            ({ $0 + "\nconsecutiveGapDays: 30\n" }, "consecutiveGapDays", true),
            ({ $0 + "\nlimits:\n  maxLineBytes: 1MiB\n" }, "maxLineBytes", true),
            ({ $0 + "\nlimits:\n  maxRejectsListed: 5\n" }, "maxRejectsListed", true),
            // The same lines read as signed data: every one rejected.
            (
                {
                    $0.replacingOccurrences(of: "format: appstore-ndjson", with: "format: appstore-signed")
                        + "\napple:\n  verify: false\nlimits:\n  maxRejectedFraction: 1\n"
                }, "format", false
            ),
        ]
        var last = first
        for change in changes {
            let changed = try Self.pipelines(world, change.edit)
            let (n, _) = try Self.compare(changed, output: output, rows: change.rows)
            Self.expect(n, "rebuilt", read: count, fromState: 0, reason: [change.reason])
            // Back to the pipeline the state was not written under.
            let (back, _) = try Self.compare(try Self.pipelines(world), output: output)
            Self.expect(back, "rebuilt", read: count, fromState: 0, reason: [change.reason])
            Self.expectSame(back.files, first.files)
            if change.reason != "maxLineBytes" && change.reason != "maxRejectsListed" {
                #expect(n.files != first.files, "\(change.reason) changes the files")
            }
            last = back
        }
        let (again, _) = try Self.compare(base, output: output)
        Self.expect(again, "absorbed", read: 0, fromState: count)
        Self.expectSame(again.files, last.files)

        // Another catalog: the state is used.
        let offers = world + "/offers.json"
        let catalog = try String(contentsOfFile: offers, encoding: .utf8)
        let edited = catalog.replacingOccurrences(
            of: #""customerEligibilityPaidSubscriptionDurationInMonths": 3"#,
            with: #""customerEligibilityPaidSubscriptionDurationInMonths": 1"#)
        #expect(edited != catalog)
        try edited.write(toFile: offers, atomically: true, encoding: .utf8)
        let (catalogNight, _) = try Self.compare(base, output: output)
        Self.expect(catalogNight, "absorbed", read: 0, fromState: count)
        #expect(catalogNight.files != again.files)

        // Another as-of instant: the state is used.
        let (earlier, _) = try Self.compare(base, output: output, asOf: "2026-10-20")
        Self.expect(earlier, "absorbed", read: 0, fromState: count)
        #expect(earlier.files != catalogNight.files)
        #expect(earlier.manifest["asOf"] as? String == "2026-10-20T00:00:00.000Z")

        // An experiment: the state is used.
        let experiment = try Self.pipelines(world) {
            $0 + "\nexperiment:\n  name: spring\n  holdout: 15%\n  start: 2026-05-01\n"
        }
        let (held, _) = try Self.compare(experiment, output: output)
        Self.expect(held, "absorbed", read: 0, fromState: count)
        #expect(held.files != catalogNight.files)
        #expect(held.files.keys.contains("segments/holdout.csv"))
    }

    @Test("a run that fails after reading leaves the state as it was; the next one uses it and leaves nothing staged")
    func failedRunKeepsState() throws {
        let (world, p, output) = try Self.setUp(seed: 10)
        let root = output + "/\(Self.name)"
        try Self.firstNightWithoutNewest(world, p, output: output)
        let state = Self.snapshot(Self.stateFolder(output))
        Self.expectStateFiles(Self.stateFolder(output))

        // `latest` a regular file: publishing fails (73), once the next state is written.
        try FileManager.default.removeItem(atPath: root + "/latest")
        try Data("not a link\n".utf8).write(to: URL(fileURLWithPath: root + "/latest"))
        try expectWinBackError(exit: 73, "the run published over a regular file named latest") {
            _ = try Self.night(p.incremental, output: output)
        }
        #expect(Self.snapshot(Self.stateFolder(output)) == state)
        try FileManager.default.removeItem(atPath: root + "/latest")

        // Too many rejects (65), with a new file of a bad line.
        let strict = try Self.pipelines(world) { $0 + "\nlimits:\n  maxRejectedFraction: 0\n" }
        let bad = world + "/transactions-2026-11-bad.jsonl.gz"
        try Self.write([#"{"transactionId":"#], to: bad)
        try expectWinBackError(exit: 65, "the run passed its reject budget") {
            _ = try Self.night(strict.incremental, output: output)
        }
        #expect(Self.snapshot(Self.stateFolder(output)) == state)
        try FileManager.default.removeItem(atPath: bad)

        let (second, _) = try Self.compare(try Self.pipelines(world), output: output)
        Self.expect(second, "absorbed", read: 1, fromState: Self.transactionFiles(world).count - 1)
        let entries = try FileManager.default.contentsOfDirectory(atPath: root)
        #expect(!entries.contains { $0.hasPrefix(".staging-state-") }, "\(entries)")
        #expect(!entries.contains { $0.hasPrefix(".staging-") }, "\(entries)")
        #expect(Self.snapshot(Self.stateFolder(output)) != state)
    }

    @Test(
        "a damaged state (a flipped byte in its rows or its ledger) is rebuilt and good again; a .state link is not followed"
    )
    func damagedState() throws {
        let (world, p, output) = try Self.setUp(seed: 11)
        let folder = Self.stateFolder(output)
        let count = Self.transactionFiles(world).count
        try Self.firstNightWithoutNewest(world, p, output: output)

        // Its rows: found while the state is read, said in the log.
        let rows = try #require(Self.rowsFiles(folder).first)
        try Self.flipMiddleByte(folder + "/" + rows)
        let (damaged, log) = try Self.commandLineNight(p.incremental, output: output)
        Self.expect(damaged, "rebuilt", read: count, fromState: 0, reason: ["damaged"])
        let warnings = log.split(separator: "\n").filter {
            $0.contains(#""event":"state_rebuilt""#) && $0.contains(#""level":"warning""#)
        }
        #expect(warnings.count == 1, "\(log)")
        let plain = try Self.night(p.plain, output: Paths.temporary())
        Self.expectSame(damaged.files, plain.files)
        #expect(damaged.rowsInState == Self.winners(plain))
        for key in ["counters", "inputs", "eligible", "outputs"] {
            #expect(Self.canonical(damaged.manifest[key]) == Self.canonical(plain.manifest[key]), "\(key)")
        }
        let (good, _) = try Self.compare(p, output: output)
        Self.expect(good, "absorbed", read: 0, fromState: count)

        // ledger.json.
        try Self.flipMiddleByte(folder + "/ledger.json")
        let (ledger, _) = try Self.compare(p, output: output)
        Self.expect(ledger, "rebuilt", read: count, fromState: 0, reason: ["damaged"])
        let (goodAgain, _) = try Self.compare(p, output: output)
        Self.expect(goodAgain, "absorbed", read: 0, fromState: count)

        // A link to a good state elsewhere: not followed, the folder it names left as it was.
        let elsewhere = Paths.temporary() + "/state-copy"
        try FileManager.default.copyItem(atPath: folder, toPath: elsewhere)
        let target = Self.snapshot(elsewhere)
        #expect(target.count >= 2)
        try FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createSymbolicLink(atPath: folder, withDestinationPath: elsewhere)
        let (linked, _) = try Self.compare(p, output: output)
        Self.expect(linked, "rebuilt", read: count, fromState: 0, reason: [".state"])
        #expect(Self.snapshot(elsewhere) == target)
        let kind = try FileManager.default.attributesOfItem(atPath: folder)[.type] as? FileAttributeType
        #expect(kind == .typeDirectory)
        let (afterLink, _) = try Self.compare(p, output: output)
        Self.expect(afterLink, "absorbed", read: 0, fromState: count)
        #expect(Self.snapshot(elsewhere) == target)
    }

    @Test(
        "rejected lines of absorbed and new files: rejects.csv and the counts of a plain run, also when few are listed")
    func rejects() throws {
        let world = try Self.world(seed: 12)
        let files = Self.transactionFiles(world)
        let absorbedBad = files[files.count / 2]
        let garbage = [
            #"{"transactionId":"#, "not json at all",
            #"{"transactionId":"42","type":"Auto-Renewable Subscription"}"#,
        ]
        // Bad lines in an absorbed file: a second gzip member.
        let handle = try #require(FileHandle(forWritingAtPath: world + "/" + absorbedBad))
        handle.seekToEndOfFile()
        handle.write(Data(ReadSupport.gzip(garbage.joined(separator: "\n") + "\n")))
        handle.closeFile()
        let p = try Self.pipelines(world) { $0 + "\nlimits:\n  maxRejectedFraction: 0.5\n" }
        let output = Paths.temporary()
        let (first, _) = try Self.compare(p, output: output)
        Self.expect(first, "created")
        #expect(first.counter("rejected") == 3)

        // A new file, after the absorbed one with rejects, with good and bad lines.
        let good = try Self.rows(world).suffix(2).map { $0.json() }
        try Self.write(
            [good[0], garbage[0], good[1], garbage[2]], to: world + "/transactions-2026-11-extra.jsonl.gz")
        let (second, _) = try Self.compare(p, output: output)
        Self.expect(second, "absorbed", read: 1)
        #expect(second.counter("rejected") == 5)
        let listed = Self.text(second.files["rejects.csv"])
        #expect(listed.contains(absorbedBad))
        #expect(listed.contains("transactions-2026-11-extra.jsonl.gz"))
        #expect(listed.split(separator: "\n").count == 6)

        // Few listed: a new file sorting first takes the places of the absorbed file's rejects.
        let few = try Self.pipelines(world) {
            $0 + "\nlimits:\n  maxRejectedFraction: 0.5\n  maxRejectsListed: 3\n"
        }
        let (third, _) = try Self.compare(few, output: output)
        Self.expect(third, "rebuilt", reason: ["maxRejectsListed"])
        try Self.write([garbage[1], garbage[0]], to: world + "/transactions-0000-bad.jsonl.gz")
        let (fourth, _) = try Self.compare(few, output: output)
        Self.expect(fourth, "absorbed", read: 1)
        #expect(fourth.counter("rejected") == 7)
        let fewListed = Self.text(fourth.files["rejects.csv"])
        #expect(fewListed.contains("transactions-0000-bad.jsonl.gz"))
        #expect(fewListed != Self.text(third.files["rejects.csv"]))
    }

    @Test("signed input: one new file read alone gives the files of a plain run; other apple roots rebuild the state")
    func signedInput() throws {
        let (world, p, output) = try Self.setUp(customers: 200, seed: 13, format: .appstoreSigned)
        let all = Self.transactionFiles(world)
        let newest = try #require(all.last)
        let aside = Paths.temporary() + "/" + newest
        try FileManager.default.moveItem(atPath: world + "/" + newest, toPath: aside)
        let (first, _) = try Self.compare(p, output: output)
        Self.expect(first, "created", read: all.count - 1)
        #expect(first.counter("rejected") == 0)
        try FileManager.default.moveItem(atPath: aside, toPath: world + "/" + newest)
        let (second, _) = try Self.compare(p, output: output)
        Self.expect(second, "absorbed", read: 1, fromState: all.count - 1)
        #expect(second.files != first.files)
        #expect((second.manifest["signatures"] as? [String: Any])?["verified"] as? Bool == true)

        // Another root beside the world's.
        let other = try TestChain(from: SignedFixture.year2020, until: SignedFixture.year2040, name: "Other Root")
        try TestChain.pem(other.root).write(toFile: world + "/other-root.pem", atomically: true, encoding: .utf8)
        let roots = try Self.pipelines(world) {
            $0.replacingOccurrences(of: "roots: [test-root.pem]", with: "roots: [test-root.pem, other-root.pem]")
        }
        #expect(try String(contentsOfFile: roots.incremental, encoding: .utf8).contains("other-root.pem"))
        let (third, _) = try Self.compare(roots, output: output)
        Self.expect(third, "rebuilt", read: all.count, fromState: 0, reason: ["roots"])
        Self.expectSame(third.files, second.files)
        let (fourth, _) = try Self.compare(roots, output: output)
        Self.expect(fourth, "absorbed", read: 0, fromState: all.count)
    }

    @Test("the state is private: its folder 0700, its files 0640")
    func privateState() throws {
        let (_, p, output) = try Self.setUp(customers: 300, seed: 14)
        let folder = Self.stateFolder(output)
        for expected in ["created", "absorbed"] {
            let n = try Self.night(p.incremental, output: output)
            #expect(n.state == expected)
            Self.expectStateFiles(folder)
            #expect(try Self.mode(folder) == 0o700)
            for f in try FileManager.default.contentsOfDirectory(atPath: folder) {
                #expect(try Self.mode(folder + "/" + f) == 0o640, "\(f)")
            }
        }
    }
}
