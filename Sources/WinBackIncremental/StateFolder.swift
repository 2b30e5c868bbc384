import Foundation
import WinBackModel
import WinBackPipeline
import WinBackRead
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
/// What both keepers share (``InMemoryStateKeeper``, ``ShardedStateKeeper``): the state
/// examined under the run's lock before anything is read (its ledger read, its settings and
/// files checked), the next state's folder staged beside it, and the swap once the run has
/// published (``swap(progress:)``); a run that fails leaves the state as it was.
package final class StateFolder {
    package static let folderName = ".state"
    package static let ledgerName = "ledger.json"

    package let p: ResolvedPipeline
    /// `<output>/<name>` (or a shard's folder under it), where `.state` is.
    package let root: String
    package var path: String { root + "/" + StateFolder.folderName }
    package var settings: StateSettings
    package private(set) var use = StateUse.created
    private(set) var reason: String?
    /// The state found, when it can be used; and each of its files' index in the run's paths.
    private(set) var ledger: StateLedger?
    private(set) var pathOfLedgerFile: [Int] = []
    /// The identity of every transaction file as resolved, before any is read.
    package let identities: [InputIdentity]
    /// The next state, staged in a folder of its own under the root.
    private(set) var staged: String?
    /// Rows in the next state, once it is complete.
    package var rowsInState = 0

    /// Examines the state of `p` under `root` (the run's lock held).
    ///
    /// With `keepingMoreShards` (a memory-bounded run whose shard count was estimated), a state
    /// kept in more shards than `shards` keeps its count: an earlier night partitioned again
    /// because the rows did not fit (docs/rules.md §12, rule 7).
    package init(_ p: ResolvedPipeline, root: String, shards: Int? = nil, keepingMoreShards: Bool = false) {
        self.p = p
        self.root = root
        settings = StateSettings(p, shards: shards)
        identities = p.inputs.map(\.identity)
        examine(keepingMoreShards: keepingMoreShards)
    }

    /// Decides whether the state can be used, and why not.
    private func examine(keepingMoreShards: Bool) {
        guard let kind = System.linkKind(path) else {
            use = .created
            reason = "no state yet"
            return
        }
        guard kind == System.folderType else {
            return rebuild("\(path) is \(System.describe(kind)), not a state folder")
        }
        let found: StateLedger
        do {
            guard
                let (l, _) = try IntermediateFile.readJSON(StateLedger.self, from: path + "/" + StateFolder.ledgerName)
            else { return rebuild("the state has no ledger") }
            found = l
        } catch let e as WinBackError {
            return rebuild("the state is damaged (\(e.message))")
        } catch {
            return rebuild("the state is damaged (\(SystemError.words(error)))")
        }
        guard found.layout == StateLedger.layout else {
            return rebuild("the state is of another layout (\(found.layout))")
        }
        if keepingMoreShards, let mine = settings.shards, let kept = found.settings.shards, kept > mine, kept <= 4096 {
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
            if let why = changed(f, now: identities[i]) {
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

    /// Why absorbed file `f` is not the file read then, or nil when it is, by the identity its
    /// input was resolved with (`now`): an object's ETag and size; a local file's identity, or
    /// else its size and the SHA-256 of its bytes.
    private func changed(_ f: StateLedger.File, now: InputIdentity) -> String? {
        // A table's range is what its name says: rows at or below the cursor read are the
        // state's and never read again (docs/rules.md §14.1).
        if now.isRows {
            return TableRange.parse(f.path).range == nil ? "is a table read whole every night (it has no cursor)" : nil
        }
        if let etag = f.etag {
            guard now.etag == etag, now.size == f.counts.stats.bytes else { return "changed (another ETag or size)" }
            return nil
        }
        if let identity = now.stat, identity == f.identity { return nil }
        guard now.size == f.counts.stats.bytes else { return "changed size" }
        guard let source = try? PlainFileSource(path: f.path) else { return "cannot be read" }
        do { try source.readThrough() } catch { return "cannot be read" }
        return source.fileSHA256() == f.counts.stats.sha256 ? nil : "changed (another SHA-256)"
    }

    private func display(_ path: String) -> String {
        let prefix = p.config.folder.hasSuffix("/") ? p.config.folder : p.config.folder + "/"
        // A reason is printed and written: the name escaped (docs/rules.md §6.2).
        return ControlEscape.name(path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path)
    }

    /// Gives the state up: the run reads every file.
    package func rebuild(_ why: String) {
        use = .rebuilt
        reason = why
        ledger = nil
        pathOfLedgerFile = []
    }

    /// Runs `attempt` (`again` false); when it finds the state damaged while reading it
    /// (``StateDamaged``), says so in the log, gives the state up and runs `attempt` once more
    /// (`again` true), which reads every file (docs/rules.md §12). Without a state (`state`
    /// nil), a damaged state cannot arise and `attempt` runs once.
    package static func rebuildingIfDamaged<T>(
        _ state: StateFolder?, progress: Progress, _ attempt: (_ again: Bool) throws -> T
    ) throws -> T {
        do {
            return try attempt(false)
        } catch let damaged as StateDamaged {
            guard let state else { throw damaged }
            let why = "the state is damaged (\(damaged.why))"
            progress.warn("state_rebuilt", "incremental state rebuilt: \(why)", fields: ["path": state.path])
            state.rebuild(why)
            return try attempt(true)
        }
    }

    /// A fresh, empty folder for the next state.
    package func stage() throws -> String {
        discard()
        let staged = root + "/.staging-state-\(System.processID)"
        System.removeTreeQuietly(staged)
        do { try System.makeDirectory(staged, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create the next state's folder", path: staged)
        }
        self.staged = staged
        return staged
    }

    /// Replaces the state by the next one (after the run published, under its lock): swapped
    /// in one step where the file system can, so that no moment leaves no state. A next state
    /// without its ledger (not complete) is discarded. A failure leaves the previous state,
    /// which the next run can still use; it is reported, not thrown.
    package func swap(progress: Progress) {
        guard let staged, System.kind(staged + "/" + StateFolder.ledgerName) == .file else { return discard() }
        do {
            switch System.linkKind(path) {
            case nil:
                try System.rename(staged, path)
            case System.folderType?:
                do { try System.exchange(staged, path) } catch {
                    let old = root + "/.staging-state-old-\(System.processID)"
                    try System.rename(path, old)
                    try System.rename(staged, path)
                    System.removeTreeQuietly(old)
                }
            default:
                System.unlinkIfPresent(path)
                try System.rename(staged, path)
            }
            System.syncDirectory(root)
        } catch {
            progress.warn(
                "state",
                "the next incremental state could not replace the previous one (\(SystemError.words(error))); "
                    + "the previous one is kept", fields: ["path": path])
        }
        discard()
    }

    /// Removes the staged next state, if any (a failed run; or once swapped, the previous one).
    package func discard() {
        if let staged { System.removeTreeQuietly(staged) }
        staged = nil
    }

    /// Files the run took from the state, and files it read.
    package var filesFromState: Int { pathOfLedgerFile.count }
    package var filesRead: Int { p.transactionFiles.count - pathOfLedgerFile.count }
    /// Rows the absorbed files gave when they were read, counted again in the read stage's rows.
    package var rowsFromState: Int {
        ledger?.files.reduce(0) { $0 + $1.counts.stats.rows + $1.counts.extraRows } ?? 0
    }

    /// What the manifest records (docs/rules.md §4.4, §12).
    package var summary: IncrementalSummary {
        let absorbed = Set(pathOfLedgerFile)
        return IncrementalSummary(
            state: use.rawValue, reason: reason, filesRead: filesRead, filesFromState: filesFromState,
            rowsInState: rowsInState,
            read: p.transactionFiles.indices.filter { !absorbed.contains($0) }.map { p.transactionFiles[$0] })
    }

    /// One line for the log.
    package var line: String {
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

    /// The cursor ranges of the table source `label` that the state under `root` absorbed, in
    /// order (docs/rules.md §14.1): none when there is no readable state, or when its ranges do
    /// not follow one another (every range is then read again).
    package static func absorbedRanges(root: String, label: String) -> [TableRange] {
        let ledger = root + "/" + folderName + "/" + ledgerName
        guard let (found, _) = try? IntermediateFile.readJSON(StateLedger.self, from: ledger) else { return [] }
        var ranges: [TableRange] = []
        for f in found.files {
            let (l, range) = TableRange.parse(f.path)
            guard l == label, var range else { continue }
            guard range.sequence == ranges.count + 1, range.after == ranges.last?.through else { return [] }
            range.bytes = f.counts.stats.bytes
            ranges.append(range)
        }
        return ranges
    }

    /// What the next run in memory would do with the state of `p`, for `winback validate`
    /// (which takes no lock and writes nothing: the state is only examined).
    package static func preview(_ p: ResolvedPipeline) -> String {
        let state = StateFolder(p, root: p.outputDirectory + "/" + p.config.name)
        switch state.use {
        case .absorbed:
            return "incremental: the next run takes \(state.filesFromState) files from the state and reads "
                + "\(state.filesRead)"
        case .created, .rebuilt:
            return "incremental: the next run reads every file (\(state.reason ?? ""))"
        }
    }
}

/// How a run used its state.
package enum StateUse: String {
    /// Its rows and counts were taken; only files not in it were read.
    case absorbed
    /// There was none: every file was read, and the first state written.
    case created
    /// It could not be used (``StateFolder/reason``): every file was read, and a new state written.
    case rebuilt
}

/// The state's rows could not be trusted while they were read: the run reads every file.
package struct StateDamaged: Error {
    package var why: String
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
