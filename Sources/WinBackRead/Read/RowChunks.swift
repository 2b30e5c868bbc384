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
            let c = try store.takeChunk()
            numbers.append(c.number)
            chunks.append(c.rows)
            last = c.rows
        }
        return last + k
    }

    /// A value, so that appending through a class's stored property changes it in place and
    /// takes no reference per row. Its token is listed, not looked for
    /// (``RowColumns/list(token:)``): nearly every token of a file is new to it. The tokens of a
    /// part file's sections, which repeat from section to section, are entered once each
    /// instead (``enter(section:)``); a file holds rows of one kind or the other.
    @inline(__always)
    mutating func append(_ t: Transaction) throws {
        let place = try nextPlace()
        var r = columns.compactTerms(t)
        let token = t.appAccountToken
        if !token.isNone { r.token = columns.list(token: token) }
        place.initialize(to: r)
        count += 1
    }

    /// Enters the shared columns of a part file section (``RowCodec``) in ``columns``, each
    /// value once, for the section's rows that follow (``append(sectionRow:)``).
    package mutating func enter(section: RowColumns) {
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
    }

    @inline(__always)
    package subscript(i: Int) -> Transaction { columns.transaction(stored(i)) }

    /// Row `i` as it is kept.
    @inline(__always)
    package func stored(_ i: Int) -> CompactRow {
        chunks[i >> TransactionRows.chunkShift][i & (TransactionRows.chunkRows - 1)]
    }

    /// Hands the columns over (to the run's, ``Merger``), which the rows' indexes are then
    /// rewritten to: these rows are no longer read through ``subscript(_:)``.
    mutating func takeColumns() -> RowColumns {
        defer { columns = RowColumns() }
        return columns
    }

    /// Calls `body` with the chunks' rows, row i at `chunks[i >> chunkShift][i & (chunkRows - 1)]`:
    /// for loops over every row, which then hold no reference per row.
    @inline(__always)
    func withChunks<R>(_ body: (UnsafeBufferPointer<UnsafeMutablePointer<CompactRow>>) throws -> R) rethrows -> R {
        try chunks.withUnsafeBufferPointer(body)
    }
}
