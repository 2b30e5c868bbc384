import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Win-back rates, funnel and eligibility summary on a small world")
struct WinBackReportsTests {
    /// T = 2026-11-22T00:00, window of 3 complete months: 2026-08, 2026-09, 2026-10.
    static let asOf = "2026-11-22"

    /// Catalog order wb.b, wb.a, wb.c (wb.a ranks first on priority: rows must still follow
    /// the catalog).
    static let offers = [
        TestWorld.basicOffer(paid: 3, min: 2, max: 24, wait: nil, start: "2026-09-01", priority: .normal, id: "wb.b"),
        TestWorld.basicOffer(
            paid: 1, min: 1, max: 24, wait: 6, start: "2024-01-01", territories: ["USA", "CAN"], priority: .high,
            id: "wb.a"),
        TestWorld.basicOffer(
            paid: 1, min: 1, max: 60, wait: nil, start: "2025-01-01", end: "2025-12-31", priority: .normal, id: "wb.c"),
    ]

    /// Everyone in group g1 on product basic at 12:00 UTC unless said otherwise.
    static func world(_ w: TestWorld) -> [Transaction] {
        var rows: [Transaction] = []
        // P: paid 2026-01-01 … 05-01 (4 months), redeems wb.a on 09-10, then one paid month.
        rows += w.monthly(from: "2026-01-01T12:00:00Z", count: 4, customer: "P")
        rows.append(
            w.tx(
                "2026-09-10T12:00:00Z", "2026-10-10T12:00:00Z", customer: "P", free: true, offerType: 4, offerId: "wb.a"
            ))
        rows.append(w.tx("2026-10-10T12:00:00Z", "2026-11-10T12:00:00Z", customer: "P"))
        // Q: one paid month in July, redeems wb.a on 09-15 while not eligible (lapsed too recently).
        rows += w.monthly(from: "2026-07-01T12:00:00Z", count: 1, customer: "Q")
        rows.append(
            w.tx(
                "2026-09-15T12:00:00Z", "2026-10-15T12:00:00Z", customer: "Q", free: true, offerType: 4, offerId: "wb.a"
            ))
        // R: twelve paid months to 2026-01-01; never redeems.
        rows += w.monthly(from: "2025-01-01T12:00:00Z", count: 12, customer: "R")
        // S and S2: one paid month from 2026-08-15 (same history: one summary row of 2).
        rows += w.monthly(from: "2026-08-15T12:00:00Z", count: 1, customer: "S")
        rows += w.monthly(from: "2026-08-15T12:00:00Z", count: 1, customer: "S2")
        // U: three paid months to 2026-01-01, redeems wb.b (half price) on 10-05.
        rows += w.monthly(from: "2025-10-01T12:00:00Z", count: 3, customer: "U")
        rows.append(
            w.discount(
                w.tx("2026-10-05T12:00:00Z", "2026-11-05T12:00:00Z", customer: "U", offerType: 4, offerId: "wb.b"),
                "PAY_AS_YOU_GO"))
        // V: in Great Britain, five paid months to 2025-08-01: outside wb.a's territories.
        rows += w.monthly(from: "2025-03-01T12:00:00Z", count: 5, customer: "V", storefront: "GBR")
        // W: premium, three months to 2026-03-01: other product for every offer.
        rows += w.monthly(from: "2025-12-01T12:00:00Z", count: 3, product: "premium", customer: "W")
        // X: subscribed at T (active).
        rows += w.monthly(from: "2026-10-20T12:00:00Z", count: 2, customer: "X")
        // Y: expired 2026-10-01, in billing retry at T (renewal info below).
        rows += w.monthly(from: "2026-09-01T12:00:00Z", count: 1, customer: "Y")
        // L: three paid months in 2023: too long ago.
        rows += w.monthly(from: "2023-01-01T12:00:00Z", count: 3, customer: "L")
        // Z: another group, storefront Kosovo (not in ISO 3166): empty territory.
        rows += w.monthly(
            from: "2026-01-15T12:00:00Z", count: 2, product: "other", customer: "Z", group: "g2", storefront: "XKX")
        return rows
    }

    static func renewals(_ w: TestWorld) -> RenewalIndex {
        var r = RenewalIndex()
        r.add(
            originalTransactionId: w.key("Y"), RenewalInfo(signedDate: ms("2026-10-02"), isInBillingRetryPeriod: true))
        r.finish()
        return r
    }

    /// The world's reports, its rows in the order written, or shuffled by a seeded generator.
    static func reports(threads: Int = 1, shuffleSeed: UInt64? = nil) -> Reports {
        let w = TestWorld()
        var rows = world(w)
        if let shuffleSeed { rows = shuffled(rows, seed: shuffleSeed) }
        return computeReports(
            w, rows, offers: offers, asOf: asOf, windowMonths: 3, renewals: renewals(w), threads: threads)
    }

    /// A shard keeps each report's rows as a tally registered in ``ShardReports/tallies``: through
    /// its `reports.json` and back, they write every report file as the run's reports do (the
    /// disagreements and the page, which holds them, are merged from files of their own).
    @Test("a shard's tallies, through reports.json and back, write every report file as the run's reports do")
    func shardTalliesRoundTrip() throws {
        let r = Self.reports()
        let shard = ShardReports(r, droppedByApple: [0, 0, 0], heldOut: [0, 0, 0])
        let back = try JSONDecoder().decode(ShardReports.self, from: JSONEncoder().encode(shard))
        #expect(Set(back.reports.keys) == Set(ShardReports.tallies.map(\.key)))
        let original = ReportWriter(reports: r, title: "t").contents()
        let rebuilt = ReportWriter(reports: back.reports(window: r.window, experiment: r.experiment), title: "t")
            .contents()
        #expect(original.map(\.name) == rebuilt.map(\.name))
        for (a, b) in zip(original, rebuilt) where ![ReportWriter.page, "apple-disagreements.csv"].contains(a.name) {
            #expect(a.bytes == b.bytes, "\(a.name) written alike from the shard's tallies")
            #expect(a.rows == b.rows, "\(a.name)'s rows")
        }
        // Summed with itself, every count doubles; once more (the rows summed by key found
        // through the index the first sum made), it triples, the rows in the same order.
        var sum = back
        let added = sum.add(back)
        #expect(added)
        let twice = sum.reports(window: r.window, experiment: r.experiment)
        #expect(r.funnel.contains { $0.funnel.customersInGroup > 0 })
        #expect(twice.funnel.map(\.funnel.customersInGroup) == r.funnel.map { 2 * $0.funnel.customersInGroup })
        #expect(twice.summary.map(\.churned) == r.summary.map { 2 * $0.churned })
        let addedAgain = sum.add(back)
        #expect(addedAgain)
        let thrice = sum.reports(window: r.window, experiment: r.experiment)
        #expect(!r.summary.isEmpty)
        #expect(thrice.summary.map(\.churned) == r.summary.map { 3 * $0.churned })
        #expect(thrice.summary.map(\.key) == r.summary.map(\.key))
        #expect(thrice.redemptions.map(\.key) == r.redemptions.map(\.key))
    }

    /// `rows` in an order drawn from `seed`; the same every run.
    static func shuffled(_ rows: [Transaction], seed: UInt64) -> [Transaction] {
        var g = SplitMix64(seed: seed)
        return rows.shuffled(using: &g)
    }

    /// Eligible at each month's first instant (00:00 UTC, no renewal info):
    /// - 2026-08: wb.b and wb.c not live. wb.a: P (4 paid, 2 months since), R (12, 6), U (3, 6);
    ///   Q active, S/S2/X/Y not yet customers, V territory, W other product, L 39 months ago.
    /// - 2026-09: wb.b: P (3 months since), R, U, V (5 paid, 12 since); wb.a: P, R, U.
    ///   Q lapsed 08-01T12: 0 months since. S, S2 active. Redeemed wb.a: P (eligible) and Q (not).
    /// - 2026-10: P, Q, Y active; S, S2 0 months since. wb.b: R, U, V; wb.a: R, U.
    ///   U (eligible) redeemed wb.b.
    static let expectedRates = """
        month,offer_id,eligible_at_month_start,redeemed_by_eligible,redemption_rate,redeemed_total
        2026-08,wb.b,0,0,,0
        2026-08,wb.a,3,0,0.0000,0
        2026-08,wb.c,0,0,,0
        2026-09,wb.b,4,0,0.0000,0
        2026-09,wb.a,3,1,0.3333,2
        2026-09,wb.c,0,0,,0
        2026-10,wb.b,3,1,0.3333,1
        2026-10,wb.a,2,0,0.0000,0
        2026-10,wb.c,0,0,,0

        """

    /// At T: 11 customers in g1 (Z is in g2): X active, Y in billing retry, 9 churned:
    /// (paid months, months since) P (1, 0) after a new run; Q (1, 1); R (12, 10); S, S2 (1, 2);
    /// U (1, 0); V (5, 15, GBR); W (3, 8, premium); L (3, 43).
    /// - wb.b: paid < 3: P Q S S2 U; too recent (< 2): P Q U; too long ago: L; eligible R V.
    /// - wb.a: territory V; too recent (< 1): P U; wait 6 after wb.a ended 10-10/10-15: P Q;
    ///   too long ago L; eligible R S S2.
    /// - wb.c ended 2025-12-31: not live, eligible 0; too recent P U.
    static let expectedFunnel = """
        offer_id,live,customers_in_group,active,billing_retry,churned,other_product,territory,paid_duration,too_recent,too_long_ago,wait_between_offers,eligible
        wb.b,true,11,1,1,9,1,0,5,3,1,0,2
        wb.a,true,11,1,1,9,1,1,0,2,1,2,3
        wb.c,false,11,1,1,9,1,0,0,2,0,0,0

        """

    /// Churned at T: (group, product, paid months, months since, win-back?, months since it ended).
    /// U's wb.b ended 11-05 (0 months), P's wb.a 10-10 (1), Q's 10-15 (1). Tenure sorts as a
    /// number (12 after 5); S and S2 share a row; Z's XKX has no alpha-2.
    static let expectedSummary = """
        Subscription Group ID,Product ID,Paid Subscription Tenure,Time Since Last Subscribed,Has Previously Redeemed Win-Back Offer,Time Since Last Win-Back Offer,Territory,Churned Subscription Count
        g1,basic,1,0,Yes,0,US,1
        g1,basic,1,0,Yes,1,US,1
        g1,basic,1,1,Yes,1,US,1
        g1,basic,1,2,,,US,2
        g1,basic,3,43,,,US,1
        g1,basic,5,15,,,GB,1
        g1,basic,12,10,,,US,1
        g1,premium,3,8,,,US,1
        g2,other,2,8,,,,1

        """

    @Test("monthly rates: eligibility at each month's start, redemptions during the month")
    func redemptionRates() {
        #expect(text(RedemptionRatesReport.csv(Self.reports().rates)) == Self.expectedRates)
    }

    @Test("funnel: states add up to the group, each churned customer under every failed criterion")
    func funnel() {
        #expect(text(FunnelReport.csv(Self.reports().funnel)) == Self.expectedFunnel)
    }

    @Test("summary: churned customers in the shape of Apple's win-back eligibility report")
    func summary() {
        #expect(text(EligibilitySummaryReport.csv(Self.reports().summary)) == Self.expectedSummary)
    }

    @Test("the funnel's eligible counts are the segments' sizes")
    func funnelAgreesWithSegments() {
        let w = TestWorld()
        let customers = CustomerRows.build(rows: Self.world(w), strings: w.strings, threads: 1)
        let book = OfferBook(catalog: OfferCatalog(offers: Self.offers), ids: { w.strings.lookup($0) })
        let audience = Audience.evaluate(
            customers, book: book, renewals: Self.renewals(w), asOf: ms(Self.asOf), gapDays: 60, threads: 1)
        let segmentSizes = book.offers.indices.map { o in
            audience.results.filter { $0.eligible.contains(Int16(o)) }.count
        }
        #expect(segmentSizes == [2, 3, 0])
        #expect(audience.eligibleCounts == segmentSizes)
    }

    @Test(
        "every report file has the same bytes for 1, 2 and 4 threads and any input order",
        arguments: [(2, 1), (4, 2), (4, 3)] as [(Int, UInt64)])
    func deterministicBytes(threads: Int, seed: UInt64) {
        let w = TestWorld()
        let original = Self.world(w)
        let reordered = Self.shuffled(original, seed: seed)
        // The shuffle really reorders: the rows' transaction ids are not in their written order.
        #expect(reordered.map(\.transactionId) != original.map(\.transactionId))
        let one = ReportWriter(reports: Self.reports(threads: 1), title: "t").contents()
        let many = ReportWriter(reports: Self.reports(threads: threads, shuffleSeed: seed), title: "t").contents()
        #expect(one.map(\.name) == ReportWriter.files)
        #expect(one.map(\.bytes) == many.map(\.bytes))
        // And both are the expected report, worked out by hand above, not merely equal.
        let rates = many.first { $0.name == "winback-redemption-rates.csv" }.map { text($0.bytes) }
        #expect(rates == Self.expectedRates)
        let funnel = many.first { $0.name == "eligibility-funnel.csv" }.map { text($0.bytes) }
        #expect(funnel == Self.expectedFunnel)
    }

    @Test("summary rows sorted through integer ranks come out in the order of the row comparison")
    func summaryOrder() {
        var rng = SplitMix64(seed: 5)
        let strings = ["", "a", "B", "b", "ab", "a b", "10", "9", "é"]
        func pick() -> String { strings[rng.below(strings.count)] }
        var seen: Set<String> = []
        var rows: [EligibilitySummaryRow] = []
        for _ in 0..<3_000 {
            let winBack: Int64? = rng.below(3) == 0 ? nil : Int64(rng.below(4))
            let row = EligibilitySummaryRow(
                subscriptionGroupId: pick(), productId: pick(), paidTenure: Int64(rng.below(5)),
                monthsSinceLastSubscribed: Int64(rng.below(5)), hasRedeemedWinBack: winBack != nil,
                monthsSinceLastWinBack: winBack, territory: pick(), churned: 1)
            // Rows are unique in all their fields, as the report's are.
            let id =
                "\(row.subscriptionGroupId)|\(row.productId)|\(row.paidTenure)|\(row.monthsSinceLastSubscribed)|\(String(describing: winBack))|\(row.territory)"
            if seen.insert(id).inserted { rows.append(row) }
        }
        #expect(rows.count > 1_000)
        let expected = rows.sorted(by: EligibilitySummaryReport.less)
        let got = EligibilitySummaryReport.sorted(rows.shuffled(using: &rng))
        #expect(got.map { "\($0)" } == expected.map { "\($0)" })
    }

    @Test("summary rows made from a tally of interned ids come out in the order of the row comparison")
    func summaryRowsOrder() {
        var rng = SplitMix64(seed: 9)
        let table = StringTable()
        // Interned out of their text's order, so that an id's order is not its string's.
        let groups = ["g9", "g10", "G1", ""].map { table.intern($0) }
        let products = ["é", "b", "a b", "B", "ab"].map { table.intern($0) }
        let storefronts = ["USA", "FRA", "XKX", "ZZZ", "DEU", "usa"].map { table.intern($0) } + [-1]
        var tally: [EligibilitySummaryReport.Key: Int] = [:]
        for _ in 0..<3_000 {
            let winBack: Int64? = rng.below(3) == 0 ? nil : Int64(rng.below(4))
            let key = EligibilitySummaryReport.Key(
                group: groups[rng.below(groups.count)], product: products[rng.below(products.count)],
                paidMonths: Int64(rng.below(5)), monthsSince: Int64(rng.below(5)), monthsSinceWinBack: winBack,
                storefront: storefronts[rng.below(storefronts.count)])
            tally[key, default: 0] += 1
        }
        let rows = EligibilitySummaryReport.rows(tally, strings: table)
        #expect(rows.count > 1_000)
        #expect(rows.map { "\($0)" } == rows.sorted(by: EligibilitySummaryReport.less).map { "\($0)" })
        #expect(rows.reduce(0) { $0 + $1.churned } == 3_000)
    }

    @Test("a summary tally counts as a dictionary does: keys whose folded words are equal stay apart, tallies add")
    func summaryTallyCountsLikeADictionary() throws {
        var rng = SplitMix64(seed: 4)
        let table = StringTable()
        let groups = ["g1", "g2"].map { table.intern($0) }
        let storefronts = ["USA", "FRA", "DEU"].map { table.intern($0) }
        func key() -> EligibilitySummaryReport.Key {
            EligibilitySummaryReport.Key(
                group: groups[rng.below(2)], product: groups[rng.below(2)], paidMonths: Int64(rng.below(40)),
                monthsSince: Int64(rng.below(30)), monthsSinceWinBack: rng.below(3) == 0 ? nil : Int64(rng.below(5)),
                storefront: storefronts[rng.below(3)])
        }
        // Two keys with the same folded word: a win-back month equal to the word that stands for none.
        var a = key()
        a.monthsSinceWinBack = nil
        var b = a
        b.monthsSinceWinBack = Int64(bitPattern: 0xFFFF_0000_FFFF_0000)
        try #require(a.columnHash == b.columnHash && a != b)
        var expected: [EligibilitySummaryReport.Key: Int] = [a: 2, b: 1]
        var first = EligibilitySummaryReport.Tally()
        var second = EligibilitySummaryReport.Tally()
        first.add(a)
        second.add(b)
        second.add(a)
        for i in 0..<20_000 {
            let k = key()
            expected[k, default: 0] += 1
            if i % 3 == 0 { first.add(k) } else { second.add(k) }
        }
        first.add(second)
        let got = first.pairs
        #expect(Set(got.map(\.key)).count == got.count)
        #expect(Dictionary(uniqueKeysWithValues: got.map { ($0.key, $0.value) }) == expected)
        #expect(
            EligibilitySummaryReport.rows(first, strings: table).map { "\($0)" }
                == EligibilitySummaryReport.rows(expected, strings: table).map { "\($0)" })
    }

    @Test("summary keys that differ only in storefronts of no known territory are counted as one row")
    func summaryMergesUnknownTerritories() {
        let strings = StringTable()
        let g = strings.intern("g1")
        let p = strings.intern("basic")
        let q = strings.intern("premium")
        let usa = strings.intern("USA")
        let kosovo = strings.intern("XKX")
        let junk = strings.intern("ZZZ")
        func key(_ product: Int32, _ storefront: Int32, winBack: Int64? = nil) -> EligibilitySummaryReport.Key {
            .init(
                group: g, product: product, paidMonths: 3, monthsSince: 2, monthsSinceWinBack: winBack,
                storefront: storefront)
        }
        let tally: [EligibilitySummaryReport.Key: Int] = [
            key(p, usa): 5, key(p, kosovo): 2, key(p, junk): 3, key(p, -1): 7,
            key(q, kosovo): 1, key(p, junk, winBack: 1): 4,
        ]
        let rows = EligibilitySummaryReport.rows(tally, strings: strings)
        #expect(
            rows.map {
                "\($0.productId) \($0.territory) \($0.monthsSinceLastWinBack.map(String.init) ?? "-") \($0.churned)"
            } == [
                "basic  - 12", "basic US - 5", "basic  1 4", "premium  - 1",
            ])
    }
}
