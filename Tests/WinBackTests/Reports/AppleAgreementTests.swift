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

@Suite("Agreement with Apple's eligibleWinBackOfferIds (docs/rules.md §4.5)")
struct AppleAgreementTests {
    /// T; every renewal info below is signed at S = 2026-10-01T00:00 unless said otherwise.
    static let asOf = "2026-11-22"
    static let signed = "2026-10-01"

    /// Catalog order: wb.basic.1m.free (HIGH: ≥ 3 paid months, 2–24 months since, wait 6),
    /// wb.basic.half (NORMAL: ≥ 1, 1–36), wb.photo (another group).
    static let offers = [
        TestWorld.basicOffer(),
        TestWorld.basicOffer(
            paid: 1, min: 1, max: 36, wait: nil, start: nil, priority: .normal, id: "wb.basic.half"),
        Offer(
            offerId: "wb.photo", subscriptionGroupId: "g2", productId: "photo", paidMonths: 1, minMonthsSince: 1,
            maxMonthsSince: 36, waitMonths: nil, startDay: nil, endDay: nil, priority: .normal, territories: []),
    ]
    static let free = "wb.basic.1m.free"
    static let half = "wb.basic.half"

    /// One customer per cell, all of group g1 on product basic; names sort in this order.
    static func world(_ w: TestWorld) -> (rows: [Transaction], renewals: RenewalIndex) {
        var rows: [Transaction] = []
        var renewals = RenewalIndex()
        func apple(_ customer: String, _ ids: [String]?, signed: String = signed) {
            var info = RenewalInfo(signedDate: ms(signed))
            info.autoRenewStatus = 0
            info.eligibleWinBackOfferIds = ids
            renewals.add(originalTransactionId: w.key(customer), info)
        }
        // Six paid months to 2025-07-10: at S, 14 months since, eligible for both offers.
        func lapsed(_ customer: String) {
            rows += w.monthly(from: "2025-01-10T12:00:00Z", count: 6, customer: customer)
        }

        lapsed("c01-both")
        apple("c01-both", [free, half])
        // Two paid months to 2026-03-01: too short for wb.basic.1m.free.
        rows += w.monthly(from: "2026-01-01T12:00:00Z", count: 2, customer: "c02-apple-only")
        apple("c02-apple-only", [free, half])
        lapsed("c03-winback-only")
        apple("c03-winback-only", [half])
        lapsed("c04-unknown-id")
        apple("c04-unknown-id", [free, half, "wb.gone"])
        lapsed("c05-no-field")
        apple("c05-no-field", nil)
        // Subscribed at S (and at T): Apple lists nothing, and neither does winback.
        rows += w.monthly(from: "2026-09-01T12:00:00Z", count: 3, customer: "c06-empty-list")
        apple("c06-empty-list", [])
        // Came back on 2026-10-15, after S: at T too recent for either offer, at S eligible for both.
        lapsed("c07-purchase-after-s")
        rows.append(w.tx("2026-10-15T12:00:00Z", "2026-11-15T12:00:00Z", customer: "c07-purchase-after-s"))
        apple("c07-purchase-after-s", [free, half])
        // Three paid months in 2025, the third refunded on 2026-10-15, after S: paid 3 at S, 2 at T.
        rows += w.monthly(from: "2025-01-10T12:00:00Z", count: 2, customer: "c08-refund-after-s")
        rows.append(
            w.tx(
                "2025-03-10T12:00:00Z", "2025-04-10T12:00:00Z", customer: "c08-refund-after-s",
                revoked: "2026-10-15T00:00:00Z"))
        apple("c08-refund-after-s", [free, half])
        // The same sets, listed in another order than winback ranks them.
        lapsed("c09-order")
        apple("c09-order", [half, free])
        // Apple lists an offer of another group.
        rows += w.monthly(from: "2026-01-01T12:00:00Z", count: 2, customer: "c10-other-group")
        apple("c10-other-group", [half, "wb.photo"])
        // Renewal info signed before the first purchase: not a subscriber at S.
        lapsed("c11-not-yet")
        apple("c11-not-yet", [free], signed: "2024-12-01")
        renewals.finish()
        return (rows, renewals)
    }

    static func agreement(threads: Int = 1) -> (AppleAgreement, Audience, CustomerRows) {
        let w = TestWorld()
        let (rows, renewals) = world(w)
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
        let book = OfferBook(catalog: OfferCatalog(offers: offers), ids: { w.strings.lookup($0) })
        let (audience, reports) = Reports.evaluate(
            customers, book: book, renewals: renewals, asOf: ms(asOf),
            settings: Reports.Settings(windowMonths: 12, gapDays: 60), threads: threads)
        return (reports.apple, audience, customers)
    }

    @Test("apple-agreement.csv: per offer, unknown ids, then the row over customers")
    func agreementCSV() {
        let (a, _, _) = Self.agreement()
        #expect(
            text(AppleAgreementReport.csv(a)) == """
                offer_id,compared,both,apple_only,winback_only,agreement_rate,top_agreement
                wb.basic.1m.free,10,5,2,1,0.7000,
                wb.basic.half,10,8,0,0,1.0000,
                wb.photo,0,0,0,0,,
                wb.gone,,,1,,,
                *,10,5,4,1,0.5000,5

                """)
    }

    @Test("apple-disagreements.csv: one row per offer in one set only, with winback's reasons at S")
    func disagreementsCSV() {
        let (a, _, _) = Self.agreement()
        #expect(
            text(AppleAgreementReport.disagreementsCSV(a)) == """
                subscription_group_id,original_transaction_id,app_account_token,offer_id,apple,winback,renewal_signed_date,reasons
                g1,c02-apple-only,,wb.basic.1m.free,eligible,not,2026-10-01T00:00:00.000Z,paid_duration
                g1,c03-winback-only,,wb.basic.1m.free,not,eligible,2026-10-01T00:00:00.000Z,
                g1,c04-unknown-id,,wb.gone,eligible,not,2026-10-01T00:00:00.000Z,
                g1,c10-other-group,,wb.photo,eligible,not,2026-10-01T00:00:00.000Z,other_product
                g1,c11-not-yet,,wb.basic.1m.free,eligible,not,2024-12-01T00:00:00.000Z,not_subscriber

                """)
    }

    /// The comparison of one customer of the world, by name.
    func comparison(_ name: String) throws -> AppleComparison {
        let w = TestWorld()
        let (rows, renewals) = Self.world(w)
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        let book = OfferBook(catalog: OfferCatalog(offers: Self.offers), ids: { w.strings.lookup($0) })
        let k = try #require(
            (0..<customers.count).first { w.strings.string(customers.originalTransactionIds[$0]) == name })
        let renewal = try #require(renewals.known(at: ms(Self.asOf), originalTransactionId: w.key(name)))
        var periods: [Period] = []
        return try #require(
            AppleComparison.compare(
                rows: customers.rows(of: k), group: customers.groups[k], renewal: renewal, book: book, gapDays: 60,
                periods: &periods))
    }

    @Test("each cell, customer by customer")
    func cells() throws {
        let both = try comparison("c01-both")
        #expect(both.agrees && both.winback == [0, 1] && both.appleOffers == [0, 1])
        #expect(both.topAgrees(OfferBook(catalog: OfferCatalog(offers: Self.offers), ids: { _ in nil })))

        let appleOnly = try comparison("c02-apple-only")
        #expect(appleOnly.appleOnly && !appleOnly.winbackOnly)
        #expect(appleOnly.disagreements.map(\.reasons) == [.paidDuration])

        let winbackOnly = try comparison("c03-winback-only")
        #expect(winbackOnly.winbackOnly && !winbackOnly.appleOnly)

        let unknown = try comparison("c04-unknown-id")
        #expect(unknown.unknownIds == ["wb.gone"])
        #expect(unknown.disagreements.map(\.offer) == [nil])

        let empty = try comparison("c06-empty-list")
        #expect(empty.agrees && empty.appleIds == [] && empty.winback == [])
        #expect(empty.timeline?.state == .active)

        let notYet = try comparison("c11-not-yet")
        #expect(notYet.timeline == nil)
        #expect(notYet.disagreements.map(\.reasons) == [.notSubscriber])
    }

    @Test("a field that is absent is not compared; an empty list is")
    func absentField() throws {
        let w = TestWorld()
        let (rows, renewals) = Self.world(w)
        let info = try #require(renewals.known(at: ms(Self.asOf), originalTransactionId: w.key("c05-no-field")))
        var periods: [Period] = []
        #expect(
            AppleComparison.compare(
                rows: w.ordered(rows.filter { $0.originalTransactionId == w.key("c05-no-field") }), group: w.id("g1"),
                renewal: info,
                book: OfferBook(catalog: OfferCatalog(offers: Self.offers), ids: { w.strings.lookup($0) }),
                gapDays: 60, periods: &periods) == nil)
        #expect(try comparison("c06-empty-list").agrees)
    }

    @Test("S before a purchase, and before a refund, known only at T: the customer is as they were at S")
    func evaluatedAtS() throws {
        let w = TestWorld()
        let (rows, _) = Self.world(w)
        func eligibleAtT(_ name: String) -> Reasons? {
            w.failures(Self.offers[0], rows.filter { $0.originalTransactionId == w.key(name) }, at: Self.asOf)
        }
        // At T, neither is eligible for wb.basic.1m.free ...
        // (c07's come-back starts a new run of one paid month.)
        #expect(eligibleAtT("c07-purchase-after-s") == [.paidDuration, .tooRecent])
        #expect(eligibleAtT("c08-refund-after-s") == [.paidDuration])
        // ... but at S both were, as Apple says.
        for name in ["c07-purchase-after-s", "c08-refund-after-s"] {
            let c = try comparison(name)
            #expect(c.agrees, "\(name)")
            #expect(c.winback == [0, 1], "\(name)")
        }
        #expect(try comparison("c08-refund-after-s").timeline?.paidMonths == 3)
    }

    @Test("top_agreement compares Apple's first id with winback's rank-1 offer, not the sets")
    func firstListedAgainstRankOne() throws {
        let book = OfferBook(catalog: OfferCatalog(offers: Self.offers), ids: { _ in nil })
        let order = try comparison("c09-order")
        #expect(order.agrees)
        #expect(order.appleIds.first == Self.half && order.winback.first == 0)
        #expect(!order.topAgrees(book))
        // The sets differ, but Apple's first id is winback's best offer.
        #expect(try comparison("c10-other-group").topAgrees(book))
        #expect(try !comparison("c03-winback-only").topAgrees(book))
    }

    @Test("the segments' apple_eligible: yes, no, or empty where Apple said nothing, per rank")
    func segmentMarks() {
        let (_, audience, customers) = Self.agreement()
        func marks(_ name: String) -> [AppleEligible] {
            guard
                let r = audience.results.first(where: {
                    customers.strings.string(customers.originalTransactionIds[Int($0.customer)]) == name
                })
            else { return [] }
            return r.eligible.indices.map { r.apple(rank: $0 + 1) }
        }
        #expect(marks("c01-both") == [.yes, .yes])
        #expect(marks("c03-winback-only") == [.no, .yes])
        #expect(marks("c05-no-field") == [.silent, .silent])
        #expect(marks("c08-refund-after-s") == [.yes])  // half only at T
        #expect(marks("c09-order") == [.yes, .yes])
    }

    @Test("the same files for one, two and three threads", arguments: [2, 3])
    func deterministic(threads: Int) {
        let one = Self.agreement(threads: 1).0
        let many = Self.agreement(threads: threads).0
        #expect(AppleAgreementReport.csv(one) == AppleAgreementReport.csv(many))
        #expect(AppleAgreementReport.disagreementsCSV(one) == AppleAgreementReport.disagreementsCSV(many))
    }

    @Test("an offer is live or not on the date of S, not of T")
    func livenessAtS() throws {
        let w = TestWorld()
        let rows = w.ordered(w.monthly(from: "2025-01-10T12:00:00Z", count: 6, customer: "c"))
        let ended = TestWorld.basicOffer(end: "2026-10-15", id: "wb.ended")
        let book = OfferBook(catalog: OfferCatalog(offers: [ended]), ids: { w.strings.lookup($0) })
        var info = RenewalInfo(signedDate: ms("2026-10-01"))
        info.eligibleWinBackOfferIds = ["wb.ended"]
        var periods: [Period] = []
        let c = try #require(
            AppleComparison.compare(
                rows: rows, group: w.id("g1"), renewal: info, book: book, gapDays: 60, periods: &periods))
        #expect(c.agrees && c.winback == [0])
        // At T the offer has ended.
        #expect(w.failures(ended, rows, at: Self.asOf) == [.offerNotLive])
    }

    @Test("ranks past the 64th eligible offer keep their own mark")
    func manyOffers() {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-10T12:00:00Z", count: 6, customer: "c")
        let catalog = (0..<70).map {
            TestWorld.basicOffer(paid: 1, min: 1, max: 36, wait: nil, start: nil, id: "wb.o\($0)")
        }
        var info = RenewalInfo(signedDate: ms("2026-10-01"))
        info.eligibleWinBackOfferIds = ["wb.o2", "wb.o66"]
        var renewals = RenewalIndex()
        renewals.add(originalTransactionId: w.key("c"), info)
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        let book = OfferBook(catalog: OfferCatalog(offers: catalog), ids: { w.strings.lookup($0) })
        let audience = Audience.evaluate(
            customers, book: book, renewals: renewals, asOf: ms(Self.asOf), gapDays: 60, threads: 1)
        let r = audience.results[0]
        #expect(r.eligible.count == 70)
        let yes = r.eligible.indices.filter { r.apple(rank: $0 + 1) == .yes }
        #expect(yes == [2, 66])
    }
}
