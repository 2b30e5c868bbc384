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

    /// A value, so that appending through a class's stored property changes it in place and
    /// takes no reference per row.
    @inline(__always)
    mutating func append(_ t: Transaction) throws {
        let k = count & (TransactionRows.chunkRows - 1)
        if k == 0 {
            let c = try store.takeChunk()
            numbers.append(c.number)
            chunks.append(c.rows)
            last = c.rows
        }
        (last + k).initialize(to: columns.compact(t))
        count += 1
    }

    @inline(__always)
    package subscript(i: Int) -> Transaction { columns.transaction(stored(i)) }

    /// Hands the columns over (to the run's, ``Merger``), which the rows' indexes are then
    /// rewritten to: these rows are no longer read through ``subscript(_:)``.
    mutating func takeColumns() -> RowColumns {
        defer { columns = RowColumns() }
        return columns
    }

    /// Row `i` as it is kept.
    @inline(__always)
    package func stored(_ i: Int) -> CompactRow {
        chunks[i >> TransactionRows.chunkShift][i & (TransactionRows.chunkRows - 1)]
    }

    /// Calls `body` with the chunks' rows, row i at `chunks[i >> chunkShift][i & (chunkRows - 1)]`:
    /// for loops over every row, which then hold no reference per row.
    @inline(__always)
    func withChunks<R>(_ body: (UnsafeBufferPointer<UnsafeMutablePointer<CompactRow>>) throws -> R) rethrows -> R {
        try chunks.withUnsafeBufferPointer(body)
    }
}
