import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting

/// The customer's returns at `asOf` from `since` on, as the report finds them.
private func returns(
    _ w: TestWorld, _ rows: [Transaction], asOf: String, since: String = "2000-01-01"
) -> [Return] {
    var periods: [Period] = []
    var out: [Return] = []
    RetentionReport.returns(rows: w.ordered(rows), asOf: ms(asOf), since: ms(since), periods: &periods, into: &out)
    return out
}

/// Every report of the rows at `asOf`, retention counted from `retentionMonths` months back.
private func retentionReports(
    _ w: TestWorld, _ rows: [Transaction], asOf: String, retentionMonths: Int = 24, threads: Int = 1
) -> Reports {
    computeReports(w, rows, asOf: asOf, retentionMonths: retentionMonths, threads: threads)
}

/// One paid month, 2025-01-01T12 → 2025-02-01T12: the period every customer leaves from.
private func firstMonth(_ w: TestWorld, _ c: String) -> Transaction {
    w.tx("2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", customer: c)
}

/// `c` leaves from `firstMonth` and comes back from `start` to `end` (the other arguments are
/// `TestWorld.tx`'s).
private func back(
    _ w: TestWorld, _ c: String, _ start: String, _ end: String, free: Bool = false, offerType: Int64 = 0,
    offerId: String? = nil
) -> [Transaction] {
    [firstMonth(w, c), w.tx(start, end, customer: c, free: free, offerType: offerType, offerId: offerId)]
}

@Suite("Retention after a return: retention-after-return.csv (docs/rules.md §9.3)")
struct RetentionReportTests {
    static let asOf = "2026-11-22"

    // MARK: - Returns

    @Test("a return at each horizon 1, 3, 6 and 12 months: retained when a period at T contains it")
    func horizons() throws {
        let w = TestWorld()
        // Back on 2025-04-01T12 (2 whole months after 02-01T12), then 12 paid months to
        // 2026-05-01T12: X = 05-01, 07-01, 10-01 and 2026-04-01 (12:00) are all held.
        let all =
            [firstMonth(w, "c1"), w.tx("2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", customer: "c1")]
            + w.monthly(from: "2025-05-01T12:00:00Z", count: 12, customer: "c1")
        let r = try #require(returns(w, all, asOf: Self.asOf).first)
        #expect(returns(w, all, asOf: Self.asOf).count == 1)
        #expect(r.start == ms("2025-04-01T12:00:00Z"))
        #expect(r.reach == ms("2025-02-01T12:00:00Z"))
        #expect(r.observable == [true, true, true, true])
        #expect(r.retained == [true, true, true, true])

        // Back on 2025-06-01T12 for 4 months to 10-01T12: X1 07-01 and X3 09-01 held; X6
        // 12-01 and X12 2026-06-01 not.
        let some = [firstMonth(w, "c2")] + w.monthly(from: "2025-06-01T12:00:00Z", count: 4, customer: "c2")
        let s = try #require(returns(w, some, asOf: Self.asOf).first)
        #expect(s.observable == [true, true, true, true])
        #expect(s.retained == [true, true, false, false])

        // Back on 2025-06-01T12 for one month: X1 is its end, which it does not contain.
        let none = [firstMonth(w, "c3"), w.tx("2025-06-01T12:00:00Z", "2025-07-01T12:00:00Z", customer: "c3")]
        let n = try #require(returns(w, none, asOf: Self.asOf).first)
        #expect(n.retained == [false, false, false, false])

        // Gone at X1 and X3, back by X6 and X12 (another return, at 2025-11-01T12): retained
        // counts any period at T containing X, not only the return's own run.
        let again =
            [
                firstMonth(w, "c4"), w.tx("2025-06-01T12:00:00Z", "2025-07-01T12:00:00Z", customer: "c4"),
            ] + w.monthly(from: "2025-11-01T12:00:00Z", count: 8, customer: "c4")
        let a = returns(w, again, asOf: Self.asOf)
        #expect(a.map(\.start) == [ms("2025-06-01T12:00:00Z"), ms("2025-11-01T12:00:00Z")])
        #expect(a.first?.retained == [false, false, true, true])
    }

    @Test("a horizon is observable only when X is before T")
    func observable() throws {
        let w = TestWorld()
        // Back on 2026-06-01T12, renewed monthly through 2027-01-01T12.
        let rows = [firstMonth(w, "c1")] + w.monthly(from: "2026-06-01T12:00:00Z", count: 7, customer: "c1")
        // X6 = 2026-12-01T12 = T: not yet observable.
        let atX6 = try #require(returns(w, rows, asOf: "2026-12-01T12:00:00Z").first)
        #expect(atX6.observable == [true, true, false, false])
        // One millisecond later it is, and the renewal bought at X6 holds it.
        let after = try #require(returns(w, rows, asOf: "2026-12-01T12:00:00.001Z").first)
        #expect(after.observable == [true, true, true, false])
        #expect(Array(after.retained.prefix(3)) == [true, true, true])
        // At 2026-11-22 X6 (12-01) and X12 (2027-06-01) are ahead.
        let atT = try #require(returns(w, rows, asOf: Self.asOf).first)
        #expect(atT.observable == [true, true, false, false])
    }

    @Test("a return starts one whole month after the reach or later; one millisecond earlier it is none")
    func oneWholeMonth() {
        let w = TestWorld()
        // The reach is 2025-01-31T12; addMonths(reach, 1) is 2025-02-28T12 (clamped), 28 days on.
        let left = { (c: String) in w.tx("2024-12-31T12:00:00Z", "2025-01-31T12:00:00Z", customer: c) }
        let exactly = [left("c1"), w.tx("2025-02-28T12:00:00Z", "2025-03-28T12:00:00Z", customer: "c1")]
        #expect(returns(w, exactly, asOf: Self.asOf).map(\.start) == [ms("2025-02-28T12:00:00Z")])
        let earlier = [left("c2"), w.tx("2025-02-28T11:59:59.999Z", "2025-03-28T12:00:00Z", customer: "c2")]
        #expect(returns(w, earlier, asOf: Self.asOf).isEmpty)
        // Same with a 31-day month: reach 2025-02-01T12, return from 2025-03-01T12.
        let march = [firstMonth(w, "c3"), w.tx("2025-03-01T12:00:00Z", "2025-04-01T12:00:00Z", customer: "c3")]
        #expect(returns(w, march, asOf: Self.asOf).map(\.reach) == [ms("2025-02-01T12:00:00Z")])
        let marchEarlier = [
            firstMonth(w, "c4"), w.tx("2025-03-01T11:59:59.999Z", "2025-04-01T12:00:00Z", customer: "c4"),
        ]
        #expect(returns(w, marchEarlier, asOf: Self.asOf).isEmpty)
    }

    @Test("the first period is never a return, however long before T it began")
    func firstPeriod() {
        let w = TestWorld()
        #expect(returns(w, [firstMonth(w, "c1")], asOf: Self.asOf).isEmpty)
        #expect(returns(w, w.monthly(from: "2020-01-01T12:00:00Z", count: 3, customer: "c2"), asOf: Self.asOf).isEmpty)
        // A free first period is a first period too: the paid one after it is no return.
        let trial = [
            w.tx("2025-01-01T12:00:00Z", "2025-01-08T12:00:00Z", customer: "c3", free: true, offerType: 1),
            w.tx("2025-01-08T12:00:00Z", "2025-02-08T12:00:00Z", customer: "c3"),
        ]
        #expect(returns(w, trial, asOf: Self.asOf).isEmpty)
    }

    @Test("a return cut short by an upgrade is still retained when the upgraded period holds the horizon")
    func upgradeCut() throws {
        let w = TestWorld()
        // Back on 2025-09-01T12 with an offer code; upgraded on 09-15 to premium, renewed to
        // 2025-12-15T12. The return's period is cut to 09-01 … 09-15; X1 = 10-01T12 lies in the
        // upgraded period, X3 = 12-01T12 in its second renewal.
        let rows =
            [
                firstMonth(w, "c1"),
                w.tx(
                    "2025-09-01T12:00:00Z", "2025-10-01T12:00:00Z", customer: "c1", offerType: 3, offerId: "code.y",
                    revoked: "2025-09-15T12:00:00Z", upgraded: true),
                w.tx("2025-09-15T12:00:00Z", "2025-10-15T12:00:00Z", product: "premium", customer: "c1"),
            ] + w.monthly(from: "2025-10-15T12:00:00Z", count: 2, product: "premium", customer: "c1")
        let r = returns(w, rows, asOf: Self.asOf)
        #expect(r.count == 1)
        let one = try #require(r.first)
        #expect(one.start == ms("2025-09-01T12:00:00Z"))
        #expect(one.kind(strings: w.strings) == "offer_code")
        #expect(one.observable == [true, true, true, true])
        #expect(one.retained == [true, true, false, false])
    }

    @Test("a period bought at or after T is no return yet; one from before `since` is not counted")
    func knownAtTAndSince() {
        let w = TestWorld()
        let rows = [firstMonth(w, "c1"), w.tx("2026-11-22T00:00:00Z", "2026-12-22T00:00:00Z", customer: "c1")]
        #expect(returns(w, rows, asOf: "2026-11-22").isEmpty)
        #expect(returns(w, rows, asOf: "2026-11-22T00:00:00.001Z").count == 1)
        let back = [firstMonth(w, "c2"), w.tx("2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", customer: "c2")]
        #expect(returns(w, back, asOf: Self.asOf, since: "2025-04-01T12:00:00Z").count == 1)
        #expect(returns(w, back, asOf: Self.asOf, since: "2025-04-01T12:00:00.001Z").isEmpty)
    }

    @Test(
        "a return's kind and offer id come from its row; introductory and none have no offer id",
        arguments: [
            (4, "wb.a", "win_back", "wb.a"),
            (2, "promo.x", "promotional", "promo.x"),
            (3, "code.y", "offer_code", "code.y"),
            (1, "intro.z", "introductory", ""),
            (7, "weird.w", "unknown:7", "weird.w"),
            (0, nil, "none", ""),
        ] as [(Int64, String?, String, String)])
    func kinds(offerType: Int64, offerId: String?, kind: String, reported: String) throws {
        let w = TestWorld()
        let rows = [
            firstMonth(w, "c1"),
            w.tx(
                "2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", customer: "c1", offerType: offerType, offerId: offerId),
        ]
        let r = try #require(returns(w, rows, asOf: Self.asOf).first)
        #expect(r.kind(strings: w.strings) == kind)
        #expect((r.reportedOffer >= 0 ? w.strings.string(r.reportedOffer) : "") == reported)
    }

    // MARK: - The report

    /// Everyone leaves from `firstMonth` (2025-01-01T12 → 02-01T12) unless said otherwise.
    static func world(_ w: TestWorld) -> [Transaction] {
        var rows: [Transaction] = []
        // R1 win_back wb.a on 2025-04-01T12, then 12 paid months to 2026-05-01T12: retained at 1/3/6/12.
        rows += back(w, "R1", "2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", free: true, offerType: 4, offerId: "wb.a")
        rows += w.monthly(from: "2025-05-01T12:00:00Z", count: 12, customer: "R1")
        // R2 win_back wb.a on 2025-06-01T12 for one month: retained nowhere.
        rows += back(w, "R2", "2025-06-01T12:00:00Z", "2025-07-01T12:00:00Z", free: true, offerType: 4, offerId: "wb.a")
        // R3 win_back wb.B on 2026-06-01T12, then a year to 2027-07-01T12: X1, X3 retained; X6
        // (2026-12-01) and X12 not observable at T, though a period holds them.
        rows += [
            firstMonth(w, "R3"),
            w.tx(
                "2026-06-01T12:00:00Z", "2026-07-01T12:00:00Z", customer: "R3", free: true, offerType: 4,
                offerId: "wb.B"),
            w.tx("2026-07-01T12:00:00Z", "2027-07-01T12:00:00Z", customer: "R3"),
        ]
        // R4 promotional on 2025-03-01T12, exactly one whole month after 02-01T12: one month only.
        rows += back(w, "R4", "2025-03-01T12:00:00Z", "2025-04-01T12:00:00Z", offerType: 2, offerId: "promo.x")
        // R5 back one millisecond less than a month after: no return at all.
        rows += back(w, "R5", "2025-03-01T11:59:59.999Z", "2025-04-01T12:00:00Z", offerType: 2, offerId: "promo.x")
        // R6 offer_code on 2025-09-01T12, cut by an upgrade on 09-15; premium to 2025-12-15T12:
        // retained at 1 and 3.
        rows += [
            firstMonth(w, "R6"),
            w.tx(
                "2025-09-01T12:00:00Z", "2025-10-01T12:00:00Z", customer: "R6", offerType: 3, offerId: "code.y",
                revoked: "2025-09-15T12:00:00Z", upgraded: true),
            w.tx("2025-09-15T12:00:00Z", "2025-10-15T12:00:00Z", product: "premium", customer: "R6"),
        ]
        rows += w.monthly(from: "2025-10-15T12:00:00Z", count: 2, product: "premium", customer: "R6")
        // R7 introductory intro.z on 2025-05-01T12 for a month: retained nowhere.
        rows += back(
            w, "R7", "2025-05-01T12:00:00Z", "2025-06-01T12:00:00Z", free: true, offerType: 1, offerId: "intro.z")
        // R8 introductory intro.q on 2025-05-01T12 for a year: retained at 1, 3, 6; X12 is its end.
        rows += back(w, "R8", "2025-05-01T12:00:00Z", "2026-05-01T12:00:00Z", offerType: 1, offerId: "intro.q")
        // R9 unknown:7 weird.w on 2025-07-01T12, renewed once to 09-01T12: retained at 1.
        rows += back(w, "R9", "2025-07-01T12:00:00Z", "2025-08-01T12:00:00Z", offerType: 7, offerId: "weird.w")
        rows += w.monthly(from: "2025-08-01T12:00:00Z", count: 1, customer: "R9")
        // R10 unknown:10 weird.w on 2025-07-01T12 for a month: retained nowhere.
        rows += back(w, "R10", "2025-07-01T12:00:00Z", "2025-08-01T12:00:00Z", offerType: 10, offerId: "weird.w")
        // R11 none on 2025-03-15T12, three months to 06-15T12: retained at 1 (04-15), not at 3 (06-15).
        rows += [firstMonth(w, "R11")] + w.monthly(from: "2025-03-15T12:00:00Z", count: 3, customer: "R11")
        // R12 none twice: 2025-04-01T12 and 2025-08-01T12 (3 months after 05-01T12), a month each.
        rows += [
            firstMonth(w, "R12"),
            w.tx("2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", customer: "R12"),
            w.tx("2025-08-01T12:00:00Z", "2025-09-01T12:00:00Z", customer: "R12"),
        ]
        // R13 one period only: no return.
        rows += w.monthly(from: "2026-01-01T12:00:00Z", count: 1, customer: "R13")
        // R14 none on 2024-10-31T23:59:59.999, before 2024-11-01 (24 months before T's month): not counted.
        rows += [
            w.tx("2024-01-01T12:00:00Z", "2024-02-01T12:00:00Z", customer: "R14"),
            w.tx("2024-10-31T23:59:59.999Z", "2024-11-30T23:59:59.999Z", customer: "R14"),
        ]
        // R15 none on 2024-11-01T00:00:00.000: counted; X1 is its end.
        rows += [
            w.tx("2024-01-01T12:00:00Z", "2024-02-01T12:00:00Z", customer: "R15"),
            w.tx("2024-11-01T00:00:00Z", "2024-12-01T00:00:00Z", customer: "R15"),
        ]
        return rows
    }

    static let header =
        "kind,offer_id,returns,observable_1m,retained_1m,retention_1m,observable_3m,retained_3m,retention_3m,"
        + "observable_6m,retained_6m,retention_6m,observable_12m,retained_12m,retention_12m\n"

    /// By kind (win_back, promotional, offer_code, introductory, unknown:N bytewise, none), then
    /// offer id bytewise (`wb.B` before `wb.a`; `unknown:10` before `unknown:7`):
    /// - win_back wb.B: R3; 6 and 12 months ahead of T.
    /// - win_back wb.a: R1 (all retained), R2 (none): 2 observable, 1 retained at each.
    /// - promotional promo.x: R4 (R5 is no return). offer_code code.y: R6.
    /// - introductory: R7 and R8 in one row without offer id: retained 1, 1, 1, 0.
    /// - unknown:10: R10; unknown:7: R9 (retained at 1).
    /// - none: R11, R12 twice, R15 (R14 too old): retained 1 (R11 at 1 month).
    /// - `*`: 13 returns; observable 13, 13, 12, 12; retained 6, 4, 2, 1.
    static let expected =
        header + """
            win_back,wb.B,1,1,1,1.0000,1,1,1.0000,0,0,,0,0,
            win_back,wb.a,2,2,1,0.5000,2,1,0.5000,2,1,0.5000,2,1,0.5000
            promotional,promo.x,1,1,0,0.0000,1,0,0.0000,1,0,0.0000,1,0,0.0000
            offer_code,code.y,1,1,1,1.0000,1,1,1.0000,1,0,0.0000,1,0,0.0000
            introductory,,2,2,1,0.5000,2,1,0.5000,2,1,0.5000,2,0,0.0000
            unknown:10,weird.w,1,1,0,0.0000,1,0,0.0000,1,0,0.0000,1,0,0.0000
            unknown:7,weird.w,1,1,1,1.0000,1,0,0.0000,1,0,0.0000,1,0,0.0000
            none,,4,4,1,0.2500,4,0,0.0000,4,0,0.0000,4,0,0.0000
            *,,13,13,6,0.4615,13,4,0.3077,12,2,0.1667,12,1,0.0833

            """

    @Test("the report: one row per kind and offer in report order, then *", arguments: [1, 4])
    func report(threads: Int) {
        let w = TestWorld()
        var rows = Self.world(w)
        if threads > 1 {
            var g = SplitMix64(seed: 7)
            rows.shuffle(using: &g)
        }
        let r = retentionReports(w, rows, asOf: Self.asOf, threads: threads)
        #expect(r.retention.map(\.kind).last == "none")
        #expect(!r.retention.contains { $0.kind == "*" })
        #expect(text(RetentionReport.csv(r.retention)) == Self.expected)
    }

    @Test("retentionMonths: only returns from the first instant of the month that many months before T's")
    func retentionMonths() {
        #expect(RetentionReport.since(asOf: ms("2026-11-22"), months: 24) == ms("2024-11-01"))
        #expect(RetentionReport.since(asOf: ms("2026-11-22T15:30:00Z"), months: 1) == ms("2026-10-01"))
        #expect(RetentionReport.since(asOf: ms("2026-11-01"), months: 12) == ms("2025-11-01"))
        #expect(RetentionReport.since(asOf: ms("2026-03-31"), months: 240) == ms("2006-03-01"))

        let w = TestWorld()
        // 12 months: from 2025-11-01, only R3 (2026-06-01) is recent enough.
        let r = retentionReports(w, Self.world(w), asOf: Self.asOf, retentionMonths: 12)
        #expect(
            text(RetentionReport.csv(r.retention)) == Self.header + """
                win_back,wb.B,1,1,1,1.0000,1,1,1.0000,0,0,,0,0,
                *,,1,1,1,1.0000,1,1,1.0000,0,0,,0,0,

                """)
        // 25 months: from 2024-10-01, R14 (2024-10-31T23:59:59.999, none, one month) counts too.
        let older = retentionReports(w, Self.world(w), asOf: Self.asOf, retentionMonths: 25)
        #expect(older.retention.first { $0.kind == "none" }?.returns == 5)
        #expect(older.retention.first { $0.kind == "none" }?.observable == [5, 5, 5, 5])
        #expect(older.retention.first { $0.kind == "none" }?.retained == [1, 0, 0, 0])
    }

    @Test("no return at all: the * row alone, all zero, retention empty")
    func noReturn() {
        let w = TestWorld()
        let r = retentionReports(w, w.monthly(from: "2025-01-01T12:00:00Z", count: 6), asOf: Self.asOf)
        #expect(r.retention.isEmpty)
        #expect(text(RetentionReport.csv(r.retention)) == Self.header + "*,,0,0,0,,0,0,,0,0,,0,0,\n")
    }

    @Test("rows sort by kind in report order, unknown kinds bytewise, then offer id bytewise")
    func order() {
        let kinds = [
            ("win_back", "wb.B"), ("win_back", "wb.a"), ("promotional", ""), ("promotional", "p"),
            ("offer_code", "c"), ("introductory", ""), ("unknown:10", "x"), ("unknown:7", "x"),
            ("unknown:abc", ""), ("none", ""),
        ]
        let rows = kinds.map { RetentionRow(kind: $0.0, offerId: $0.1, returns: 1) }
        var g = SplitMix64(seed: 3)
        for _ in 0..<20 {
            let sorted = RetentionReport.sorted(rows.shuffled(using: &g))
            #expect(sorted.map { "\($0.kind) \($0.offerId)" } == kinds.map { "\($0.0) \($0.1)" })
        }
    }
}
