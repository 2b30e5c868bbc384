import Foundation
import WinBackSupport

/// The rows of a run in one mapping from the system: files being read append to it chunk by
/// chunk, and the rows that survive deduplication are then compacted in place, so the run
/// never holds a second copy of its rows nor asks the system for fresh pages to make one.
/// They are kept as ``CompactRow``s of ``columns`` and read as ``Transaction``s.
///
/// Rows are in no particular order (the order their chunks were taken in, which depends on
/// the threads); ``CustomerRows`` puts them in the run's order.
// Chunks are handed out under `lock`, each then written by one thread; packed once; then only read.
public final class TransactionRows: RandomAccessCollection, @unchecked Sendable {
    public typealias Index = Int
    public typealias Element = Transaction

    /// Constants the readers in other modules inline (a stored static is reached through a
    /// function call on every row).
    @inlinable package static var chunkShift: Int { 12 }
    /// Rows per chunk: small, so that the last, partly filled chunk of each file wastes little.
    @inlinable package static var chunkRows: Int { 1 << chunkShift }

    private let base: UnsafeMutablePointer<CompactRow>?
    /// The rows' shared columns (the run's, once the read has merged every file's).
    @exclusivity(unchecked) package var columns = RowColumns()
    private let mappedBytes: Int
    /// Chunks the mapping has room for.
    private let chunkCapacity: Int
    @exclusivity(unchecked) private var chunksTaken = 0
    /// Chunks handed out so far (from any thread).
    package var chunkCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return chunksTaken
    }
    private let lock = NSLock()
    @exclusivity(unchecked) public private(set) var count = 0

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(i: Int) -> Transaction {
        precondition(i >= 0 && i < count && !released, "row index out of range")
        return columns.transaction(base![i])
    }

    /// The rows, valid while `self` is alive.
    package var buffer: UnsafeMutableBufferPointer<CompactRow> {
        precondition(!released, "the rows were released after the evaluation")
        return UnsafeMutableBufferPointer(start: base, count: count)
    }

    /// A copy of `rows`, in memory from the allocator (callers that keep their rows: tests).
    public init(_ rows: [Transaction]) {
        base = rows.isEmpty ? nil : .allocate(capacity: rows.count)
        mappedBytes = 0
        chunkCapacity = 0
        count = rows.count
        if let base {
            for (i, r) in rows.enumerated() { (base + i).initialize(to: columns.compact(r)) }
        }
    }

    /// Room for the rows of a read, which can be as many as fit in memory: the address space
    /// is reserved (none of it is memory until written to), starting at the size of physical
    /// memory and halving while the system refuses.
    /// Throws (exit 70) when the system grants no address space at all.
    package init(reservingForRead: Void) throws {
        let stride = MemoryLayout<CompactRow>.stride
        let chunkBytes = TransactionRows.chunkRows * stride
        var bytes = Swift.max(System.physicalMemory, 64 << 20) / chunkBytes * chunkBytes
        var p: UnsafeMutableRawPointer?
        while p == nil && bytes >= chunkBytes {
            p = System.mapAnonymous(bytes, reserveOnly: true)
            if p == nil { bytes = bytes / 2 / chunkBytes * chunkBytes }
        }
        guard let p else {
            throw WinBackError(.software, "out of memory: the system grants no address space for the rows")
        }
        base = p.bindMemory(to: CompactRow.self, capacity: bytes / stride)
        mappedBytes = bytes
        chunkCapacity = bytes / chunkBytes
    }

    /// A copy of `rows` in a mapping from the system, packed as a read leaves them (for tests
    /// of what lets go of the rows' pages).
    package static func mapped(_ rows: [Transaction]) throws -> TransactionRows {
        let store = try TransactionRows(reservingForRead: ())
        var used: [Int] = []
        var from = 0
        while from < rows.count {
            let n = Swift.min(rows.count - from, chunkRows)
            let (_, chunk) = try store.takeChunk()
            for k in 0..<n { (chunk + k).initialize(to: store.columns.compact(rows[from + k])) }
            used.append(n)
            from += n
        }
        let counts = used
        _ = store.compact(threads: 1, tally: 0, used: { counts[$0] }, keep: { _, _, _, _ in true })
        return store
    }

    deinit {
        guard let base else { return }
        if mappedBytes > 0 {
            System.unmap(UnsafeMutableRawPointer(base), mappedBytes)
        } else {
            base.deallocate()
        }
    }

    /// Hands the pages that only rows of `range` occupy back to the system (a mapped store;
    /// those shared with rows outside it stay): the evaluation lets go of each piece's rows
    /// as it is done with them. Their rows read as zero afterwards: only ``release()`` may
    /// follow.
    package func releasePages(of range: Range<Int>) {
        guard let base, mappedBytes > 0, !range.isEmpty else { return }
        let stride = MemoryLayout<CompactRow>.stride
        let page = System.pageSize
        let start = UnsafeMutableRawPointer(base) + range.lowerBound * stride
        let end = UnsafeMutableRawPointer(base) + range.upperBound * stride
        let from = (Int(bitPattern: start) + page - 1) / page * page
        let to = Int(bitPattern: end) / page * page
        if to > from { System.release(UnsafeMutableRawPointer(bitPattern: from)!, to - from) }
    }

    /// Hands every row's pages back and marks the rows gone: reading one afterwards stops
    /// the run.
    package func release() {
        releasePages(of: 0..<count)
        released = true
    }

    /// Whether the rows were let go of (``release()``).
    @exclusivity(unchecked) package private(set) var released = false

    /// Hands out the next free chunk (from any thread): its number and its first row.
    /// Throws (exit 70) when the reserved address space is full.
    package func takeChunk() throws -> (number: Int, rows: UnsafeMutablePointer<CompactRow>) {
        lock.lock()
        defer { lock.unlock() }
        guard chunksTaken < chunkCapacity else {
            throw WinBackError(
                .software, "out of memory: more rows than the \(mappedBytes >> 20) MiB reserved for them")
        }
        chunksTaken += 1
        return (chunksTaken - 1, base! + (chunksTaken - 1) << TransactionRows.chunkShift)
    }

    /// Moves `count` rows from `from` down to `to` (`to < from`) on `threads` threads: a part's
    /// rows moved on one thread are a pass over its memory that the other threads wait for.
    /// The rows go in waves of pieces: a wave covers at most `from - to` rows, so every piece
    /// of it lands below every row not yet moved, and only on rows already moved.
    static func slide(_ rows: UnsafeMutablePointer<CompactRow>, count: Int, from: Int, to: Int, threads: Int) {
        let gap = from - to
        let piece = Swift.max(1 << 12, gap / Swift.max(1, threads))
        guard threads > 1, gap >= 2 * piece else {
            (rows + to).moveInitialize(from: rows + from, count: count)
            return
        }
        nonisolated(unsafe) let rows = rows
        var start = 0
        while start < count {
            let end = Swift.min(count, start + gap / piece * piece)
            let pieces = Swift.stride(from: start, to: end, by: piece).map { $0..<Swift.min($0 + piece, end) }
            try? parallelFor(count: pieces.count, threads: threads) { k in
                let r = pieces[k]
                (rows + to + r.lowerBound).moveInitialize(from: rows + from + r.lowerBound, count: r.count)
            }
            start = end
        }
    }

    /// Keeps, of the rows written to the chunks handed out, those `keep` says (after it has
    /// rewritten them), packed from the first row on; the pages past them go back to the system.
    /// `keep(&tally, chunk, offset, &row)` sees every used row of every chunk once; `used(chunk)`
    /// is how many rows a chunk holds. Chunks are packed on `threads` threads, then slid
    /// together. What `keep` counts of the rows goes into a tally of each piece of work, each
    /// starting from `tally`, so that counting needs no pass of its own; the tallies are
    /// returned in no particular order (add them up).
    package func compact<Tally: Sendable>(
        threads: Int, tally: Tally, used: @escaping @Sendable (Int) -> Int,
        keep: @escaping @Sendable (inout Tally, Int, Int, inout CompactRow) -> Bool
    ) -> [Tally] {
        let n = chunksTaken
        guard let base, n > 0 else {
            count = 0
            return []
        }
        nonisolated(unsafe) let rows = base
        // Eight parts a thread: with one part a thread (half the rows each on two), packing took
        // 3.7 times the CPU it takes on one thread (docs/performance.md); with eight, less than
        // one thread's.
        let parts = chunks(n, pieces: Swift.max(1, threads) * 8)
        let kept = ResultSlots<(Int, Tally)>(count: parts.count)
        try? parallelFor(count: parts.count, threads: threads) { p in
            var out = (parts[p].first ?? 0) << TransactionRows.chunkShift
            let first = out
            var counted = tally
            for c in parts[p] {
                let start = c << TransactionRows.chunkShift
                for k in 0..<used(c) {
                    var r = rows[start + k]
                    if keep(&counted, c, k, &r) {
                        (rows + out).initialize(to: r)
                        out += 1
                    }
                }
            }
            kept[p] = (out - first, counted)
        }
        // Each part's rows start at or after where they go, so sliding them in order never
        // overwrites a row not yet moved.
        var total = 0
        for (p, part) in parts.enumerated() {
            let from = (part.first ?? 0) << TransactionRows.chunkShift
            let k = kept[p]!.0
            if from != total { TransactionRows.slide(rows, count: k, from: from, to: total, threads: threads) }
            total += k
        }
        count = total
        let page = System.pageSize
        let usedBytes = (total * MemoryLayout<CompactRow>.stride + page - 1) / page * page
        let touchedBytes = n << TransactionRows.chunkShift * MemoryLayout<CompactRow>.stride
        if touchedBytes > usedBytes {
            System.release(UnsafeMutableRawPointer(base) + usedBytes, touchedBytes - usedBytes)
        }
        return kept.all.map(\.1)
    }
}
