import Foundation
import Testing
import WinBackTestSupport
import WinBackTesting

@testable import WinBackSupport

/// The thread pool and its result slots: every result kept, whatever the threads do at once.
@Suite("Parallel work: every iteration runs and every result is kept")
struct ParallelTests {
    @Test("workers writing their slots at once lose none of them", arguments: [2, 8])
    func slotsKeepEveryResult(threads: Int) throws {
        for round in 0..<20 {
            let n = 20_000
            let slots = ResultSlots<[Int]>(count: n)
            try parallelFor(count: n, threads: threads) { i in slots[i] = [i, round] }
            let all = slots.all
            #expect(all.count == n)
            #expect(all.enumerated().allSatisfy { $0.element == [$0.offset, round] })
        }
    }

    @Test("the error of the lowest index is thrown, after every iteration ran")
    func lowestErrorWins() {
        struct Failure: Error, Equatable { let index: Int }
        let ran = ResultSlots<Bool>(count: 100)
        #expect(throws: Failure(index: 17)) {
            try parallelFor(count: 100, threads: 4, order: Array((0..<100).reversed())) { i in
                ran[i] = true
                if i % 17 == 0 && i > 0 { throw Failure(index: i) }
            }
        }
        #expect(ran.all.allSatisfy { $0 })
    }

    /// Work started ahead runs on another thread while the caller goes on: here it waits until
    /// the caller has gone on (a semaphore the caller signals), which it could not do on the
    /// caller's thread; its result, or what it threw, comes out of `get()`.
    @Test("work started ahead runs beside the caller, and gives its result or its error")
    func aheadRunsBesideTheCaller() throws {
        struct Failure: Error, Equatable { let n: Int }
        let started = DispatchSemaphore(value: 0)
        let ahead = Ahead { () -> [Int] in
            started.wait()
            return [1, 2, 3]
        }
        started.signal()
        #expect(try ahead.get() == [1, 2, 3])
        #expect(try ahead.get() == [1, 2, 3])
        let failing = Ahead { () throws -> Int in throw Failure(n: 7) }
        #expect(throws: Failure(n: 7)) { try failing.get() }
        let many = (0..<50).map { i in Ahead { i * i } }
        #expect(try many.map { try $0.get() } == (0..<50).map { $0 * $0 })
    }

    @Test("results taken out of their slots are the only references to what they hold")
    func takenResultsAreUnique() throws {
        final class Box: Sendable {
            let n: Int
            init(_ n: Int) { self.n = n }
        }
        let slots = ResultSlots<Box>(count: 3)
        try parallelFor(count: 3, threads: 3) { i in slots[i] = Box(i) }
        var taken = slots.takeAll()
        #expect(taken.map(\.n) == [0, 1, 2])
        #expect((0..<3).allSatisfy { slots[$0] == nil })
        for i in taken.indices { #expect(isKnownUniquelyReferenced(&taken[i])) }
    }

    /// Two sorted arrays of distinct values merged on 1 to 8 threads give the sorted union:
    /// random splits of random values (one side empty, one side wholly before the other, one
    /// element, sides of very different sizes), and the pieces' starts found by binary search
    /// wherever they fall.
    @Test("two sorted arrays merged on threads give the sorted union", arguments: [1, 2, 3, 8])
    func mergingOnThreadsGivesTheSortedUnion(threads: Int) {
        var rng = SplitMix64(seed: UInt64(threads))
        var cases: [([Int], [Int])] = [([], []), ([], [1, 2]), ([3], []), ([1], [2]), ([2], [1])]
        cases.append((Array(0..<500), Array(500..<700)))
        cases.append((Array(500..<700), Array(0..<500)))
        for _ in 0..<40 {
            let n = Int(rng.next() % 3_000)
            let values = Array(Set((0..<n).map { _ in Int(rng.next() % 1_000_000) }))
            let share = rng.next() % 100
            var a: [Int] = []
            var b: [Int] = []
            for v in values { if rng.next() % 100 < share { a.append(v) } else { b.append(v) } }
            cases.append((a.sorted(), b.sorted()))
        }
        for (a, b) in cases {
            let merged = parallelMerge(a, b, threads: threads) { $0 < $1 }
            #expect(merged == (a + b).sorted(), "\(a.count) and \(b.count) on \(threads) threads")
        }
        // A strict order other than the values': descending.
        let desc = parallelMerge([9, 7, 3], [8, 4, 2, 1], threads: threads) { $0 > $1 }
        #expect(desc == [9, 8, 7, 4, 3, 2, 1])
    }
}
