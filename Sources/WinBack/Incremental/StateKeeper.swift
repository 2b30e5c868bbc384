import Foundation
import WinBackModel
import WinBackRead
import WinBackS3
import WinBackSupport
import WinBackWrite

/// The state of an incremental pipeline (docs/rules.md §12), `<output>/<name>/.state/`:
///
///     rows.part    the winners among the rows of every absorbed transaction file, of any
///                  environment, as a part file (docs/rules.md §8.1) whose sections name their
///                  file by its index in the ledger
///     ledger.json  ``StateLedger``: settings, absorbed files, their counts, rejects and the
///                  renewal info found among their transactions
///
/// A keeper examines the state under the run's lock before anything is read, hands the read
/// stage what it holds (``IncrementalState``), writes the next state beside it while the run
/// reads, and swaps it in once the run has published (``commit()``); a run that fails leaves
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
    static let rowsName = "rows.part"
    static let ledgerName = "ledger.json"

    let p: ResolvedPipeline
    /// `<output>/<name>` (or a shard's folder under it), where `.state` is.
    let root: String
    var folder: String { root + "/" + StateKeeper.folderName }
    let settings: StateSettings
    private(set) var use = Use.created
    private(set) var reason: String?
    /// The state found, when it can be used; and each of its files' index in the run's paths.
    private var ledger: StateLedger?
    private var pathOfLedgerFile: [Int] = []
    /// ``System/fileIdentity(_:)`` of every transaction file, taken before any is read.
    private let identities: [[Int64]?]

    /// The next state, staged in a folder of its own under the root.
    private var staged: String?
    private var writer: PartWriter?
    private var stringsWritten = 0
    private var next: [StateLedger.File?] = []
    private var renewals: [PartitionMarker.Renewal] = []
    private var rowsWritten = 0
    private var writeError: Error?

    /// Examines the state of `p` under `root` (the run's lock held).
    init(_ p: ResolvedPipeline, root: String, shards: Int? = nil) {
        self.p = p
        self.root = root
        settings = StateSettings(p, shards: shards)
        identities = p.transactionFiles.map { S3Location.isURI($0) ? nil : System.fileIdentity($0) }
        examine()
    }

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
        let changes = settings.changes(from: found.settings)
        guard changes.isEmpty else { return rebuild(changes.joined(separator: "; ")) }
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
            guard S3Location.isURI(f.path), S3Inputs.etag(f.path) == etag, S3Inputs.size(f.path) == f.stats.bytes
            else { return "changed (another ETag or size)" }
            return nil
        }
        if let identity, identity == f.identity { return nil }
        guard InputFiles.size(f.path) == f.stats.bytes else { return "changed size" }
        guard let source = try? PlainFileSource(path: f.path) else { return "cannot be read" }
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        do { while try source.read(into: chunk) > 0 {} } catch { return "cannot be read" }
        return source.fileSHA256() == f.stats.sha256 ? nil : "changed (another SHA-256)"
    }

    private func display(_ path: String) -> String {
        let prefix = p.config.folder.hasSuffix("/") ? p.config.folder : p.config.folder + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }

    /// Gives the state up: the run reads every file.
    func rebuild(_ why: String) {
        use = .rebuilt
        reason = why
        ledger = nil
        pathOfLedgerFile = []
    }

    /// The state as the read stage takes it, and a fresh next state to capture into.
    func forRead() throws -> IncrementalState {
        discard()
        let staged = root + "/.staging-state-\(System.processID)"
        try? FileManager.default.removeItem(atPath: staged)
        do { try System.makeDirectory(staged, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create the next state's folder", path: staged)
        }
        self.staged = staged
        writer = try PartWriter(path: staged + "/" + StateKeeper.rowsName)
        stringsWritten = 0
        rowsWritten = 0
        renewals = []
        writeError = nil
        next = Array(repeating: nil, count: p.transactionFiles.count)
        let ledger = self.ledger
        let pathOf = pathOfLedgerFile
        let rowsPath = folder + "/" + StateKeeper.rowsName
        let paths = p.transactionFiles
        let limits = p.limits
        let add: (Merger, Int) throws -> Void = { merger, rowsIndex in
            let rows = FileRows(path: "", store: merger.store, limits: limits)
            rows.rowRanks = []
            guard let ledger else {
                merger.add(rows, index: rowsIndex)
                return
            }
            // Each absorbed file in its place: its counts and renewal info, no rows.
            var found = [[PartitionMarker.Renewal]](repeating: [], count: pathOf.count)
            for r in ledger.renewals {
                guard r.file >= 0, r.file < pathOf.count else {
                    throw StateDamaged(why: "its ledger names a file it does not list")
                }
                found[r.file].append(r)
            }
            for (li, f) in ledger.files.enumerated() {
                let file = FileRows(path: paths[pathOf[li]], store: merger.store, limits: limits)
                file.absorbedRows = f.rows
                file.stats = f.stats
                file.nonSubscription = f.nonSubscription
                file.extraRows = f.extraRows
                for r in found[li] {
                    file.renewals.append((TransactionKey(r.originalTransactionId, table: file.table), r.info))
                }
                merger.add(file, index: pathOf[li])
            }
            // Then the rows, each with its file's place in the run's order.
            rows.rejects = ledger.rejects
            var ranks: [UInt32] = []
            ranks.reserveCapacity(ledger.rowsFile.rows)
            do {
                let reader = try PartReader(
                    path: rowsPath, bytes: ledger.rowsFile.bytes, sha256: ledger.rowsFile.sha256)
                while let (li, _) = try reader.next(into: { _ in rows }) {
                    guard li < pathOf.count else {
                        throw StateDamaged(why: "a section names a file the ledger does not list")
                    }
                    let rank = UInt32(pathOf[li])
                    for _ in ranks.count..<rows.rows.count { ranks.append(rank) }
                }
            } catch let e as WinBackError {
                throw StateDamaged(why: e.message)
            }
            guard ranks.count == ledger.rowsFile.rows else {
                throw StateDamaged(why: "it holds \(ranks.count) rows where its ledger says \(ledger.rowsFile.rows)")
            }
            rows.rowRanks = ranks
            merger.add(rows, index: rowsIndex)
        }
        let capture = WinnerCapture(
            rows: { [unowned self] file, rows, strings in
                guard writeError == nil, let writer else { return }
                do {
                    try writer.append(file: file, table: strings, from: stringsWritten, rows: rows)
                    stringsWritten = strings.count
                    rowsWritten += rows.count
                } catch {
                    writeError = error
                }
            },
            renewal: { [unowned self] file, key, info, strings in
                renewals.append(
                    PartitionMarker.Renewal(file: file, originalTransactionId: key.string(in: strings), info: info))
            },
            file: { [unowned self] i, read in
                let path = paths[i]
                let absorbed = ledger.flatMap { l in pathOf.firstIndex(of: i).map { l.files[$0] } }
                next[i] = StateLedger.File(
                    path: path, etag: absorbed?.etag ?? (S3Location.isURI(path) ? S3Inputs.etag(path) : nil),
                    identity: identities[i], stats: read.stats, nonSubscription: read.nonSubscription,
                    extraRows: read.extraRows, rows: read.rows)
            })
        return IncrementalState(absorbed: Set(pathOf), add: add, capture: capture)
    }

    /// Files the run took from the state, and files it read.
    var filesFromState: Int { pathOfLedgerFile.count }
    var filesRead: Int { p.transactionFiles.count - pathOfLedgerFile.count }
    /// Rows in the next state.
    var rowsInState: Int { rowsWritten }

    /// Completes the next state once the read stage is over: its rows file closed, its ledger
    /// written. The rejects are the transaction files' (all of them, as rejects.csv lists them).
    func finish(_ set: TransactionSet) throws {
        guard let staged, let writer else { return }
        if let writeError { throw writeError }
        try writer.close()
        let files = next.compactMap { $0 }
        guard files.count == p.transactionFiles.count else {
            throw WinBackError(.software, "the next state misses a file's counts", path: staged)
        }
        let ledger = StateLedger(
            layout: StateLedger.layout, settings: settings, files: files,
            rowsFile: OutputStats(
                path: StateKeeper.rowsName, bytes: writer.compressedBytes, rows: rowsWritten, sha256: writer.sha256),
            rejects: set.rejects, renewals: renewals)
        try WorkFolder.writeJSON(ledger, to: staged + "/" + StateKeeper.ledgerName)
        System.syncDirectory(staged)
        self.writer = nil
    }

    /// Replaces the state by the next one (after the run published, under its lock): swapped
    /// in one step where the file system can, so that no moment leaves no state. A failure
    /// leaves the previous state, which the next run can still use; it is reported, not thrown.
    func commit(progress: Progress) {
        guard let staged, writer == nil else { return discard() }
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
    }

    /// What the manifest records (docs/rules.md §4.4, §12).
    var summary: IncrementalSummary {
        IncrementalSummary(
            state: use.rawValue, reason: reason, filesRead: filesRead, filesFromState: filesFromState,
            rowsInState: rowsInState)
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
            return "incremental: state rebuilt (\(reason ?? "")); every file read, \(rowsInState) rows in the new state"
        }
    }
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
}
