import Foundation
import WinBackModel
import WinBackSupport

/// A file's rows while the run is read: chunks of the run's ``TransactionRows``, taken as
/// the file grows, so a file never holds spare capacity beyond its last chunk. Rows are kept
/// compact (``CompactRow``), their shared columns in ``columns``, with the file's string ids.
package struct RowChunks {
    let store: TransactionRows
    package private(set) var columns = RowColumns()
    /// The chunks' numbers in the store, in the file's order, and their first rows.
    private(set) var numbers: [Int] = []
    private var chunks: [UnsafeMutablePointer<CompactRow>] = []
    /// The last chunk's first row: where the next rows go until it is full.
    private var last = UnsafeMutablePointer<CompactRow>(bitPattern: MemoryLayout<CompactRow>.alignment)!
    package private(set) var count = 0
    /// Whether the rows' tokens are listed (``RowColumns/list(token:)``): until the file has
    /// ``listLimit`` of them, then they are interned a chunk at a time.
    private var listing = true
    /// The tokens of the last chunk's rows, not yet entered in ``columns`` once the file's
    /// tokens are no longer listed: a row's token is its index here until its chunk is settled
    /// (``settle()``), all of its tokens at once.
    private var pending: [AppAccountToken] = []
    /// Rows whose tokens are entered: all but the last chunk's latest.
    private var settled = 0

    /// The most tokens a file lists (3 MB of them): nearly every token of a month's export is new
    /// to it, so a table of them finds little; a longer file (a single export of every month,
    /// each customer's rows sharing a token) keeps each token once instead.
    static let listLimit = 1 << 17

    init(store: TransactionRows) { self.store = store }

    /// Where the part file section being read has each of its terms and tokens in ``columns``
    /// (``enter(section:)``).
    private var sectionTerms: [Int32] = []
    private var sectionTokens: [Int32] = []

    /// Where the next row goes: a new chunk's first place when the last one is full.
    @inline(__always)
    private mutating func nextPlace() throws -> UnsafeMutablePointer<CompactRow> {
        let k = count & (TransactionRows.chunkRows - 1)
        if k == 0 {
            settle()
            let c = try store.takeChunk(populate: !numbers.isEmpty)
            numbers.append(c.number)
            chunks.append(c.rows)
            last = c.rows
        }
        return last + k
    }

    /// A value, so that appending through a class's stored property changes it in place and
    /// takes no reference per row. Its token is listed, not looked for
    /// (``RowColumns/list(token:)``), while the file has fewer than ``listLimit``: nearly every
    /// token of a month's file is new to it. Past that, and for the tokens of a part file's
    /// sections, which repeat from section to section (``enter(section:)``), each token is
    /// entered once.
    @inline(__always)
    mutating func append(_ t: Transaction) throws {
        let place = try nextPlace()
        var r = columns.compactTerms(t)
        let token = t.appAccountToken
        if !token.isNone {
            if listing && columns.tokens.count < RowChunks.listLimit {
                r.token = columns.list(token: token)
            } else {
                if listing { stopListing() }
                r.token = Int32(pending.count)
                pending.append(token)
            }
        }
        place.initialize(to: r)
        count += 1
    }

    /// Keeps each listed token once and rewrites the rows so far to their numbers then; the
    /// tokens of the rows that follow are interned a chunk at a time.
    private mutating func stopListing() {
        listing = false
        let numbers = columns.internListedTokens()
        for (c, rows) in chunks.enumerated() {
            for k in 0..<Swift.min(TransactionRows.chunkRows, count - c << TransactionRows.chunkShift)
            where rows[k].token >= 0 {
                rows[k].token = numbers[Int(rows[k].token)]
            }
        }
        settled = count
    }

    /// Enters the shared columns of a part file section (``RowCodec``) in ``columns``, each
    /// value once, for the section's rows that follow (``append(sectionRow:)``).
    package mutating func enter(section: RowColumns) {
        if listing { stopListing() }
        settle()
        sectionTerms = section.terms.values.map { columns.enter(terms: $0) }
        sectionTokens = columns.enter(tokens: section.tokens.values)
    }

    /// Appends a row of the section last entered (``enter(section:)``), its terms and token
    /// places in that section's columns: no value is looked up.
    @inline(__always)
    package mutating func append(sectionRow r: CompactRow) throws {
        let place = try nextPlace()
        var r = r
        r.terms = sectionTerms[Int(r.terms)]
        if r.token >= 0 { r.token = sectionTokens[Int(r.token)] }
        place.initialize(to: r)
        count += 1
        settled = count
    }

    /// Enters the tokens of the rows appended since the last time in ``columns`` (rows of
    /// the last chunk: a new chunk settles the one before): rows are read only once settled.
    /// Rows whose tokens are listed are always settled.
    mutating func settle() {
        defer { settled = count }
        guard !pending.isEmpty else { return }
        let start = (count - 1) & ~(TransactionRows.chunkRows - 1)
        precondition(settled >= start, "only the last chunk's rows wait")
        columns.intern(
            tokens: pending, of: UnsafeMutableBufferPointer(start: last + (settled - start), count: count - settled))
        pending.removeAll(keepingCapacity: true)
    }

    @inline(__always)
    package subscript(i: Int) -> Transaction { columns.transaction(stored(i)) }

    /// Row `i` as it is kept.
    @inline(__always)
    package func stored(_ i: Int) -> CompactRow {
        precondition(pending.isEmpty, "rows read once settled")
        return chunks[i >> TransactionRows.chunkShift][i & (TransactionRows.chunkRows - 1)]
    }

    /// Hands the columns over (to the run's, ``Merger``), which the rows' indexes are then
    /// rewritten to: these rows are no longer read through ``subscript(_:)``.
    mutating func takeColumns() -> RowColumns {
        precondition(pending.isEmpty, "rows read once settled")
        pending = []
        defer { columns = RowColumns() }
        return columns
    }

    /// Calls `body` with the chunks' rows, row i at `chunks[i >> chunkShift][i & (chunkRows - 1)]`:
    /// for loops over every row, which then hold no reference per row.
    @inline(__always)
    package func withChunks<R>(
        _ body: (UnsafeBufferPointer<UnsafeMutablePointer<CompactRow>>) throws -> R
    ) rethrows -> R {
        precondition(pending.isEmpty, "rows read once settled")
        return try chunks.withUnsafeBufferPointer(body)
    }
}
