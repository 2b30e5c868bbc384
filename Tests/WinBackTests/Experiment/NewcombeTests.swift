import Foundation
import Testing

@testable import WinBackRules

@Suite("Wilson's and Newcombe's intervals of a holdout experiment")
struct NewcombeTests {
    /// Newcombe (1998), "Interval estimation for the difference between independent
    /// proportions: comparison of eleven methods", Statistics in Medicine 17, Table II, method 10
    /// (the hybrid score interval), to its four decimals.
    @Test(
        "Newcombe's worked examples: the difference and its 95 % interval",
        arguments: [
            (56, 70, 48, 80, 0.0524, 0.3339),
            (9, 10, 3, 10, 0.1705, 0.8090),
            (5, 56, 0, 29, -0.0381, 0.1926),
            (0, 10, 0, 20, -0.1611, 0.2775),
            (0, 10, 0, 10, -0.2775, 0.2775),
            (10, 10, 0, 20, 0.6791, 1.0000),
            (10, 10, 0, 10, 0.6075, 1.0000),
        ])
    func publishedValues(x1: Int, n1: Int, x0: Int, n0: Int, low: Double, high: Double) throws {
        let r = try #require(Newcombe.difference(x1, of: n1, less: x0, of: n0))
        #expect(abs(r.lift - (Double(x1) / Double(n1) - Double(x0) / Double(n0))) < 1e-12)
        #expect((r.low * 10_000).rounded() / 10_000 == low)
        #expect((r.high * 10_000).rounded() / 10_000 == high)
    }

    @Test("Wilson's interval: 0 of n starts at 0, n of n ends at 1, and it holds the proportion")
    func wilsonBounds() throws {
        let none = try #require(Newcombe.wilson(0, of: 20))
        #expect(abs(none.low) < 1e-12 && none.high > 0 && none.high < 0.2)
        let all = try #require(Newcombe.wilson(20, of: 20))
        #expect(abs(all.high - 1) < 1e-12 && all.low > 0.8 && all.low < 1)
        for (x, n) in [(1, 3), (7, 9), (50, 100), (1, 1000)] {
            let w = try #require(Newcombe.wilson(x, of: n))
            let p = Double(x) / Double(n)
            #expect(w.low < p && p < w.high && w.low >= 0 && w.high <= 1)
        }
    }

    @Test("an arm with nobody gives no interval; impossible counts neither")
    func degenerate() {
        #expect(Newcombe.difference(3, of: 10, less: 0, of: 0) == nil)
        #expect(Newcombe.difference(0, of: 0, less: 1, of: 4) == nil)
        #expect(Newcombe.wilson(0, of: 0) == nil)
        #expect(Newcombe.wilson(5, of: 4) == nil)
        #expect(Newcombe.wilson(-1, of: 4) == nil)
    }
}
