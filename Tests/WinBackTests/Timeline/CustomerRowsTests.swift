import Testing

@testable import WinBack

/// Grouping rows by customer: customers in bytewise (group, originalTransactionId) order, each
/// customer's rows by (purchaseDate, transactionId).
@Suite struct CustomerRowsTests {
    @Test(arguments: [1, 3])
    func customersAreInBytewiseOrderWhateverTheirLengthAndPrefix(threads: Int) {
        let w = TestWorld()
        // Prefixes of each other, equal in their first 16 bytes, digits against letters,
        // and a group ordered before another only by its bytes.
        let ids = [
            "2", "10", "1", "1000000000000000", "10000000000000001", "10000000000000000", "100000000000000000a",
            "100000000000000000B", "a", "Z", "9999999999999999",
        ]
        var rows: [Transaction] = []
        for (i, id) in ids.enumerated().reversed() {
            for group in ["g2", "G1", "g10"] {
                rows.append(w.tx("2025-01-0\(1 + i % 5)", "2025-02-01", group: group, customer: id))
            }
        }
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
        let got = (0..<customers.count).map {
            (w.strings.string(customers.groups[$0]), w.strings.string(customers.originalTransactionIds[$0]))
        }
        let expected = ["G1", "g10", "g2"].flatMap { g in
            ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { (g, $0) }
        }
        #expect(got.map(\.0) == expected.map(\.0))
        #expect(got.map(\.1) == expected.map(\.1))
        for k in 0..<customers.count { #expect(customers.rows(of: k).count == 1) }
    }

    @Test func aCustomersRowsAreOrderedByPurchaseThenTransactionIdBytes() {
        let w = TestWorld()
        let rows = [
            w.tx("2025-03-01", "2025-04-01", id: "9"), w.tx("2025-01-01", "2025-02-01", id: "3"),
            w.tx("2025-03-01", "2025-04-01", id: "10"), w.tx("2025-02-01", "2025-03-01", id: "t"),
        ]
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 2)
        #expect(customers.count == 1)
        #expect(customers.rows(of: 0).map { w.strings.string($0.transactionId) } == ["3", "t", "10", "9"])
    }

    /// Sharded numbering and region-by-region placement give the same grouping whatever the
    /// thread count.
    @Test func theGroupingIsTheSameForAnyThreadCount() {
        let w = TestWorld()
        var rng = SplitMix64(seed: 11)
        var rows: [Transaction] = []
        for _ in 0..<3_000 {
            let day = 1 + rng.below(28)
            rows.append(
                w.tx(
                    "2025-0\(1 + rng.below(9))-\(day < 10 ? "0" : "")\(day)", "2025-12-01",
                    group: ["g1", "g2", "G"][rng.below(3)], customer: "c\(rng.below(400))"))
        }
        func snapshot(_ c: CustomerRows) -> [String] {
            (0..<c.count).map { k in
                "\(w.strings.string(c.groups[k])) \(w.strings.string(c.originalTransactionIds[k])): "
                    + c.rows(of: k).map { w.strings.string($0.transactionId) }.joined(separator: ",")
            }
        }
        let one = snapshot(CustomerRows.build(rows: rows, strings: w.strings, threads: 1))
        #expect(one.count > 1_000)
        for threads in [2, 3, 7] {
            #expect(snapshot(CustomerRows.build(rows: rows, strings: w.strings, threads: threads)) == one)
        }
    }
}
