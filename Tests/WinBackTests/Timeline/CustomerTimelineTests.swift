import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Customer timeline (docs/rules.md §3 rules 1–7)")
struct CustomerTimelineTests {
    @Test("rows purchased at or after the as-of instant do not exist yet")
    func futureRowsIgnored() throws {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        // The row bought exactly at T is not known yet: the customer has just lapsed.
        let atPurchase = try #require(w.timeline(rows, at: "2025-02-01T12:00:00Z"))
        #expect(atPurchase.lastSubscribedEnd == ms("2025-02-01T12:00:00Z"))
        #expect(atPurchase.state == .churned)
        #expect(w.periods(rows, at: "2025-02-01T12:00:00Z").count == 1)
        // A millisecond later it exists, and its whole period counts.
        let after = try #require(w.timeline(rows, at: "2025-02-01T12:00:00.001Z"))
        #expect(after.lastSubscribedEnd == ms("2025-03-01T12:00:00Z"))
        #expect(after.state == .active)
        #expect(w.periods(rows, at: "2025-02-01T12:00:00.001Z").count == 2)
        #expect(w.timeline(rows, at: "2025-01-01T12:00:00Z") == nil)
    }

    @Test("an upgrade mid-period cuts the old period at the new one's start; both stay paid")
    func upgradeOverlap() throws {
        let w = TestWorld()
        let rows = [
            w.tx(
                "2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", product: "basic", revoked: "2025-01-15T12:00:00Z",
                upgraded: true),
            w.tx("2025-01-15T12:00:00Z", "2025-02-15T12:00:00Z", product: "premium"),
        ]
        let periods = w.periods(rows, at: "2025-06-01")
        #expect(periods.count == 2)
        #expect(periods[0].end == ms("2025-01-15T12:00:00Z"))
        #expect(periods.allSatisfy { $0.paid })
        let tl = try #require(w.timeline(rows, at: "2025-06-01"))
        #expect(tl.productId == w.id("premium"))
        // 14/31 of January plus one whole month.
        #expect(tl.paidMonths == 1)
        #expect(tl.state == .churned)
    }

    @Test("overlapping periods without an upgrade flag are cut too, and an emptied one is dropped")
    func overlapDropsEmptied() {
        let w = TestWorld()
        let rows = [
            w.tx("2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", id: "a"),
            w.tx("2025-01-01T12:00:00Z", "2025-03-01T12:00:00Z", id: "b"),
        ]
        let periods = w.periods(rows, at: "2025-06-01")
        // a sorts first (same purchaseDate) and is cut to nothing.
        #expect(periods.count == 1)
        #expect(periods[0].row == 1)
    }

    @Test("a refund known at T cuts the period and makes it unpaid; a later one is not known yet")
    func refund() throws {
        let w = TestWorld()
        var rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        rows.append(w.tx("2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", revoked: "2025-04-10T12:00:00Z"))
        let after = w.periods(rows, at: "2025-06-01")
        #expect(after.last?.end == ms("2025-04-10T12:00:00Z"))
        #expect(after.last?.paid == false)
        #expect(after.last?.revoked == true)
        #expect(try #require(w.timeline(rows, at: "2025-06-01")).paidMonths == 3)
        // On 2025-04-10 the revocation has not happened yet (revocationDate ≥ T).
        let before = try #require(w.timeline(rows, at: "2025-04-10T12:00:00Z"))
        #expect(before.state == .active)
        #expect(before.paidMonths == 4)
    }

    @Test("family-shared rows never count; a customer with only those is not a subscriber")
    func familySharing() throws {
        let w = TestWorld()
        let family = w.tx("2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", family: true)
        #expect(w.timeline([family], at: "2025-06-01") == nil)
        let own = w.monthly(from: "2025-03-01T12:00:00Z", count: 1)
        let tl = try #require(w.timeline([family] + own, at: "2025-06-01"))
        #expect(tl.paidMonths == 1)
        #expect(tl.lastSubscribedEnd == ms("2025-04-01T12:00:00Z"))
    }

    @Test("a free trial belongs to the run but adds no paid months")
    func freeTrial() throws {
        let w = TestWorld()
        let trial = w.tx("2025-01-01T12:00:00Z", "2025-01-08T12:00:00Z", free: true, offerType: 1)
        let paid = w.monthly(from: "2025-01-08T12:00:00Z", count: 2)
        let tl = try #require(w.timeline([trial] + paid, at: "2025-06-01"))
        #expect(tl.paidMonths == 2)
        #expect(tl.paidRunStart == ms("2025-01-08T12:00:00Z"))
        #expect(tl.lastRunFirstPeriod == 0)
        // Only a trial: no paid run start.
        let only = try #require(w.timeline([trial], at: "2025-06-01"))
        #expect(only.paidMonths == 0)
        #expect(only.paidRunStart == nil)
    }

    @Test("a gap of exactly consecutiveGapDays continues the run; one millisecond more starts a new one")
    func gapBoundary() throws {
        let w = TestWorld()
        let first = w.monthly(from: "2025-01-01T12:00:00Z", count: 2)  // ends 2025-03-01T12:00
        let end = ms("2025-03-01T12:00:00Z")
        func resume(after gap: Int64) -> Transaction {
            let p = end + gap
            return w.tx(Timestamp.iso(p), Timestamp.iso(MonthMath.addMonths(p, 1)))
        }
        let exactly = try #require(w.timeline(first + [resume(after: 60 * MonthMath.day)], at: "2026-01-01"))
        #expect(exactly.paidMonths == 3)
        #expect(exactly.paidRunStart == ms("2025-01-01T12:00:00Z"))
        let oneMore = try #require(w.timeline(first + [resume(after: 60 * MonthMath.day + 1)], at: "2026-01-01"))
        #expect(oneMore.paidMonths == 1)
        #expect(oneMore.paidRunStart == end + 60 * MonthMath.day + 1)
        // A day more, with consecutiveGapDays 61, is one run again.
        let wider = try #require(
            w.timeline(first + [resume(after: 61 * MonthMath.day)], at: "2026-01-01", gapDays: 61))
        #expect(wider.paidMonths == 3)
    }

    @Test("paid months sum fractional calendar months and floor with a 1e-6 tolerance")
    func paidMonthsFloor() throws {
        let w = TestWorld()
        // 2025-01-31 → 02-28 is one whole (clamped) month; 02-28 → 03-15 is 15/28 (to 03-28).
        let rows = [
            w.tx("2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z"),
            w.tx("2025-02-28T00:00:00Z", "2025-03-15T00:00:00Z"),
        ]
        #expect(try #require(w.timeline(rows, at: "2026-01-01")).paidMonths == 1)
        // Three thirds of months: 1/3 + 1/3 + 1/3 must count as 1 despite rounding.
        let thirds = [
            w.tx("2025-04-01T00:00:00Z", "2025-04-11T00:00:00Z"),
            w.tx("2025-04-11T00:00:00Z", "2025-04-21T00:00:00Z"),
            w.tx("2025-04-21T00:00:00Z", "2025-05-01T00:00:00Z"),
        ]
        #expect(try #require(w.timeline(thirds, at: "2026-01-01")).paidMonths == 1)
    }

    @Test("state: active inside a period, billing retry by renewal info, else churned")
    func states() throws {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 2)  // E = 2025-03-01T12:00
        let e = ms("2025-03-01T12:00:00Z")
        #expect(try #require(w.timeline(rows, at: "2025-02-15")).state == .active)
        #expect(try #require(w.timeline(rows, at: "2025-03-10")).state == .churned)

        let retry = RenewalInfo(signedDate: e, isInBillingRetryPeriod: true)
        #expect(try #require(w.timeline(rows, at: "2025-03-10", renewal: retry)).state == .billingRetry)
        // The App Store retries for 60 days at most: at E + 60 days it is churn.
        let limit = Timestamp.iso(e + 60 * MonthMath.day)
        #expect(try #require(w.timeline(rows, at: limit, renewal: retry)).state == .churned)
        let justBefore = Timestamp.iso(e + 60 * MonthMath.day - 1)
        #expect(try #require(w.timeline(rows, at: justBefore, renewal: retry)).state == .billingRetry)
        // Signed before the last period ended: stale, does not count.
        let stale = RenewalInfo(signedDate: e - 1, isInBillingRetryPeriod: true)
        #expect(try #require(w.timeline(rows, at: "2025-03-10", renewal: stale)).state == .churned)
        // A grace period still running counts whatever the retry flag says.
        let grace = RenewalInfo(signedDate: e, gracePeriodExpiresDate: ms("2025-03-20"))
        #expect(try #require(w.timeline(rows, at: "2025-03-10", renewal: grace)).state == .billingRetry)
        #expect(try #require(w.timeline(rows, at: "2025-03-20", renewal: grace)).state == .churned)
    }

    @Test("the customer's product, territory and token come from the latest rows")
    func latestProductTerritoryToken() throws {
        let w = TestWorld()
        let rows = [
            w.tx(
                "2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", product: "premium", storefront: "CAN",
                token: "aaaaaaaa-0000-0000-0000-000000000001"),
            w.tx("2025-02-01T12:00:00Z", "2025-03-01T12:00:00Z", product: "basic", storefront: nil),
            // Empty period (expires at purchase): gives no period, but its token still counts.
            w.tx("2025-03-01T12:00:00Z", "2025-03-01T12:00:00Z", token: "aaaaaaaa-0000-0000-0000-000000000002"),
        ]
        let tl = try #require(w.timeline(rows, at: "2025-06-01"))
        #expect(tl.productId == w.id("basic"))
        #expect(tl.storefront == Transaction.none)
        #expect(tl.appAccountToken == w.token("aaaaaaaa-0000-0000-0000-000000000002"))
    }

    @Test("win-back history keeps the latest expiry per offer")
    func winBackHistory() throws {
        let w = TestWorld()
        let rows = [
            w.tx("2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", free: true, offerType: 4, offerId: "wb.a"),
            w.tx("2025-02-01T12:00:00Z", "2025-03-01T12:00:00Z", offerType: 4, offerId: "wb.a"),
            w.tx("2025-03-01T12:00:00Z", "2025-04-01T12:00:00Z", offerType: 2, offerId: "promo"),
        ]
        let tl = try #require(w.timeline(rows, at: "2025-06-01"))
        #expect(tl.lastRedemptionEnd(of: w.id("wb.a")) == ms("2025-03-01T12:00:00Z"))
        #expect(tl.lastRedemptionEnd(of: w.id("promo")) == nil)
    }
}
