import Foundation

/// Runs `body(i)` for i in 0..<count on at most `threads` threads, each pulling the next index.
///
/// `order` gives the order in which indices are handed out (e.g. largest file first); results
/// must be stored by index, so the schedule never shows in the output. Every iteration runs;
/// the error of the lowest index is rethrown, so a failure is reported the same way whatever
/// the thread count.
public func parallelFor(
    count: Int, threads: Int, order: [Int]? = nil, _ body: @escaping @Sendable (Int) throws -> Void
) throws {
    guard count > 0 else { return }
    let schedule = order ?? Array(0..<count)
    let lock = NSLock()
    nonisolated(unsafe) var next = 0
    nonisolated(unsafe) var errors: [Int: Error] = [:]
    let workers = max(1, min(threads, count))
    let work: @Sendable (Int) -> Void = { _ in
        while true {
            lock.lock()
            let k = next
            next += 1
            lock.unlock()
            guard k < schedule.count else { return }
            let i = schedule[k]
            do { try body(i) } catch {
                lock.lock()
                errors[i] = error
                lock.unlock()
            }
        }
    }
    if workers == 1 {
        work(0)
    } else {
        DispatchQueue.concurrentPerform(iterations: workers, execute: work)
    }
    if let first = errors.keys.min() { throw errors[first]! }
}

/// The elements made by `pieces` of work on at most `threads` threads, in piece order. Piece
/// `p` (one of contiguous ranges from 0, as ``chunks(_:pieces:)`` makes) emits at most
/// `pieces[p].count` elements, each written in place from the piece's first index on, in one
/// array for all; the pieces are then slid together, so that no element is copied from an array
/// of its own and the pages are first touched by the threads that fill them.
public func parallelFill<T>(
    pieces: [Range<Int>], threads: Int,
    _ body: @escaping @Sendable (_ piece: Int, _ emit: (consuming T) -> Void) -> Void
) -> [T] {
    let capacity = pieces.last?.upperBound ?? 0
    return [T](unsafeUninitializedCapacity: capacity) { buffer, initialized in
        nonisolated(unsafe) let out = buffer.baseAddress
        let made = ResultSlots<Int>(count: pieces.count)
        try? parallelFor(count: pieces.count, threads: threads) { p in
            let piece = pieces[p]
            var next = piece.lowerBound
            body(p) { element in
                precondition(next < piece.upperBound, "piece \(p) emitted more than its \(piece.count) elements")
                (out! + next).initialize(to: element)
                next += 1
            }
            made[p] = next - piece.lowerBound
        }
        var total = 0
        for (p, piece) in pieces.enumerated() {
            let n = made[p]!
            // Regions may overlap; the destination is never after the source.
            if n > 0 && piece.lowerBound != total {
                (out! + total).moveInitialize(from: out! + piece.lowerBound, count: n)
            }
            total += n
        }
        initialized = total
    }
}

/// Splits 0..<count into about `pieces` contiguous ranges.
public func chunks(_ count: Int, pieces: Int) -> [Range<Int>] {
    guard count > 0 else { return [] }
    let n = max(1, min(pieces, count))
    return (0..<n).map { k in (count * k / n)..<(count * (k + 1) / n) }
}

/// A place for each worker to store its result by index, written without locks.
// Each slot is written by one worker only, and read after every worker has finished. The
// slots are one allocation that never moves: an array would check that its buffer is unique
// on every write, and a write on another thread holding a reference to it at that moment
// made it copy the buffer, losing the other workers' results.
public final class ResultSlots<T>: @unchecked Sendable {
    private let items: UnsafeMutablePointer<T?>
    public let count: Int
    public init(count: Int) {
        self.count = count
        items = .allocate(capacity: Swift.max(count, 1))
        items.initialize(repeating: nil, count: count)
    }
    deinit {
        items.deinitialize(count: count)
        items.deallocate()
    }
    /// Each index must be written by one worker only.
    public subscript(i: Int) -> T? {
        get {
            precondition(i >= 0 && i < count, "result slot \(i) of \(count)")
            return items[i]
        }
        set {
            precondition(i >= 0 && i < count, "result slot \(i) of \(count)")
            items[i] = newValue
        }
    }
    public var all: [T] { (0..<count).map { items[$0]! } }
    /// Every result, moved out of its slot (which is left empty): the caller then holds the
    /// only reference to what a result holds, and changing it copies nothing.
    public func takeAll() -> [T] {
        (0..<count).map { i in
            defer { items[i] = nil }
            return items[i]!
        }
    }
}

/// Work started on another thread now, its result taken later (``get()`` waits for it): the
/// next piece read while this one is used.
public final class Ahead<T>: Sendable {
    private let slot = ResultSlots<Result<T, Error>>(count: 1)
    private let done = DispatchGroup()

    public init(_ body: @escaping @Sendable () throws -> T) {
        let slot = slot
        DispatchQueue.global().async(group: done) { slot[0] = Result { try body() } }
    }

    /// The result, once the work is done; what it threw, thrown again.
    public func get() throws -> T {
        done.wait()
        return try slot[0]!.get()
    }
}

/// `a` and `b`, each sorted by `before` (a strict order: no element of one equals one of the
/// other), merged into one sorted array on at most `threads` threads: the output is cut into
/// `threads * 4` pieces, each piece's start found in both inputs by a binary search (how many
/// of the first k outputs come from `a`), and each piece merged on its own.
public func parallelMerge<T: Sendable>(
    _ a: [T], _ b: [T], threads: Int, before: @escaping @Sendable (T, T) -> Bool
) -> [T] {
    let n = a.count + b.count
    guard !a.isEmpty, !b.isEmpty else { return a.isEmpty ? b : a }
    /// How many of the first `k` outputs come from `a`: the least i whose a[i] is not before
    /// b[k - i - 1], the last of `b` taken.
    @Sendable func fromA(_ k: Int) -> Int {
        var lo = Swift.max(0, k - b.count)
        var hi = Swift.min(k, a.count)
        while lo < hi {
            let i = (lo + hi) / 2
            if before(a[i], b[k - i - 1]) { lo = i + 1 } else { hi = i }
        }
        return lo
    }
    let pieces = chunks(n, pieces: Swift.max(1, threads) * 4)
    return parallelFill(pieces: pieces, threads: threads) { p, emit in
        let piece = pieces[p]
        var i = fromA(piece.lowerBound)
        var j = piece.lowerBound - i
        for _ in piece {
            if j == b.count || (i < a.count && before(a[i], b[j])) {
                emit(a[i])
                i += 1
            } else {
                emit(b[j])
                j += 1
            }
        }
    }
}
