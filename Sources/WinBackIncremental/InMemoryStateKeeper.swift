import Foundation
import Synchronization
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The keeper of a run in memory's state (docs/rules.md §12): hands the read stage what the
/// state holds (``IncrementalState``: its absorbed files' counts and its rows, in pieces read on
/// several threads), captures the winners into the next state, in pieces, as the rows are
/// merged, and completes its ledger once the read stage is over. What is found, staged and
/// swapped is ``StateFolder``'s.
package final class InMemoryStateKeeper {
    /// Rows a piece of the state holds at most (about 5.5 MB): pieces are written and read on
    /// several threads.
    package static let pieceRows = 1 << 17

    package let state: StateFolder
    package let p: ResolvedPipeline
    /// Rows a piece of the next state holds at most: ``pieceRows``, or fewer (tests, to have
    /// many pieces of a small world).
    package let pieceRows: Int
    private var writer: StateRowsWriter?

    /// Examines the state of `p` under `root` (the run's lock held).
    package init(_ p: ResolvedPipeline, root: String, pieceRows: Int = InMemoryStateKeeper.pieceRows) {
        self.p = p
        self.pieceRows = pieceRows
        state = StateFolder(p, root: root)
    }

    /// The state as the read stage takes it, and a fresh next state to capture into.
    ///
    /// The next ledger lists the absorbed files in their order, then the new ones in path
    /// order: a section names its file by that index, so that a piece of rows none of which
    /// lost, and large enough, is kept as it is (linked into the next state), not written again.
    package func forRead(progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> IncrementalState {
        let staged = try state.stage()
        let generation = (state.ledger?.generation ?? 0) + 1
        let ledger = state.ledger
        let pathOf = state.pathOfLedgerFile
        let folder = state.path
        let paths = p.transactionFiles
        // Path index → index in the next ledger.
        var order = pathOf
        let absorbedSet = Set(pathOf)
        order += paths.indices.filter { !absorbedSet.contains($0) }
        var indexOfPath = [Int](repeating: 0, count: paths.count)
        for (li, pi) in order.enumerated() { indexOfPath[pi] = li }
        let ledgerIndex = indexOfPath
        let writer = StateRowsWriter(folder: staged) { "rows-\(generation)-\($0).part" }
        self.writer = writer
        let absorb: (Merger) throws -> Void = { merger in
            guard let ledger else { return }
            // Each absorbed file in its place: its counts and renewal info, no rows; the first
            // carries the rejects of them all.
            var found = [[FoundRenewal]](repeating: [], count: pathOf.count)
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
        }
        // The rows, each with its file's place in the run's order, piece by piece: the read
        // stage reads them alongside its files.
        let pieces = ledger?.rowsFiles ?? []
        let load: @Sendable (Merger, Int, Int) throws -> Void = { merger, k, index in
            var rows = StateRows(store: merger.store)
            try StateFolder.load(&rows, from: folder + "/" + pieces[k].path, pieces[k], pathOf: pathOf)
            merger.add(rows, index: index)
            progress(pieces[k].bytes)
        }
        let gathered = Gathered(files: paths.count)
        let identities = state.identities
        let pieceRows = self.pieceRows
        let firstRows = paths.count
        let capture = WinnerCapture(
            pieceRows: pieceRows,
            rows: { piece, file, rows, strings in writer.append(piece, ledgerIndex[file], rows, strings) },
            renewal: { file, key, info, strings in
                let r = FoundRenewal(
                    file: ledgerIndex[file], originalTransactionId: key.string(in: strings), info: info)
                gathered.value.withLock { $0.renewals.append(r) }
            },
            file: { i, read in
                let path = paths[i]
                let absorbed = absorbedSet.contains(i) ? ledger?.files[ledgerIndex[i]] : nil
                let entry = StateLedger.File(
                    path: path, etag: absorbed?.etag ?? identities[i].etag,
                    identity: identities[i].stat, counts: read)
                gathered.value.withLock { $0.files[ledgerIndex[i]] = entry }
            },
            keeps: { slot, rows in
                // A piece of the state none of whose rows lost, at least half full: linked.
                let k = slot - firstRows
                guard let ledger, k >= 0, k < ledger.rowsFiles.count, rows >= pieceRows / 2 else {
                    return false
                }
                let piece = ledger.rowsFiles[k]
                do {
                    try System.link(folder + "/" + piece.path, staged + "/" + piece.path)
                } catch {
                    return false
                }
                gathered.value.withLock { $0.kept.append(piece) }
                return true
            })
        collected = { gathered.value.withLock { ($0.renewals, $0.files, $0.kept) } }
        return IncrementalState(
            absorbed: absorbedSet, pieces: pieces.count, absorb: absorb, load: load, capture: capture)
    }

    /// What the capture gathered besides rows: renewal info, each file's ledger entry (by its
    /// index in the next ledger) and the pieces kept as they were.
    private var collected: (() -> ([FoundRenewal], [StateLedger.File?], [OutputStats]))?

    /// Bytes of the state's rows files the run reads (0 when it reads every file).
    package var stateBytes: Int { state.ledger?.rowsFiles.reduce(0) { $0 + $1.bytes } ?? 0 }

    /// Completes the next state once the read stage is over: its rows files closed, its ledger
    /// written. The rejects are the transaction files' (all of them, as rejects.csv lists them).
    package func finish(_ set: TransactionSet) throws {
        guard let staged = state.staged, let writer, let collected else { return }
        let (renewals, entries, kept) = collected()
        let pieces = kept + (try writer.finish())
        state.rowsInState = pieces.reduce(0) { $0 + $1.rows }
        let files = entries.compactMap { $0 }
        guard files.count == p.transactionFiles.count else {
            throw WinBackError(.software, "the next state misses a file's counts", path: staged)
        }
        let ledger = StateLedger(
            layout: StateLedger.layout, generation: (state.ledger?.generation ?? 0) + 1, settings: state.settings,
            files: files, rowsFiles: pieces, shardRows: nil, rejects: set.rejects, renewals: renewals)
        try IntermediateFile.writeJSON(ledger, to: staged + "/" + StateFolder.ledgerName)
        self.writer = nil
        self.collected = nil
    }

    /// Removes the staged next state, if any.
    package func discard() {
        state.discard()
        writer = nil
        collected = nil
    }
}

/// What the read stage's threads gather for the next state besides rows, under one lock:
/// renewal info, each file's ledger entry (by its index in the next ledger), the pieces kept.
private final class Gathered: Sendable {
    package struct Value {
        package var renewals: [FoundRenewal] = []
        package var files: [StateLedger.File?]
        package var kept: [OutputStats] = []
    }
    package let value: Mutex<Value>

    package init(files: Int) { value = Mutex(Value(files: Array(repeating: nil, count: files))) }
}
