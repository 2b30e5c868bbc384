import Foundation
import WinBackSupport

/// The rows of a run in one mapping from the system: files being read append to it chunk by
/// chunk, and the rows that survive deduplication are then compacted in place, so the run
/// never holds a second copy of its rows nor asks the system for fresh pages to make one.
/// They are kept as ``CompactRow``s of ``columns`` and read as ``Transaction``s.
///
/// Rows are in no particular order (their chunks are taken in an order that depends on the
/// threads, and packing fills the slots freed below the kept count with rows from above it);
/// ``CustomerRows`` puts them in the run's order.
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

    /// Hands out the next free chunk (from any thread): its number and its first row. With
    /// `populate`, for a file that has filled a chunk already and will likely fill this one,
    /// its pages are made memory at once (``System/populate(_:_:)``): one call rather than a
    /// fault for each of its 56 pages. Not for a file's first chunk: ten thousand small files
    /// would each hold a whole chunk of memory for a few rows.
    /// Throws (exit 70) when the reserved address space is full.
    package func takeChunk(populate: Bool = false) throws -> (number: Int, rows: UnsafeMutablePointer<CompactRow>) {
        lock.lock()
        guard chunksTaken < chunkCapacity else {
            lock.unlock()
            throw WinBackError(
                .software, "out of memory: more rows than the \(mappedBytes >> 20) MiB reserved for them")
        }
        chunksTaken += 1
        let number = chunksTaken - 1
        lock.unlock()
        let rows = base! + number << TransactionRows.chunkShift
        if populate {
            System.populate(UnsafeMutableRawPointer(rows), TransactionRows.chunkRows * MemoryLayout<CompactRow>.stride)
        }
        return (number, rows)
    }

    /// Keeps, of the rows written to the chunks handed out, those `keep` says (after it has
    /// rewritten them), packed into the first rows; the pages past them go back to the system.
    /// `keep(&tally, chunk, offset, &row)` sees every used row of every chunk once; `used(chunk)`
    /// is how many rows a chunk holds. A kept row stays where it is when it is among the first
    /// `kept` slots; the slots left free among those (rows not kept, the chunks' unused ends)
    /// take the kept rows above them, both in ascending order. The rows' order is thus not kept,
    /// as it never was: chunks are handed out in the order threads ask for them. Only the rows
    /// above the first `kept` slots move (a few percent of a run's), where sliding every part
    /// down moved nearly all of them. What `keep` counts goes into a tally of each piece of work,
    /// each starting from `tally`, so that counting needs no pass of its own; the tallies are
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
        let shift = TransactionRows.chunkShift
        // Each row decided and rewritten where it is, in eight parts a thread (with half the
        // rows a part on two threads, a pass over them took 3.7 times one thread's CPU:
        // docs/performance.md); each part notes the slots it leaves free, as ranges in order.
        let parts = chunks(n, pieces: Swift.max(1, threads) * 8)
        let found = ResultSlots<(kept: Int, free: [Range<Int>], tally: Tally)>(count: parts.count)
        try? parallelFor(count: parts.count, threads: threads) { p in
            var counted = tally
            var free: [Range<Int>] = []
            var kept = 0
            var freeFrom = -1  // the first of the free slots being passed, -1 when none
            for c in parts[p] {
                let start = c << shift
                let u = used(c)
                for k in 0..<u {
                    let read = rows[start + k]
                    var r = read
                    if keep(&counted, c, k, &r) {
                        // Written back only when rewritten: most rows' ids are decimal and
                        // stay as they are, and a row not written is a cache line not dirtied.
                        if r != read { rows[start + k] = r }
                        kept += 1
                        if freeFrom >= 0 {
                            free.append(freeFrom..<(start + k))
                            freeFrom = -1
                        }
                    } else if freeFrom < 0 {
                        freeFrom = start + k
                    }
                }
                if u < TransactionRows.chunkRows && freeFrom < 0 { freeFrom = start + u }
            }
            if freeFrom >= 0 { free.append(freeFrom..<(parts[p].upperBound << shift)) }
            found[p] = (kept, free, counted)
        }
        let results = found.all
        let total = results.reduce(0) { $0 + $1.kept }
        // The free slots below `total` (targets) and the kept rows at or above it (sources),
        // both ascending: as many of each.
        var targets: [Range<Int>] = []
        var sources: [Range<Int>] = []
        var next = total  // the first slot at or above `total` not yet taken as a source
        for r in results {
            for f in r.free {
                if f.lowerBound < total { targets.append(f.lowerBound..<Swift.min(f.upperBound, total)) }
                guard f.upperBound > total else { continue }
                let from = Swift.max(f.lowerBound, total)
                if next < from { sources.append(next..<from) }
                next = Swift.max(next, f.upperBound)
            }
        }
        if next < n << shift { sources.append(next..<(n << shift)) }
        // Copies (to, from, count) pairing them off; no source lies below any target.
        var copies: [(to: Int, from: Int, count: Int)] = []
        var t = 0
        var s = 0
        var tAt = targets.first?.lowerBound ?? 0
        var sAt = sources.first?.lowerBound ?? 0
        while t < targets.count && s < sources.count {
            let k = Swift.min(targets[t].upperBound - tAt, sources[s].upperBound - sAt)
            copies.append((tAt, sAt, k))
            tAt += k
            sAt += k
            if tAt == targets[t].upperBound {
                t += 1
                if t < targets.count { tAt = targets[t].lowerBound }
            }
            if sAt == sources[s].upperBound {
                s += 1
                if s < sources.count { sAt = sources[s].lowerBound }
            }
        }
        precondition(t == targets.count && s == sources.count, "as many rows above the kept ones as slots free below")
        let moves = copies
        let pieces = chunks(moves.count, pieces: Swift.max(1, threads) * 4)
        try? parallelFor(count: pieces.count, threads: threads) { p in
            for m in moves[pieces[p]] { (rows + m.to).update(from: rows + m.from, count: m.count) }
        }
        count = total
        let page = System.pageSize
        let usedBytes = (total * MemoryLayout<CompactRow>.stride + page - 1) / page * page
        let touchedBytes = n << TransactionRows.chunkShift * MemoryLayout<CompactRow>.stride
        if touchedBytes > usedBytes {
            System.release(UnsafeMutableRawPointer(base) + usedBytes, touchedBytes - usedBytes)
        }
        return results.map(\.tally)
    }
}
