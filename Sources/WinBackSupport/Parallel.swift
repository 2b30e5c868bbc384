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
