import Foundation
import WinBackModel
import WinBackSupport

/// A transaction file an incremental run's state absorbed earlier (docs/rules.md §12): not
/// read again. What it counted when it was read, its rejects and the renewal info found among
/// its transactions stand for it in the merge; its rows are among the state's (``StateRows``).
package struct AbsorbedFile {
    package var counts: FileCounts
    package var rejects: RejectList
    /// Ids of the renewal info's keys.
    let table = StringTable()
    var renewals: [(key: TransactionKey, info: RenewalInfo)] = []

    /// - Parameters:
    ///   - renewals: renewal info found among its transactions, in the order read.
    package init(
        counts: FileCounts, rejects: RejectList = RejectList(limit: 0),
        renewals: [(originalTransactionId: String, info: RenewalInfo)] = []
    ) {
        self.counts = counts
        self.rejects = rejects
        for r in renewals { self.renewals.append((TransactionKey(r.originalTransactionId, table: table), r.info)) }
    }
}

/// A piece of an incremental run's state (docs/rules.md §12): winners among the rows of the
/// files absorbed earlier, each with its file's index in sorted path order (its place in the
/// order deduplication goes by). Read alongside the files read now and deduplicated after them;
/// not a file of the run, it counts none.
// One thread fills a piece, a value it then hands to the merger, which takes it over under
// its lock.
package struct StateRows {
    /// Ids local to the piece; released once merged into the run's.
    package var table = StringTable(capacity: 1 << 14)
    package var rows: RowChunks
    /// Each row's file, as its index in sorted path order: one a row once filled.
    package var ranks: [UInt32] = []

    package init(store: TransactionRows) { rows = RowChunks(store: store) }

    @inline(__always)
    package mutating func add(_ t: Transaction) throws { try rows.append(t) }
}

/// An incremental run's state, as the read stage takes it (docs/rules.md §12).
package struct IncrementalState {
    /// Indices, in sorted path order, of the files the state absorbed: they are not read.
    package var absorbed: Set<Int>
    /// Pieces of the state's rows: each read on a thread of its own, alongside the files read now
    /// (deduplication waits for every row: ``Merger/finish(threads:capture:)``).
    package var pieces: Int
    /// Slots of the merger the state's rows take, after those of the files: one a piece, and one
    /// (left empty) when there is none.
    package var slots: Int { Swift.max(1, pieces) }
    /// Adds to the merger an ``AbsorbedFile`` for every absorbed file at its index (no rows: its
    /// counts, rejects and renewal info).
    package var absorb: (_ merger: Merger) throws -> Void
    /// Reads piece `piece` of the state's rows into the merger as ``StateRows`` at slot `index`.
    package var load: @Sendable (_ merger: Merger, _ piece: Int, _ index: Int) throws -> Void
    /// Takes the winners for the next state; nil when no state is to be written.
    package var capture: WinnerCapture?

    package init(
        absorbed: Set<Int>, pieces: Int, absorb: @escaping (Merger) throws -> Void,
        load: @escaping @Sendable (Merger, Int, Int) throws -> Void, capture: WinnerCapture?
    ) {
        self.absorbed = absorbed
        self.pieces = pieces
        self.absorb = absorb
        self.load = load
        self.capture = capture
    }
}

/// What an incremental run keeps of its merge for the next night's state (docs/rules.md §12):
/// ``Merger/finish(threads:capture:)`` hands it the winners, in pieces of at most `pieceRows`
/// rows written on several threads, and, file by file in path order, the renewal info found
/// among the transactions and what each file counted; all with the run's string ids.
package struct WinnerCapture: Sendable {
    /// Rows a piece holds at most: pieces are written, and read back, in parallel.
    package var pieceRows: Int
    /// Winning rows of file `file` (its index in sorted path order) for piece `piece`: the
    /// calls of one piece come from one thread at a time, those of several pieces at once.
    package var rows: @Sendable (_ piece: Int, _ file: Int, _ rows: Span<Transaction>, _ strings: StringTable) -> Void
    /// One renewal info of file `file`, in the order it was read.
    package var renewal:
        @Sendable (_ file: Int, _ originalTransactionId: TransactionKey, _ info: RenewalInfo, _ strings: StringTable) ->
            Void
    /// What file `file` gave besides rows (of an absorbed one, what it gave when it was read).
    package var file: @Sendable (_ file: Int, _ read: FileCounts) -> Void
    /// Asked of every slot of state rows (``StateRows``) of which no row lost: true
    /// when the next state keeps those rows as they are, which then are not handed over.
    package var keeps: @Sendable (_ slot: Int, _ rows: Int) -> Bool

    package init(
        pieceRows: Int,
        rows: @escaping @Sendable (Int, Int, Span<Transaction>, StringTable) -> Void,
        renewal: @escaping @Sendable (Int, TransactionKey, RenewalInfo, StringTable) -> Void,
        file: @escaping @Sendable (Int, FileCounts) -> Void,
        keeps: @escaping @Sendable (Int, Int) -> Bool = { _, _ in false }
    ) {
        self.pieceRows = max(1, pieceRows)
        self.rows = rows
        self.renewal = renewal
        self.file = file
        self.keeps = keeps
    }
}
