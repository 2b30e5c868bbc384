import Foundation
import WinBackModel
import WinBackRead
import WinBackS3
import WinBackSupport
import WinBackWrite

/// The state of an incremental pipeline (docs/rules.md §12), `<output>/<name>/.state/`:
///
///     rows-<generation>-<piece>.part
///                  the winners among the rows of every absorbed transaction file, of any
///                  environment, in pieces of at most 2^18 rows (a memory-bounded run's:
///                  rows-<shard>.part), each a part file (docs/rules.md §8.1) whose sections
///                  name their file by its index in the ledger
///     ledger.json  ``StateLedger``: settings, absorbed files, their counts, rejects, the
///                  renewal info found among their transactions, and the rows files
///
/// A keeper examines the state under the run's lock before anything is read, hands the read
/// stage what it holds (``IncrementalState``), writes the next state beside it while the run
/// reads, and swaps it in once the run has published (``commit(progress:)``); a run that fails leaves
/// the state as it was.
final class StateKeeper {
    /// How a run used its state.
    enum Use: String {
        /// Its rows and counts were taken; only files not in it were read.
        case absorbed
        /// There was none: every file was read, and the first state written.
        case created
        /// It could not be used (``reason``): every file was read, and a new state written.
        case rebuilt
    }

    static let folderName = ".state"
    static let ledgerName = "ledger.json"

    let p: ResolvedPipeline
    /// `<output>/<name>` (or a shard's folder under it), where `.state` is.
    let root: String
    var folder: String { root + "/" + StateKeeper.folderName }
    private(set) var settings: StateSettings
    private(set) var use = Use.created
    private(set) var reason: String?
    /// The state found, when it can be used; and each of its files' index in the run's paths.
    private var ledger: StateLedger?
    private var pathOfLedgerFile: [Int] = []
    /// ``System/fileIdentity(_:)`` of every transaction file, taken before any is read.
    private let identities: [[Int64]?]

    /// The next state, staged in a folder of its own under the root.
    private var staged: String?
    private var writer: StateRowsWriter?
    private var rowsWritten = 0

    /// Examines the state of `p` under `root` (the run's lock held).
    ///
    /// With `keepingMoreShards` (a memory-bounded run whose shard count was estimated), a state
    /// kept in more shards than `shards` keeps its count: an earlier night partitioned again
    /// because the rows did not fit (docs/rules.md §12, rule 7).
    init(_ p: ResolvedPipeline, root: String, shards: Int? = nil, keepingMoreShards: Bool = false) {
        self.p = p
        self.root = root
        settings = StateSettings(p, shards: shards)
        identities = p.transactionFiles.map { S3Location.isURI($0) ? nil : System.fileIdentity($0) }
        keepsMoreShards = keepingMoreShards
        examine()
    }

    private let keepsMoreShards: Bool

    /// Decides whether the state can be used, and why not.
    private func examine() {
        guard let kind = System.linkKind(folder) else {
            use = .created
            reason = "no state yet"
            return
        }
        guard kind == System.folderType else {
            return rebuild("\(folder) is \(System.describe(kind)), not a state folder")
        }
        let found: StateLedger
        do {
            guard let (l, _) = try WorkFolder.readJSON(StateLedger.self, from: folder + "/" + StateKeeper.ledgerName)
            else { return rebuild("the state has no ledger") }
            found = l
        } catch let e as WinBackError {
            return rebuild("the state is damaged (\(e.message))")
        } catch {
            return rebuild("the state is damaged (\(error))")
        }
        guard found.layout == StateLedger.layout else {
            return rebuild("the state is of another layout (\(found.layout))")
        }
        if keepsMoreShards, let mine = settings.shards, let kept = found.settings.shards, kept > mine, kept <= 4096 {
            settings.shards = kept
        }
        let changes = settings.changes(from: found.settings)
        guard changes.isEmpty else { return rebuild(changes.joined(separator: "; ")) }
        // One rows file a piece; a memory-bounded run's, one a shard.
        let listed =
            settings.shards.map { found.rowsFiles.count == $0 && found.shardRows?.count == $0 }
            ?? (found.shardRows == nil)
        guard listed, Set(found.rowsFiles.map(\.path)).count == found.rowsFiles.count,
            found.rowsFiles.allSatisfy({ !$0.path.contains("/") && $0.path.hasSuffix(".part") })
        else { return rebuild("the state's ledger does not list its rows files") }
        let index = Dictionary(p.transactionFiles.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        var paths: [Int] = []
        for f in found.files {
            guard let i = index[f.path] else {
                return rebuild("\(display(f.path)) was absorbed and is gone (removed or renamed)")
            }
            if let why = changed(f, identity: identities[i]) {
                return rebuild("\(display(f.path)) \(why) since it was absorbed")
            }
            paths.append(i)
        }
        guard Set(paths).count == paths.count else { return rebuild("the state's ledger lists a file twice") }
        ledger = found
        pathOfLedgerFile = paths
        use = .absorbed
        reason = nil
    }

    /// Why absorbed file `f` is not the file read then, or nil when it is: an object's ETag and
    /// size; a local file's identity, or else its size and the SHA-256 of its bytes.
    private func changed(_ f: StateLedger.File, identity: [Int64]?) -> String? {
        if let etag = f.etag {
            guard S3Location.isURI(f.path), S3Inputs.etag(f.path) == etag, S3Inputs.size(f.path) == f.counts.stats.bytes
            else { return "changed (another ETag or size)" }
            return nil
        }
        if let identity, identity == f.identity { return nil }
        guard InputFiles.size(f.path) == f.counts.stats.bytes else { return "changed size" }
        guard let source = try? PlainFileSource(path: f.path) else { return "cannot be read" }
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        do { while try source.read(into: chunk) > 0 {} } catch { return "cannot be read" }
        return source.fileSHA256() == f.counts.stats.sha256 ? nil : "changed (another SHA-256)"
    }

    private func display(_ path: String) -> String {
        let prefix = p.config.folder.hasSuffix("/") ? p.config.folder : p.config.folder + "/"
        // A reason is printed and written: the name escaped (docs/rules.md §6.2).
        return ControlEscape.name(path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path)
    }

    /// A memory-bounded run that needs more shards than its state was kept in: the state is
    /// given up, and the next one kept in `shards`.
    func reshard(_ shards: Int) {
        let old = settings.shards ?? 1
        settings.shards = shards
        if use == .absorbed { rebuild("the rows no longer fit in \(old) shards; kept in \(shards) now") }
    }

    /// Gives the state up: the run reads every file.
    func rebuild(_ why: String) {
        use = .rebuilt
        reason = why
        ledger = nil
        pathOfLedgerFile = []
    }

    /// A fresh, empty folder for the next state.
    private func stage() throws -> String {
        discard()
        let staged = root + "/.staging-state-\(System.processID)"
        try? FileManager.default.removeItem(atPath: staged)
        do { try System.makeDirectory(staged, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create the next state's folder", path: staged)
        }
        self.staged = staged
        return staged
    }

    /// The state as the read stage takes it, and a fresh next state to capture into.
    ///
    /// The next ledger lists the absorbed files in their order, then the new ones in path
    /// order: a section names its file by that index, so that a piece of rows none of which
    /// lost, and large enough, is kept as it is (linked into the next state), not written again.
    func forRead(progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> IncrementalState {
        let staged = try stage()
        let generation = (ledger?.generation ?? 0) + 1
        let ledger = self.ledger
        let pathOf = pathOfLedgerFile
        let folder = self.folder
        let paths = p.transactionFiles
        let threads = p.threads
        // Path index → index in the next ledger.
        var order = pathOf
        let absorbedSet = Set(pathOf)
        order += paths.indices.filter { !absorbedSet.contains($0) }
        var indexOfPath = [Int](repeating: 0, count: paths.count)
        for (li, pi) in order.enumerated() { indexOfPath[pi] = li }
        let ledgerIndex = indexOfPath
        let writer = StateRowsWriter(folder: staged) { "rows-\(generation)-\($0).part" }
        self.writer = writer
        let add: (Merger, Int) throws -> Void = { merger, rowsIndex in
            guard let ledger else { return }
            // Each absorbed file in its place: its counts and renewal info, no rows; the first
            // carries the rejects of them all.
            var found = [[PartitionMarker.Renewal]](repeating: [], count: pathOf.count)
            for r in ledger.renewals {
                guard r.file >= 0, r.file < pathOf.count else {
                    throw StateDamaged(why: "its ledger names a file it does not list")
                }
                found[r.file].append(r)
            }
            for (li, f) in ledger.files.enumerated() {
                let file = AbsorbedFile(
                    counts: f.counts, rejects: li == 0 ? ledger.rejects : RejectList(limit: 0),
                    renewals: found[li].map { ($0.originalTransactionId, $0.info) })
                merger.add(file, index: pathOf[li])
            }
            // Then the rows, each with its file's place in the run's order, piece by piece on
            // several threads.
            let pieces = ledger.rowsFiles
            try parallelFor(count: pieces.count, threads: threads) { k in
                let rows = StateRows(store: merger.store)
                try StateKeeper.load(rows, from: folder + "/" + pieces[k].path, pieces[k], pathOf: pathOf)
                merger.add(rows, index: rowsIndex + k)
                progress(pieces[k].bytes)
            }
        }
        let lock = NSLock()
        nonisolated(unsafe) var renewals: [PartitionMarker.Renewal] = []
        nonisolated(unsafe) var files = [StateLedger.File?](repeating: nil, count: paths.count)
        nonisolated(unsafe) var kept: [OutputStats] = []
        let identities = self.identities
        let firstRows = paths.count
        let capture = WinnerCapture(
            pieceRows: StateKeeper.pieceRows,
            rows: { piece, file, rows, strings in writer.append(piece, ledgerIndex[file], rows, strings) },
            renewal: { file, key, info, strings in
                let r = PartitionMarker.Renewal(
                    file: ledgerIndex[file], originalTransactionId: key.string(in: strings), info: info)
                lock.withLock { renewals.append(r) }
            },
            file: { i, read in
                let path = paths[i]
                let absorbed = absorbedSet.contains(i) ? ledger?.files[ledgerIndex[i]] : nil
                let entry = StateLedger.File(
                    path: path, etag: absorbed?.etag ?? (S3Location.isURI(path) ? S3Inputs.etag(path) : nil),
                    identity: identities[i], counts: read)
                lock.withLock { files[ledgerIndex[i]] = entry }
            },
            keeps: { slot, rows in
                // A piece of the state none of whose rows lost, at least half full: linked.
                let k = slot - firstRows
                guard let ledger, k >= 0, k < ledger.rowsFiles.count, rows >= StateKeeper.pieceRows / 2 else {
                    return false
                }
                let piece = ledger.rowsFiles[k]
                do {
                    try System.link(folder + "/" + piece.path, staged + "/" + piece.path)
                } catch {
                    return false
                }
                lock.withLock { kept.append(piece) }
                return true
            })
        collected = {
            lock.withLock { (renewals, files, kept) }
        }
        return IncrementalState(
            absorbed: absorbedSet, slots: max(1, ledger?.rowsFiles.count ?? 0), add: add, capture: capture)
    }

    /// Rows a piece of the state holds at most (about 11 MB): pieces are written and read on
    /// several threads. Tests lower it, to have many pieces of a small world.
    nonisolated(unsafe) static var pieceRows = 1 << 18

    /// What the capture gathered besides rows: renewal info, each file's ledger entry (by its
    /// index in the next ledger) and the pieces kept as they were.
    private var collected: (() -> ([PartitionMarker.Renewal], [StateLedger.File?], [OutputStats]))?

    /// Reads a rows file of the state into `rows` (of the state: merged after the files read
    /// now), each row's rank the index in the run's paths of the file it came from. Anything
    /// wrong with it (size, SHA-256, a section, a count) is ``StateDamaged``.
    static func load(_ rows: StateRows, from path: String, _ expected: OutputStats, pathOf: [Int]) throws {
        var ranks: [UInt32] = []
        ranks.reserveCapacity(min(expected.rows, expected.bytes / 2))
        do {
            let reader = try PartReader(path: path, bytes: expected.bytes, sha256: expected.sha256)
            while let li = try reader.next(into: rows) {
                guard li < pathOf.count else {
                    throw StateDamaged(why: "a section names a file the ledger does not list")
                }
                let rank = UInt32(pathOf[li])
                for _ in ranks.count..<rows.rows.count { ranks.append(rank) }
            }
        } catch let e as WinBackError {
            throw StateDamaged(why: "\((path as NSString).lastPathComponent): \(e.message)")
        }
        guard ranks.count == expected.rows else {
            throw StateDamaged(why: "it holds \(ranks.count) rows where its ledger says \(expected.rows)")
        }
        rows.ranks = ranks
    }

    /// Bytes of the state's rows files the run reads (0 when it reads every file).
    var stateBytes: Int { ledger?.rowsFiles.reduce(0) { $0 + $1.bytes } ?? 0 }

    /// Files the run took from the state, and files it read.
    var filesFromState: Int { pathOfLedgerFile.count }
    var filesRead: Int { p.transactionFiles.count - pathOfLedgerFile.count }
    /// Rows in the next state.
    var rowsInState: Int { rowsWritten }

    /// Completes the next state once the read stage is over: its rows files closed, its ledger
    /// written. The rejects are the transaction files' (all of them, as rejects.csv lists them).
    func finish(_ set: TransactionSet) throws {
        guard let staged, let writer, let collected else { return }
        let (renewals, entries, kept) = collected()
        let pieces = kept + (try writer.finish())
        rowsWritten = pieces.reduce(0) { $0 + $1.rows }
        let files = entries.compactMap { $0 }
        guard files.count == p.transactionFiles.count else {
            throw WinBackError(.software, "the next state misses a file's counts", path: staged)
        }
        let ledger = StateLedger(
            layout: StateLedger.layout, generation: (self.ledger?.generation ?? 0) + 1, settings: settings,
            files: files, rowsFiles: pieces, shardRows: nil, rejects: set.rejects, renewals: renewals)
        try WorkFolder.writeJSON(ledger, to: staged + "/" + StateKeeper.ledgerName)
        self.writer = nil
        self.collected = nil
    }

    // MARK: Memory-bounded runs: the rows kept per shard

    /// The ledger's renewal info with `file` the index in the run's paths.
    private var absorbedRenewals: [PartitionMarker.Renewal] {
        (ledger?.renewals ?? []).compactMap { r in
            guard r.file >= 0, r.file < pathOfLedgerFile.count else { return nil }
            var r = r
            r.file = pathOfLedgerFile[r.file]
            return r
        }
    }

    /// Begins the next state of a memory-bounded run; returns the indices of the files the
    /// state absorbed, which are not partitioned.
    func beginShards() throws -> Set<Int> {
        _ = try stage()
        shardFiles = Array(repeating: nil, count: settings.shards ?? 1)
        return Set(pathOfLedgerFile)
    }

    private var shardFiles: [OutputStats?] = []

    /// What shard `k` takes from the state, and where it writes its rows of the next one.
    func shard(_ k: Int) -> ShardState {
        ShardState(
            rows: ledger.map { (folder + "/" + $0.rowsFiles[k].path, $0.rowsFiles[k]) },
            pathOfLedgerFile: pathOfLedgerFile, absorbedRows: ledger?.shardRows?[k] ?? 0,
            renewals: absorbedRenewals, next: (staged ?? root) + "/rows-\(k).part")
    }

    /// Records the rows file shard `k` wrote for the next state.
    func shard(_ k: Int, wrote stats: OutputStats) { shardFiles[k] = stats }

    /// The absorbed files as a partition task's marker lists its inputs (`file` the index in
    /// the run's paths), and their rejects: a merge counts them with the files read now.
    var absorbedInputs: [PartitionMarker.Input] {
        guard let ledger else { return [] }
        return zip(ledger.files, pathOfLedgerFile).map {
            PartitionMarker.Input(file: $1, counts: $0.counts)
        }
    }
    var absorbedRejects: RejectList? { ledger?.rejects }

    /// Completes the next state of a memory-bounded run once its one partition task and every
    /// shard are done: the files read now as `marker` lists them, with the partition's
    /// rejects and renewal info.
    func finishShards(
        _ marker: PartitionMarker, rejects: RejectList, renewals found: [PartitionMarker.Renewal]
    ) throws {
        guard let staged else { return }
        let written = shardFiles.compactMap { $0 }
        guard written.count == shardFiles.count, marker.parts.count == shardFiles.count else {
            throw WinBackError(.software, "a shard wrote no rows for the next state", path: staged)
        }
        rowsWritten = written.reduce(0) { $0 + $1.rows }
        var files = [StateLedger.File?](repeating: nil, count: p.transactionFiles.count)
        let ledgerIndex = Dictionary(pathOfLedgerFile.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        for input in absorbedInputs + marker.inputs where input.file < files.count {
            let path = p.transactionFiles[input.file]
            let old = ledger.flatMap { l in ledgerIndex[input.file].map { l.files[$0] } }
            files[input.file] = StateLedger.File(
                path: path, etag: old?.etag ?? (S3Location.isURI(path) ? S3Inputs.etag(path) : nil),
                identity: identities[input.file], counts: input.counts)
        }
        let listed = files.compactMap { $0 }
        guard listed.count == files.count else {
            throw WinBackError(.software, "the next state misses a file's counts", path: staged)
        }
        var all = rejects
        if let old = ledger?.rejects { all.merge(old) }
        all.normalize()
        let shardRows = marker.parts.map { part in (ledger?.shardRows?[part.shard] ?? 0) + part.rows }
        let renewals = (absorbedRenewals + found).enumerated().sorted {
            ($0.element.file, $0.offset) < ($1.element.file, $1.offset)
        }.map(\.element)
        let next = StateLedger(
            layout: StateLedger.layout, generation: (ledger?.generation ?? 0) + 1, settings: settings, files: listed,
            rowsFiles: written, shardRows: shardRows, rejects: all, renewals: renewals)
        try WorkFolder.writeJSON(next, to: staged + "/" + StateKeeper.ledgerName)
        System.syncDirectory(staged)
    }

    /// Replaces the state by the next one (after the run published, under its lock): swapped
    /// in one step where the file system can, so that no moment leaves no state. A failure
    /// leaves the previous state, which the next run can still use; it is reported, not thrown.
    func commit(progress: Progress) {
        guard let staged, writer == nil, System.kind(staged + "/" + StateKeeper.ledgerName) == .file else {
            return discard()
        }
        do {
            switch System.linkKind(folder) {
            case nil:
                try System.rename(staged, folder)
            case System.folderType?:
                do { try System.exchange(staged, folder) } catch {
                    let old = root + "/.staging-state-old-\(System.processID)"
                    try System.rename(folder, old)
                    try System.rename(staged, folder)
                    try? FileManager.default.removeItem(atPath: old)
                }
            default:
                System.unlinkIfPresent(folder)
                try System.rename(staged, folder)
            }
            System.syncDirectory(root)
        } catch {
            progress.warn(
                "state",
                "the next incremental state could not replace the previous one (\(error)); "
                    + "the previous one is kept", fields: ["path": folder])
        }
        discard()
    }

    /// Removes the staged next state, if any (a failed run; or once swapped, the previous one).
    func discard() {
        if let staged { try? FileManager.default.removeItem(atPath: staged) }
        staged = nil
        writer = nil
        collected = nil
    }

    /// What the manifest records (docs/rules.md §4.4, §12).
    var summary: IncrementalSummary {
        let absorbed = Set(pathOfLedgerFile)
        return IncrementalSummary(
            state: use.rawValue, reason: reason, filesRead: filesRead, filesFromState: filesFromState,
            rowsInState: rowsInState,
            read: p.transactionFiles.indices.filter { !absorbed.contains($0) }.map { p.transactionFiles[$0] })
    }

    /// What the next run in memory would do with the state, for `winback validate` (which takes
    /// no lock and writes nothing).
    var preview: String {
        switch use {
        case .absorbed:
            return "incremental: the next run takes \(filesFromState) files from the state and reads \(filesRead)"
        case .created, .rebuilt:
            return "incremental: the next run reads every file (\(reason ?? ""))"
        }
    }

    /// One line for the log.
    var line: String {
        switch use {
        case .absorbed:
            return "incremental: \(filesFromState) files from the state, \(filesRead) read; "
                + "\(rowsInState) rows in the next state"
        case .created:
            return "incremental: no state yet; every file read, \(rowsInState) rows in the first state"
        case .rebuilt:
            return "incremental: every file read, \(rowsInState) rows in the new state; state rebuilt: \(reason ?? "")"
        }
    }
}

/// The rows files of the next state, one a piece, written from several threads at once (one
/// thread a piece at a time), unsynced: a state cut short by a crash fails its checks and is
/// rebuilt (docs/rules.md §12).
final class StateRowsWriter: @unchecked Sendable {
    private let folder: String
    private let name: @Sendable (Int) -> String
    private let lock = NSLock()
    /// Each piece's file and the strings written to it so far.
    private var pieces: [Int: (writer: PartWriter, strings: Int)] = [:]
    private var failure: Error?

    init(folder: String, name: @escaping @Sendable (Int) -> String) {
        self.folder = folder
        self.name = name
    }

    /// Appends rows of `file` to piece `piece` (its strings first, those it lacks).
    @Sendable func append(_ piece: Int, _ file: Int, _ rows: UnsafeBufferPointer<Transaction>, _ strings: StringTable) {
        let got: (writer: PartWriter, strings: Int)? = lock.withLock {
            if failure != nil { return nil }
            if let w = pieces[piece] { return w }
            do {
                let w = (try PartWriter(path: folder + "/" + name(piece)), 0)
                pieces[piece] = w
                return w
            } catch {
                failure = error
                return nil
            }
        }
        guard let (writer, from) = got else { return }
        do {
            try writer.append(file: file, table: strings, from: from, rows: rows)
            lock.withLock { pieces[piece]?.strings = strings.count }
        } catch {
            lock.withLock { failure = failure ?? error }
        }
    }

    /// Closes every piece; returns their names, sizes, rows and SHA-256, by piece.
    /// With `atLeastOne`, a writer that was handed no rows writes piece 0, empty.
    func finish(atLeastOne: Bool = false) throws -> [OutputStats] {
        if let failure { throw failure }
        if atLeastOne && pieces.isEmpty { pieces[0] = (try PartWriter(path: folder + "/" + name(0)), 0) }
        var out: [OutputStats] = []
        for (k, (writer, _)) in pieces.sorted(by: { $0.key < $1.key }) {
            try writer.close(sync: false)
            out.append(
                OutputStats(path: name(k), bytes: writer.compressedBytes, rows: writer.rows, sha256: writer.sha256))
        }
        return out
    }
}

/// What one shard of a memory-bounded run takes from the state (docs/rules.md §12).
struct ShardState {
    /// The shard's rows file in the state and what the ledger says of it; nil when none.
    var rows: (path: String, stats: OutputStats)?
    /// Each ledger file's index in the run's paths.
    var pathOfLedgerFile: [Int]
    /// Rows the absorbed files gave this shard, before deduplication.
    var absorbedRows: Int
    /// Renewal info found among the absorbed files' transactions, `file` the index in the run's paths.
    var renewals: [PartitionMarker.Renewal]
    /// Where the shard writes its rows of the next state.
    var next: String
}

/// The state's rows could not be trusted while they were read: the run reads every file.
struct StateDamaged: Error {
    var why: String
}

/// The manifest's `incremental` block (docs/rules.md §12).
public struct IncrementalSummary: Sendable, Equatable {
    /// absorbed, created or rebuilt.
    public var state: String
    public var reason: String?
    public var filesRead: Int
    public var filesFromState: Int
    public var rowsInState: Int
    /// The transaction files read (the others were taken from the state), as `inputs` names them.
    public var read: [String]
}
