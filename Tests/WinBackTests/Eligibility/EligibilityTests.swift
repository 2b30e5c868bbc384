import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Eligibility (docs/rules.md §3 rules 8–10)")
struct EligibilityTests {
    /// Apple's walk-through (all at 12:00 UTC): Premium 2025-01-01 and 02-01, Basic 03-01 and
    /// 04-01 (expires 05-01, then cancelled).
    func appleHistory(_ w: TestWorld) -> [Transaction] {
        w.monthly(from: "2025-01-01T12:00:00Z", count: 2, product: "premium")
            + w.monthly(from: "2025-03-01T12:00:00Z", count: 2, product: "basic")
    }

    @Test("Apple's walk-through: not eligible on 2025-06-30, eligible on 2025-07-01")
    func appleFirstChurn() throws {
        let w = TestWorld()
        let rows = appleHistory(w)
        let offer = TestWorld.basicOffer()
        #expect(w.failures(offer, rows, at: "2025-06-30T12:00:00Z") == [.tooRecent])
        let tl = try #require(w.timeline(rows, at: "2025-07-01T12:00:00Z"))
        #expect(tl.paidMonths == 4)
        #expect(tl.monthsSinceLastSubscribed == 2)
        #expect(w.failures(offer, rows, at: "2025-07-01T12:00:00Z") == [])
    }

    @Test("Apple's walk-through: after redeeming, the wait and the new run decide")
    func appleAfterRedemption() throws {
        let w = TestWorld()
        var rows = appleHistory(w)
        rows.append(
            w.tx("2025-07-01T12:00:00Z", "2025-08-01T12:00:00Z", free: true, offerType: 4, offerId: "wb.basic.1m.free"))
        rows += w.monthly(from: "2025-08-01T12:00:00Z", count: 3)  // expires 2025-11-01
        let offer = TestWorld.basicOffer()
        // 2 months since the last subscription, but only 5 since the offer ended.
        #expect(w.failures(offer, rows, at: "2026-01-01T12:00:00Z") == [.waitBetweenOffers])
        let tl = try #require(w.timeline(rows, at: "2026-02-01T12:00:00Z"))
        #expect(tl.paidMonths == 3)  // the 61-day gap before July started a new run
        #expect(tl.paidRunStart == ms("2025-08-01T12:00:00Z"))
        #expect(tl.monthsSinceLastSubscribed == 3)
        #expect(w.failures(offer, rows, at: "2026-02-01T12:00:00Z") == [])
    }

    @Test("paid duration: exactly the minimum is enough, one month less is not", arguments: [3, 4])
    func paidDurationBoundary(required: Int) {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        let r = w.failures(TestWorld.basicOffer(paid: required), rows, at: "2025-07-01T12:00:00Z")
        #expect(r == (required <= 3 ? [] : [.paidDuration]))
    }

    @Test(
        "time since last subscribed: both bounds are inclusive",
        arguments: [
            // (as-of, expected): E = 2025-04-01T12:00, offer 2–5 months.
            ("2025-06-01T11:59:59.999Z", Reasons.tooRecent),
            ("2025-06-01T12:00:00Z", []),
            ("2025-09-01T12:00:00Z", []),
            ("2025-10-01T11:59:59.999Z", []),
            ("2025-10-01T12:00:00Z", Reasons.tooLongAgo),
        ] as [(String, Reasons)])
    func timeSinceBounds(at: String, expected: Reasons) {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        #expect(w.failures(TestWorld.basicOffer(min: 2, max: 5), rows, at: at) == expected)
    }

    @Test("wait between offers: exactly the wait is enough; none without an earlier redemption")
    func waitBoundary() {
        let w = TestWorld()
        var rows = w.monthly(from: "2024-01-01T12:00:00Z", count: 6)
        rows.append(
            w.tx("2024-09-01T12:00:00Z", "2024-10-01T12:00:00Z", free: true, offerType: 4, offerId: "wb.basic.1m.free"))
        rows += w.monthly(from: "2024-10-01T12:00:00Z", count: 3)  // ends 2025-01-01T12:00
        let offer = TestWorld.basicOffer(paid: 1, wait: 6)
        // Offer ended 2024-10-01T12:00; six whole months later is 2025-04-01T12:00.
        #expect(w.failures(offer, rows, at: "2025-04-01T11:59:59Z") == [.waitBetweenOffers])
        #expect(w.failures(offer, rows, at: "2025-04-01T12:00:00Z") == [])
        #expect(w.failures(TestWorld.basicOffer(paid: 1, wait: nil), rows, at: "2025-03-01T12:00:00Z") == [])
        // Another offer's redemption does not make this one wait.
        let other = TestWorld.basicOffer(paid: 1, wait: 24, id: "wb.other")
        #expect(w.failures(other, rows, at: "2025-03-01T12:00:00Z") == [])
    }

    @Test("territory: an empty list allows all; otherwise the storefront must be listed")
    func territory() {
        let w = TestWorld()
        let usa = w.monthly(from: "2025-01-01T12:00:00Z", count: 3, storefront: "USA")
        let none = w.monthly(from: "2025-01-01T12:00:00Z", count: 3, customer: "c2", storefront: nil)
        let at = "2025-07-01T12:00:00Z"
        #expect(w.failures(TestWorld.basicOffer(territories: ["USA", "CAN"]), usa, at: at) == [])
        #expect(w.failures(TestWorld.basicOffer(territories: ["CAN"]), usa, at: at) == [.territory])
        #expect(w.failures(TestWorld.basicOffer(territories: ["CAN"]), none, at: at) == [.territory])
        #expect(w.failures(TestWorld.basicOffer(territories: []), none, at: at) == [])
    }

    @Test("offer dates: live from startDate through endDate, inclusive, by UTC day")
    func offerDates() {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        let offer = TestWorld.basicOffer(start: "2025-07-01", end: "2025-07-31")
        #expect(w.failures(offer, rows, at: "2025-06-30T23:59:59Z") == [.offerNotLive])
        #expect(w.failures(offer, rows, at: "2025-07-01T00:00:00Z") == [])
        #expect(w.failures(offer, rows, at: "2025-07-31T23:59:59Z") == [])
        #expect(w.failures(offer, rows, at: "2025-08-01T00:00:00Z") == [.offerNotLive])
    }

    @Test("active and billing-retry customers and other products fail with every reason listed")
    func stateAndProductReasons() {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3, product: "premium")
        let offer = TestWorld.basicOffer()
        // The running period counts in full: 3 paid months already.
        #expect(w.failures(offer, rows, at: "2025-03-15") == [.active, .otherProduct, .tooRecent])
        let retry = RenewalInfo(signedDate: ms("2025-04-01T12:00:00Z"), isInBillingRetryPeriod: true)
        #expect(
            w.failures(offer, rows, at: "2025-04-15", renewal: retry) == [.billingRetry, .otherProduct, .tooRecent])
    }

    @Test("ranking: HIGH priority first, then catalog order")
    func ranking() throws {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        let catalog = OfferCatalog(offers: [
            TestWorld.basicOffer(wait: nil, priority: .normal, id: "n1"),
            TestWorld.basicOffer(wait: nil, priority: .high, id: "h1"),
            TestWorld.basicOffer(wait: nil, priority: .normal, id: "n2"),
            TestWorld.basicOffer(paid: 12, wait: nil, priority: .high, id: "h2"),  // not eligible
            TestWorld.basicOffer(wait: nil, priority: .high, id: "h3"),
        ])
        let book = OfferBook(catalog: catalog, ids: { w.strings.lookup($0) })
        let tl = try #require(w.timeline(rows, at: "2025-07-01T12:00:00Z"))
        var out: [Int] = []
        book.evaluate(group: w.id("g1"), tl, asOf: ms("2025-07-01T12:00:00Z")) { _, i, failed in
            if failed.isEmpty { out.append(i) }
        }
        #expect(out.map { catalog.offers[$0].offerId } == ["h1", "h3", "n1", "n2"])
    }

    @Test("each group's ranked offers, read in place, are rankedByGroup's; a group without offers has none")
    func rankedInPlace() {
        let w = TestWorld()
        let (g1, g2) = (w.id("g1"), w.id("g2"))
        var other = TestWorld.basicOffer(wait: nil, priority: .high, id: "o1")
        other.subscriptionGroupId = "g2"
        let catalog = OfferCatalog(offers: [
            TestWorld.basicOffer(wait: nil, priority: .normal, id: "n1"), other,
            TestWorld.basicOffer(wait: nil, priority: .high, id: "h1"),
        ])
        let book = OfferBook(catalog: catalog, ids: { w.strings.lookup($0) })
        #expect(book.rankedByGroup.count == 2)
        for (group, ranked) in book.rankedByGroup { #expect(book.withRanked(group) { Array($0) } == ranked) }
        #expect(book.withRanked(g1) { Array($0) } == [2, 0])
        #expect(book.withRanked(g2) { Array($0) } == [1])
        #expect(book.withRanked(-7) { $0.isEmpty })
    }

    @Test("an offer whose group or product no row mentions matches nobody")
    func unknownGroup() throws {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        var offer = TestWorld.basicOffer()
        offer.productId = "never.seen"
        #expect(w.failures(offer, rows, at: "2025-07-01T12:00:00Z") == [.otherProduct])
    }
}
