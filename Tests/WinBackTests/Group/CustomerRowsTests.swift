import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// Grouping rows by customer: customers in bytewise (group, originalTransactionId) order, each
/// customer's rows by (purchaseDate, transactionId).
@Suite struct CustomerRowsTests {
    @Test(arguments: [1, 2, 3])
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

    @Test(arguments: [1, 2, 3])
    func customersWhoseKeysCollideAcrossGroupsStayApart(threads: Int) throws {
        let w = TestWorld()
        // Two groups 13 ids apart and two decimal ids chosen so that their folded keys are
        // equal: the map matches them, and the check of group and id keeps them apart, within
        // a part of the rows (one per thread) and when the parts' customers are numbered among
        // all (with two threads, the second part meets b before a).
        let ga = w.id("ga")
        while w.strings.count < Int(ga) + 13 { _ = w.id("filler\(w.strings.count)") }
        let gb = w.id("gb")
        try #require(gb == ga + 13)
        let (a, b) = ("700000000000000000", "64659938474832623")
        try #require(
            CustomerRows.folded(group: ga, original: w.key(a)) == CustomerRows.folded(group: gb, original: w.key(b)))
        let rows = [
            w.tx("2025-01-01", "2025-02-01", group: "ga", customer: a),
            w.tx("2025-01-01", "2025-02-01", group: "gb", customer: b),
            w.tx("2025-02-01", "2025-03-01", group: "gb", customer: b),
            w.tx("2025-02-01", "2025-03-01", group: "ga", customer: a),
            w.tx("2025-03-01", "2025-04-01", group: "gb", customer: b),
        ]
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
        #expect(customers.count == 2)
        #expect(customers.groups == [ga, gb])
        #expect(customers.originalTransactionIds.map { w.strings.string($0) } == [a, b])
        #expect(customers.rows(of: 0).map(\.originalTransactionId) == [w.key(a), w.key(a)])
        #expect(customers.rows(of: 1).map(\.originalTransactionId) == [w.key(b), w.key(b), w.key(b)])
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

    /// Sharded numbering and region-by-region placement (buckets of customers, then rows)
    /// give the grouping worked out directly, whatever the thread count.
    /// The same grouping on any number of threads: customers of three groups (one ordered
    /// before the others only by its bytes), and of forty, more than are looked for without a
    /// set (``CustomerRows/distinct(_:)``).
    @Test(arguments: [
        (groups: 3, customers: 2_000, rows: 12_000, atLeast: 5_000),
        (groups: 40, customers: 300, rows: 6_000, atLeast: 4_000),
    ])
    func theGroupingIsTheSameForAnyThreadCount(of world: (groups: Int, customers: Int, rows: Int, atLeast: Int)) {
        let w = TestWorld()
        let names = world.groups == 3 ? ["g1", "g2", "G"] : (0..<world.groups).map { "group-\($0)" }
        var rng = SplitMix64(seed: world.groups == 3 ? 11 : 17)
        var rows: [Transaction] = []
        for _ in 0..<world.rows {
            let day = 1 + rng.below(28)
            rows.append(
                w.tx(
                    "2025-0\(1 + rng.below(9))-\(day < 10 ? "0" : "")\(day)", "2025-12-01",
                    group: names[rng.below(names.count)], customer: "c\(rng.below(world.customers))"))
        }
        let expected = Self.grouped(rows, w)
        #expect(expected.count > world.atLeast)
        for threads in [1, 2, 3, 7] {
            #expect(Self.snapshot(CustomerRows.build(rows: rows, strings: w.strings, threads: threads), w) == expected)
        }
    }

    /// The groups a grouping orders by are found without a set while there are at most
    /// sixteen, with one past that: either way each once, whatever their order and repeats.
    @Test(arguments: [0, 1, 2, 15, 16, 17, 40])
    func theDistinctGroupsAreEachOnce(count: Int) {
        var rng = SplitMix64(seed: UInt64(count) + 3)
        let values = (0..<count).map { Int32($0 * 7 + 1) }
        var groups = values + values.reversed()
        for _ in 0..<3_000 where count > 0 { groups.append(values[rng.below(count)]) }
        for i in groups.indices.reversed() { groups.swapAt(i, rng.below(i + 1)) }
        let found = CustomerRows.distinct(groups)
        #expect(found.count == count)
        #expect(Set(found) == Set(values))
    }

    /// A bucket of more rows than are copied out to be placed (two customers', here, their rows
    /// mixed) is placed by following its cycles, beside buckets that are copied: the same
    /// grouping. On one thread the two customers share a bucket (of two customers, the region
    /// holding 602); on two, each is a region's bucket of its own, larger than the copy too.
    @Test(arguments: [1, 2])
    func aBucketTooLargeToCopyIsPlacedAlongItsCycles(threads: Int) {
        let w = TestWorld()
        var rng = SplitMix64(seed: 5)
        var rows: [Transaction] = []
        let big = CustomerRows.copyLimit + 1_500
        for k in 0..<(big + 3_000) {
            let day = 1 + rng.below(28)
            let customer = k < big ? "b\(k % 2)" : "c\(rng.below(600))"
            rows.append(
                w.tx(
                    "2025-0\(1 + rng.below(9))-\(day < 10 ? "0" : "")\(day)", "2025-12-01", group: "g",
                    customer: customer, id: "t\(k)"))
        }
        for i in rows.indices.reversed() { rows.swapAt(i, rng.below(i + 1)) }
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
        #expect(customers.rows(of: 0).count + customers.rows(of: 1).count == big)
        #expect(Self.snapshot(customers, w) == Self.grouped(rows, w))
    }

    private static func snapshot(_ c: CustomerRows, _ w: TestWorld) -> [String] {
        (0..<c.count).map { k in
            "\(w.strings.string(c.groups[k])) \(w.strings.string(c.originalTransactionIds[k])): "
                + c.rows(of: k).map { w.strings.string($0.transactionId) }.joined(separator: ",")
        }
    }

    /// Customers bytewise by (group, id); a customer's rows by (purchaseDate, transactionId).
    private static func grouped(_ rows: [Transaction], _ w: TestWorld) -> [String] {
        let byCustomer = Dictionary(grouping: rows) {
            [w.strings.string($0.subscriptionGroupId), w.strings.string($0.originalTransactionId)]
        }
        return byCustomer.keys.sorted {
            $0.lexicographicallyPrecedes($1) { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        }
        .map { key in
            "\(key[0]) \(key[1]): "
                + byCustomer[key]!.map { ($0.purchaseDate, w.strings.string($0.transactionId)) }
                .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : Array($0.1.utf8).lexicographicallyPrecedes(Array($1.1.utf8)) }
                .map(\.1).joined(separator: ",")
        }
    }
}
