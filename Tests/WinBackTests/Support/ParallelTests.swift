import Foundation
import Testing
import WinBackTestSupport

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
}
