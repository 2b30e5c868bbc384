import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("redemptions-by-offer-type.csv on a small world")
struct RedemptionReportTests {
    /// T = 2026-11-22, 12 months: redemptions count from 2025-11-01T00:00 up to T; gap 60 days.
    static let asOf = "2026-11-22"

    /// One customer per letter; each comment gives the outcome worked out from docs/rules.md §4.3.
    static func world(_ w: TestWorld) -> [Transaction] {
        func payg(_ p: String, _ e: String, _ c: String, _ type: String = "PAY_AS_YOU_GO") -> Transaction {
            w.discount(w.tx(p, e, customer: c, offerType: 2, offerId: "promo.half"), type)
        }
        return [
            // a: intro trial, then paid from the day it ends: converted.
            w.tx("2026-01-01T12:00:00Z", "2026-01-08T12:00:00Z", customer: "a", free: true, offerType: 1),
            w.tx("2026-01-08T12:00:00Z", "2026-02-08T12:00:00Z", customer: "a"),
            w.tx("2026-02-08T12:00:00Z", "2026-03-08T12:00:00Z", customer: "a"),
            // b: intro trial ending 2026-10-27, nothing after; 10-27 + 60 days is after T: pending.
            w.tx("2026-10-20T12:00:00Z", "2026-10-27T12:00:00Z", customer: "b", free: true, offerType: 1),
            // c: redeemed one millisecond before the window: not counted.
            w.tx("2025-10-31T23:59:59.999Z", "2025-11-07T23:59:59.999Z", customer: "c", free: true, offerType: 1),
            w.tx("2025-11-07T23:59:59.999Z", "2025-12-07T23:59:59.999Z", customer: "c"),
            // k: redeemed at the window's first instant, nothing after, long ago: counted, lapsed.
            w.tx("2025-11-01T00:00:00Z", "2025-11-08T00:00:00Z", customer: "k", free: true, offerType: 1),
            // d: two promo rows back to back (one episode) then paid: converted; later the
            //    same promo again, ending 2026-10-01 with nothing after: pending.
            payg("2026-03-01T12:00:00Z", "2026-04-01T12:00:00Z", "d"),
            payg("2026-04-01T12:00:00Z", "2026-05-01T12:00:00Z", "d"),
            w.tx("2026-05-01T12:00:00Z", "2026-06-01T12:00:00Z", customer: "d"),
            payg("2026-09-01T12:00:00Z", "2026-10-01T12:00:00Z", "d"),
            // e: promo ending 2026-03-10, nothing after: lapsed.
            payg("2026-02-10T12:00:00Z", "2026-03-10T12:00:00Z", "e"),
            // j: paid, then promo in the current month; its renewal on 12-05 is not known at T: pending.
            w.tx("2026-09-05T12:00:00Z", "2026-10-05T12:00:00Z", customer: "j"),
            payg("2026-11-05T12:00:00Z", "2026-12-05T12:00:00Z", "j"),
            payg("2026-12-05T12:00:00Z", "2027-01-05T12:00:00Z", "j"),
            // n: promo, then paid 70 days after it ended: too late to be a conversion.
            payg("2026-03-01T12:00:00Z", "2026-04-01T12:00:00Z", "n"),
            w.tx("2026-06-10T12:00:00Z", "2026-07-10T12:00:00Z", customer: "n"),
            // i: the same promo paid up front for three months, then paid: converted.
            payg("2026-07-01T12:00:00Z", "2026-10-01T12:00:00Z", "i", "PAY_UP_FRONT"),
            w.tx("2026-10-01T12:00:00Z", "2026-11-01T12:00:00Z", customer: "i"),
            // h: offer code, then a paid month refunded before T: not converted.
            w.tx(
                "2026-04-01T12:00:00Z", "2026-05-01T12:00:00Z", customer: "h", free: true, offerType: 3,
                offerId: "code.x"),
            w.tx("2026-05-01T12:00:00Z", "2026-06-01T12:00:00Z", customer: "h", revoked: "2026-05-05T12:00:00Z"),
            // g: paid in 2025, win-back trial in May 2026, then paid: converted.
            w.tx("2025-06-01T12:00:00Z", "2025-07-01T12:00:00Z", customer: "g"),
            w.tx("2025-07-01T12:00:00Z", "2025-08-01T12:00:00Z", customer: "g"),
            w.tx(
                "2026-05-01T12:00:00Z", "2026-06-01T12:00:00Z", customer: "g", free: true, offerType: 4,
                offerId: "wb.basic.1m.free"),
            w.tx("2026-06-01T12:00:00Z", "2026-07-01T12:00:00Z", customer: "g"),
            // f: an offer type Apple may add one day (9), then paid: converted.
            w.tx("2026-06-01T12:00:00Z", "2026-07-01T12:00:00Z", customer: "f", offerType: 9, offerId: "mystery"),
            w.tx("2026-07-01T12:00:00Z", "2026-08-01T12:00:00Z", customer: "f"),
            // f2: offer type 10, nothing after: lapsed ("unknown:10" sorts before "unknown:9").
            w.tx("2026-06-01T12:00:00Z", "2026-07-01T12:00:00Z", customer: "f2", offerType: 10, offerId: "mystery"),
            // m: family-shared only: not a customer, in no report.
            w.tx("2026-05-01T12:00:00Z", "2026-05-08T12:00:00Z", customer: "m", free: true, offerType: 1, family: true),
        ]
    }

    static let expected = """
        offer_type,offer_id,discount_type,redemptions,customers,converted,pending,conversion_rate
        introductory,,FREE_TRIAL,3,3,1,1,0.5000
        promotional,promo.half,PAY_AS_YOU_GO,5,4,1,2,0.3333
        promotional,promo.half,PAY_UP_FRONT,1,1,1,0,1.0000
        offer_code,code.x,FREE_TRIAL,1,1,0,0,0.0000
        win_back,wb.basic.1m.free,FREE_TRIAL,1,1,1,0,1.0000
        unknown:10,mystery,,1,1,0,0,0.0000
        unknown:9,mystery,,1,1,1,0,1.0000

        """

    @Test("counts, conversions and pending episodes match the hand count, in the rules' row order")
    func handCounted() {
        let w = TestWorld()
        let r = computeReports(w, Self.world(w), asOf: Self.asOf)
        #expect(text(RedemptionReport.csv(r.redemptions)) == Self.expected)
    }

    @Test("the same bytes whatever the input order and thread count", arguments: [1, 3, 4])
    func deterministic(threads: Int) {
        let w = TestWorld()
        var rows = Self.world(w)
        var g = SystemRandomNumberGenerator()
        rows.shuffle(using: &g)
        let r = computeReports(w, rows, asOf: Self.asOf, threads: threads)
        #expect(text(RedemptionReport.csv(r.redemptions)) == Self.expected)
    }
}
