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
// Each slot is written by one worker only, and read after every worker has finished.
public final class ResultSlots<T>: @unchecked Sendable {
    @exclusivity(unchecked) private var items: [T?]
    public init(count: Int) { items = Array(repeating: nil, count: count) }
    /// Each index must be written by one worker only.
    public subscript(i: Int) -> T? {
        get { items.withUnsafeBufferPointer { $0[i] } }
        set { items.withUnsafeMutableBufferPointer { $0[i] = newValue } }
    }
    public var all: [T] { items.map { $0! } }
}
