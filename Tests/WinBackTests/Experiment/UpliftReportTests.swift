import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackWrite

/// Evaluates the audience with `experiment` and counts every report in the same pass, as a run
/// does (`computeReports` passes no experiment).
private func runWithExperiment(
    _ w: TestWorld, _ rows: [Transaction], offers: [Offer], experiment: Experiment?, asOf: String,
    windowMonths: Int, threads: Int = 1
) -> (customers: CustomerRows, book: OfferBook, audience: Audience, reports: Reports) {
    let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
    let book = OfferBook(catalog: OfferCatalog(offers: offers), ids: { w.strings.lookup($0) })
    let (audience, reports) = Reports.evaluate(
        customers, book: book, renewals: nil, asOf: ms(asOf), experiment: experiment,
        settings: Reports.Settings(windowMonths: windowMonths, gapDays: 60, retentionMonths: 24), threads: threads)
    return (customers, book, audience, reports)
}

@Suite("Uplift of a holdout experiment: winback-uplift.csv (docs/rules.md §9.2)")
struct UpliftReportTests {
    // MARK: - The world

    /// T = 2026-11-22T00:00; a window of 4 complete months: 2026-07 … 2026-10.
    static let asOf = "2026-11-22"
    static let windowMonths = 4

    /// Half held out; starting mid-July, so the cohort months are 2026-08, 2026-09, 2026-10.
    static func experiment(start: String = "2026-07-15") -> Experiment {
        Experiment(name: "uplift-test", basisPoints: 5_000, start: ms(start))
    }

    /// Catalog order wb.a, wb.b; wb.b ranks first (high priority) for whoever is eligible for both.
    static let offers = [
        TestWorld.basicOffer(paid: 1, min: 1, max: 24, wait: nil, start: "2024-01-01", priority: .normal, id: "wb.a"),
        TestWorld.basicOffer(paid: 6, min: 1, max: 24, wait: nil, start: "2024-01-01", priority: .high, id: "wb.b"),
    ]

    /// originalTransactionIds with their buckets under `uplift-test` in group g1, computed with
    /// Python's hashlib: int.from_bytes(sha256(b"uplift-test\ng1\n" + id).digest()[:8], "big") % 10000.
    /// At 50 % (5 000 basis points) a bucket below 5 000 is held out.
    static let buckets: [(id: String, bucket: Int)] = [
        ("2000000000000001", 349), ("2000000000000002", 3568), ("2000000000000004", 3917),
        ("2000000000000006", 2095), ("2000000000000007", 1339), ("2000000000000024", 3618),
        ("2000000000000003", 6960), ("2000000000000005", 5294), ("2000000000000008", 9271),
        ("2000000000000009", 9176), ("2000000000000011", 9527), ("2000000000000013", 7824),
        ("2000000000000017", 7606), ("2000000000000022", 5492), ("2000000000000023", 7534),
    ]

    // Treatment (bucket ≥ 5 000).
    static let a = "2000000000000003"
    static let b = "2000000000000005"
    static let c = "2000000000000008"
    static let d = "2000000000000009"
    static let e = "2000000000000011"
    static let f = "2000000000000013"
    static let g = "2000000000000017"
    static let h = "2000000000000022"
    static let j = "2000000000000023"
    // Holdout (bucket < 5 000).
    static let k = "2000000000000001"
    static let l = "2000000000000002"
    static let m = "2000000000000004"
    static let n = "2000000000000006"
    static let p = "2000000000000007"
    static let q = "2000000000000024"

    /// Three paid months, 2026-01-01T12 → 2026-04-01T12: at each month start from 2026-05 on,
    /// churned with 3 paid months and 1+ months since: eligible for wb.a only (wb.b needs 6).
    static func short(_ w: TestWorld, _ c: String) -> [Transaction] {
        w.monthly(from: "2026-01-01T12:00:00Z", count: 3, customer: c)
    }

    /// Eight paid months, 2025-08-01T12 → 2026-04-01T12: eligible for both; rank 1 is wb.b.
    static func long(_ w: TestWorld, _ c: String) -> [Transaction] {
        w.monthly(from: "2025-08-01T12:00:00Z", count: 8, customer: c)
    }

    /// A return at `at` that runs past T, so no later month start finds the customer churned.
    static func back(
        _ w: TestWorld, _ c: String, _ at: String, offerType: Int64 = 0, offerId: String? = nil
    ) -> Transaction {
        w.tx(at, "2027-06-01T00:00:00Z", customer: c, free: offerType == 4, offerType: offerType, offerId: offerId)
    }

    /// Every case of §9.2 at once.
    static func world(_ w: TestWorld) -> [Transaction] {
        var rows: [Transaction] = []
        // A: returns at full price on 08-10 — August, wb.a: returned, not redeemed.
        rows += short(w, a) + [back(w, a, "2026-08-10T12:00:00Z")]
        // B: returns with wb.a on 08-10 — August, wb.a: returned and redeemed.
        rows += short(w, b) + [back(w, b, "2026-08-10T12:00:00Z", offerType: 4, offerId: "wb.a")]
        // C: rank 1 is wb.b, redeems wb.a on 08-10 — August, wb.b: returned and redeemed.
        rows += long(w, c) + [back(w, c, "2026-08-10T12:00:00Z", offerType: 4, offerId: "wb.a")]
        // D: returns on August's first instant (not known at T_M: churned then) — August, returned.
        rows += short(w, d) + [back(w, d, "2026-08-01T00:00:00.000Z")]
        // E: returns on August's last millisecond — August, returned.
        rows += short(w, e) + [back(w, e, "2026-08-31T23:59:59.999Z")]
        // F: returns on September's first instant — August not returned; September returned.
        rows += short(w, f) + [back(w, f, "2026-09-01T00:00:00.000Z")]
        // G: never returns — August, September and October, wb.a, not returned.
        rows += short(w, g)
        // H: returns on 07-10: July is before the start, so nowhere.
        rows += short(w, h) + [back(w, h, "2026-07-10T12:00:00Z")]
        // J: returns with a promotional offer on 10-05 — wb.b in August and September not
        // returned; October returned, not redeemed.
        rows += long(w, j) + [back(w, j, "2026-10-05T12:00:00Z", offerType: 2, offerId: "promo.x")]
        // K (held out): returns on 09-20 — August not returned; September returned.
        rows += short(w, k) + [back(w, k, "2026-09-20T12:00:00Z")]
        // L (held out): never returns — wb.b in every cohort month, not returned.
        rows += long(w, l)
        // M (held out): returns on 10-10 — wb.a, August and September not returned, October returned.
        rows += short(w, m) + [back(w, m, "2026-10-10T12:00:00Z")]
        // N (held out): redeems wb.b on 08-15 — August, wb.b: returned and redeemed.
        rows += long(w, n) + [back(w, n, "2026-08-15T12:00:00Z", offerType: 4, offerId: "wb.b")]
        // P (held out): subscribed at every month start and at T: never counted.
        rows += w.monthly(from: "2026-06-01T12:00:00Z", count: 6, customer: p)
        // Q (held out): lapsed 07-15, too recently at 08-01 (0 months), back on 08-20: never
        // eligible, so its return counts nowhere.
        rows += w.monthly(from: "2026-04-15T12:00:00Z", count: 3, customer: q)
        rows.append(back(w, q, "2026-08-20T12:00:00Z", offerType: 4, offerId: "wb.a"))
        return rows
    }

    /// Per cohort month and offer (treatment customers/returned/redeemed | holdout):
    /// - 2026-08: wb.a T: A B D E F G (6; returned A B D E = 4; redeemed B = 1) | H: K M (2, 0, 0);
    ///   wb.b T: C J (2; returned C; redeemed C) | H: L N (2; returned N; redeemed N).
    /// - 2026-09: wb.a T: F G (2, F, 0) | H: K M (2, K, 0); wb.b T: J (1, 0, 0) | H: L (1, 0, 0).
    /// - 2026-10: wb.a T: G (1, 0, 0) | H: M (1, M, 0); wb.b T: J (1, J, 0) | H: L (1, 0, 0).
    /// Intervals and lifts computed independently (Python, the formulas of §9.2); e.g. 2026-08
    /// wb.a: d = 4/6 − 0/2 = 0.6667, incremental = round(0.6667 × 6) = 4; 2026-10 wb.a:
    /// d = 0 − 1 = −1, incremental −1.
    static let expected = """
        month,offer_id,treatment_customers,treatment_returned,treatment_redeemed,holdout_customers,holdout_returned,holdout_redeemed,treatment_return_rate,holdout_return_rate,lift,lift_low,lift_high,incremental_returns
        2026-08,wb.a,6,4,1,2,0,0,0.6667,0.0000,0.6667,-0.0863,0.9032,4
        2026-08,wb.b,2,1,1,2,1,1,0.5000,0.5000,0.0000,-0.5734,0.5734,0
        2026-08,*,8,5,2,4,1,1,0.6250,0.2500,0.3750,-0.1762,0.6889,3
        2026-09,wb.a,2,1,0,2,1,0,0.5000,0.5000,0.0000,-0.5734,0.5734,0
        2026-09,wb.b,1,0,0,1,0,0,0.0000,0.0000,0.0000,-0.7935,0.7935,0
        2026-09,*,3,1,0,3,1,0,0.3333,0.3333,0.0000,-0.5335,0.5335,0
        2026-10,wb.a,1,0,0,1,1,0,0.0000,1.0000,-1.0000,-1.0000,0.1221,-1
        2026-10,wb.b,1,1,0,1,0,0,1.0000,0.0000,1.0000,-0.1221,1.0000,1
        2026-10,*,2,1,0,2,1,0,0.5000,0.5000,0.0000,-0.5734,0.5734,0
        *,wb.a,9,5,1,5,2,0,0.5556,0.4000,0.1556,-0.3133,0.5365,1
        *,wb.b,4,2,1,4,1,1,0.5000,0.2500,0.2500,-0.3196,0.6553,1
        *,*,13,7,2,9,3,1,0.5385,0.3333,0.2051,-0.1932,0.5181,3

        """

    static func csv(_ r: Reports) -> String {
        text(UpliftReport.csv(r.uplift, offerIds: offers.map(\.offerId)))
    }

    /// The report's counted cells that are not empty, as `month offer` → `T n x r | H n x r`.
    static func counted(
        _ build: (TestWorld) -> [Transaction], start: String = "2026-07-15"
    ) -> [String: String] {
        let w = TestWorld()
        let r = runWithExperiment(
            w, build(w), offers: offers, experiment: experiment(start: start), asOf: asOf, windowMonths: windowMonths
        ).reports
        var out: [String: String] = [:]
        for row in r.uplift where row.treatment != ArmCounts() || row.holdout != ArmCounts() {
            let t = row.treatment
            let h = row.holdout
            out["\(row.month) \(row.offerId)"] =
                "T \(t.customers) \(t.returned) \(t.redeemed) | H \(h.customers) \(h.returned) \(h.redeemed)"
        }
        return out
    }

    // MARK: - Arms

    @Test("the world's customers fall in the arms their independently computed buckets say")
    func arms() {
        let assignment = Self.experiment().assignment
        for (id, bucket) in Self.buckets {
            #expect(assignment.bucket(group: "g1", originalTransactionId: id) == bucket, "\(id)")
            #expect(assignment.isHeldOut(group: "g1", originalTransactionId: id) == (bucket < 5_000), "\(id)")
        }
        for id in [Self.a, Self.b, Self.c, Self.d, Self.e, Self.f, Self.g, Self.h, Self.j] {
            #expect(!assignment.isHeldOut(group: "g1", originalTransactionId: id), "\(id)")
        }
        for id in [Self.k, Self.l, Self.m, Self.n, Self.p, Self.q] {
            #expect(assignment.isHeldOut(group: "g1", originalTransactionId: id), "\(id)")
        }
    }

    // MARK: - The whole report

    @Test("the whole report: per month each offer then *, then the * months", arguments: [1, 4])
    func wholeReport(threads: Int) {
        let w = TestWorld()
        let r = runWithExperiment(
            w, Self.world(w), offers: Self.offers, experiment: Self.experiment(), asOf: Self.asOf,
            windowMonths: Self.windowMonths, threads: threads
        ).reports
        #expect(r.experiment == Self.experiment())
        #expect(r.uplift.map(\.month) == ["2026-08", "2026-08", "2026-09", "2026-09", "2026-10", "2026-10"])
        #expect(Self.csv(r) == Self.expected)
    }

    @Test("a month's customers are exactly the rates report's: each counted once, under the rank-1 offer")
    func sameCustomersAsTheRates() {
        let w = TestWorld()
        let r = runWithExperiment(
            w, Self.world(w), offers: Self.offers, experiment: Self.experiment(), asOf: Self.asOf,
            windowMonths: Self.windowMonths
        ).reports
        // August: eligible for wb.a are the 8 short customers A B D E F G K M and the 4 long
        // ones C J L N; for wb.b the 4 long ones. 12 customers eligible for some offer.
        let august = r.rates.filter { $0.month == "2026-08" }
        #expect(august.map(\.eligibleAtMonthStart) == [12, 4])
        let star = UpliftReport.table(r.uplift, offerIds: ["wb.a", "wb.b"]).first {
            $0.month == "2026-08" && $0.offerId == "*"
        }
        #expect(star.map { $0.treatment.customers + $0.holdout.customers } == 12)
    }

    // MARK: - Who counts, and where

    @Test("returning with no offer during the month: returned, not redeemed (in either arm)")
    func returnsWithoutOffer() {
        #expect(
            Self.counted { w in Self.short(w, Self.a) + [Self.back(w, Self.a, "2026-08-10T12:00:00Z")] } == [
                "2026-08 wb.a": "T 1 1 0 | H 0 0 0"
            ])
        #expect(
            Self.counted { w in Self.short(w, Self.k) + [Self.back(w, Self.k, "2026-08-10T12:00:00Z")] } == [
                "2026-08 wb.a": "T 0 0 0 | H 1 1 0"
            ])
    }

    @Test("returning with the win-back offer: returned and redeemed")
    func returnsWithTheOffer() {
        let rows: (TestWorld) -> [Transaction] = { w in
            Self.short(w, Self.b) + [Self.back(w, Self.b, "2026-08-10T12:00:00Z", offerType: 4, offerId: "wb.a")]
        }
        #expect(Self.counted(rows) == ["2026-08 wb.a": "T 1 1 1 | H 0 0 0"])
    }

    @Test("redeeming another win-back offer than the rank-1 one counts under the rank-1 offer, redeemed")
    func redeemsAnotherOffer() {
        let rows: (TestWorld) -> [Transaction] = { w in
            Self.long(w, Self.c) + [Self.back(w, Self.c, "2026-08-10T12:00:00Z", offerType: 4, offerId: "wb.a")]
        }
        #expect(Self.counted(rows) == ["2026-08 wb.b": "T 1 1 1 | H 0 0 0"])
    }

    @Test("a promotional offer is a return but not a win-back redemption")
    func promotionalIsNotRedeemed() {
        let rows: (TestWorld) -> [Transaction] = { w in
            Self.long(w, Self.j) + [Self.back(w, Self.j, "2026-08-05T12:00:00Z", offerType: 2, offerId: "promo.x")]
        }
        #expect(Self.counted(rows) == ["2026-08 wb.b": "T 1 1 0 | H 0 0 0"])
    }

    @Test("returning on the month's first instant or its last millisecond counts in that month")
    func monthBoundaries() {
        let first: (TestWorld) -> [Transaction] = { w in
            Self.short(w, Self.d) + [Self.back(w, Self.d, "2026-08-01T00:00:00.000Z")]
        }
        #expect(Self.counted(first) == ["2026-08 wb.a": "T 1 1 0 | H 0 0 0"])
        let last: (TestWorld) -> [Transaction] = { w in
            Self.short(w, Self.e) + [Self.back(w, Self.e, "2026-08-31T23:59:59.999Z")]
        }
        #expect(Self.counted(last) == ["2026-08 wb.a": "T 1 1 0 | H 0 0 0"])
    }

    @Test("returning on the next month's first instant is not a return of this month, but of the next")
    func nextMonthsFirstInstant() {
        let rows: (TestWorld) -> [Transaction] = { w in
            Self.short(w, Self.f) + [Self.back(w, Self.f, "2026-09-01T00:00:00.000Z")]
        }
        #expect(
            Self.counted(rows) == [
                "2026-08 wb.a": "T 1 0 0 | H 0 0 0",
                "2026-09 wb.a": "T 1 1 0 | H 0 0 0",
            ])
    }

    @Test("a customer eligible at several cohort months' starts counts in each of them")
    func eligibleInSeveralMonths() {
        #expect(
            Self.counted { w in Self.short(w, Self.g) } == [
                "2026-08 wb.a": "T 1 0 0 | H 0 0 0",
                "2026-09 wb.a": "T 1 0 0 | H 0 0 0",
                "2026-10 wb.a": "T 1 0 0 | H 0 0 0",
            ])
        #expect(
            Self.counted { w in Self.long(w, Self.l) } == [
                "2026-08 wb.b": "T 0 0 0 | H 1 0 0",
                "2026-09 wb.b": "T 0 0 0 | H 1 0 0",
                "2026-10 wb.b": "T 0 0 0 | H 1 0 0",
            ])
    }

    @Test("months before the start are no cohort months; a start mid-month makes the next month the first")
    func cohortMonthsFollowTheStart() {
        // H is eligible at 07-01 and returns on 07-10.
        let july: (TestWorld) -> [Transaction] = { w in
            Self.short(w, Self.h) + [Self.back(w, Self.h, "2026-07-10T12:00:00Z")]
        }
        #expect(Self.counted(july, start: "2026-07-15") == [:])
        #expect(Self.counted(july, start: "2026-07-02") == [:])
        #expect(Self.counted(july, start: "2026-07-01") == ["2026-07 wb.a": "T 1 1 0 | H 0 0 0"])
        #expect(Self.counted(july, start: "2026-01-01") == ["2026-07 wb.a": "T 1 1 0 | H 0 0 0"])
        // G, eligible at every month start: from a start on 2026-10-01, October only.
        #expect(
            Self.counted({ w in Self.short(w, Self.g) }, start: "2026-10-01") == ["2026-10 wb.a": "T 1 0 0 | H 0 0 0"])
        #expect(
            Self.counted({ w in Self.short(w, Self.g) }, start: "2026-09-30") == ["2026-10 wb.a": "T 1 0 0 | H 0 0 0"])
    }

    @Test(
        "cohort months are the window's months whose first instant is on or after the start",
        arguments: [
            ("2020-01-01", 0..<4),
            ("2026-07-01", 0..<4),
            ("2026-07-02", 1..<4),
            ("2026-07-15", 1..<4),
            ("2026-08-01", 1..<4),
            ("2026-10-01", 3..<4),
            ("2026-10-02", 4..<4),
            ("2026-11-01", 4..<4),
            ("2027-01-01", 4..<4),
        ])
    func cohorts(start: String, expected: Range<Int>) {
        let window = ReportWindow(asOf: ms(Self.asOf), months: Self.windowMonths)
        #expect(UpliftReport.cohorts(window, Self.experiment(start: start)) == expected)
    }

    @Test("a redemption whose episode began before the month is a return of the month but not a redemption")
    func episodeStartedEarlier() {
        // Lapsed 2026-04-01T12; back with wb.a 06-01T00 → 07-01T00 (a new run: 1 paid month),
        // so eligible for wb.a at 08-01 (1 month since); the same offer again on 08-10 is 40
        // days after, the same episode: its first row is in June.
        let rows: (TestWorld) -> [Transaction] = { w in
            var t = Self.short(w, Self.a)
            t.append(
                w.tx("2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z", customer: Self.a, offerType: 4, offerId: "wb.a"))
            t.append(Self.back(w, Self.a, "2026-08-10T12:00:00Z", offerType: 4, offerId: "wb.a"))
            return t
        }
        #expect(Self.counted(rows) == ["2026-08 wb.a": "T 1 1 0 | H 0 0 0"])
    }

    @Test("a customer who is not eligible at the month's start is not counted, whatever they do")
    func notEligibleNotCounted() {
        let rows: (TestWorld) -> [Transaction] = { w in
            w.monthly(from: "2026-04-15T12:00:00Z", count: 3, customer: Self.q)
                + [Self.back(w, Self.q, "2026-08-20T12:00:00Z", offerType: 4, offerId: "wb.a")]
                + w.monthly(from: "2026-06-01T12:00:00Z", count: 6, customer: Self.p)
        }
        #expect(Self.counted(rows) == [:])
    }

    // MARK: - No cohort month, no experiment

    @Test("without a cohort month the * month rows are still written, all zero")
    func noCohortMonth() {
        let w = TestWorld()
        // The start is after the window's last month (2026-10): no cohort month.
        let r = runWithExperiment(
            w, Self.world(w), offers: Self.offers, experiment: Self.experiment(start: "2026-10-02"), asOf: Self.asOf,
            windowMonths: Self.windowMonths
        ).reports
        #expect(r.uplift.isEmpty)
        #expect(
            Self.csv(r) == """
                month,offer_id,treatment_customers,treatment_returned,treatment_redeemed,holdout_customers,holdout_returned,holdout_redeemed,treatment_return_rate,holdout_return_rate,lift,lift_low,lift_high,incremental_returns
                *,wb.a,0,0,0,0,0,0,,,,,,
                *,wb.b,0,0,0,0,0,0,,,,,,
                *,*,0,0,0,0,0,0,,,,,,

                """)
    }

    @Test("an arm with nobody: its rate, the lift and the incremental returns are empty")
    func emptyArm() {
        let w = TestWorld()
        // From a start on 09-01: G (treatment) under wb.a, L (held out) under wb.b, in September
        // and October. Each offer has one arm empty; the * rows have both.
        let r = runWithExperiment(
            w, Self.short(w, Self.g) + Self.long(w, Self.l), offers: Self.offers,
            experiment: Self.experiment(start: "2026-09-01"), asOf: Self.asOf, windowMonths: Self.windowMonths
        ).reports
        let lines = Self.csv(r).split(separator: "\n").map(String.init)
        #expect(
            Array(lines.dropFirst()) == [
                "2026-09,wb.a,1,0,0,0,0,0,0.0000,,,,,",
                "2026-09,wb.b,0,0,0,1,0,0,,0.0000,,,,",
                "2026-09,*,1,0,0,1,0,0,0.0000,0.0000,0.0000,-0.7935,0.7935,0",
                "2026-10,wb.a,1,0,0,0,0,0,0.0000,,,,,",
                "2026-10,wb.b,0,0,0,1,0,0,,0.0000,,,,",
                "2026-10,*,1,0,0,1,0,0,0.0000,0.0000,0.0000,-0.7935,0.7935,0",
                "*,wb.a,2,0,0,0,0,0,0.0000,,,,,",
                "*,wb.b,0,0,0,2,0,0,,0.0000,,,,",
                "*,*,2,0,0,2,0,0,0.0000,0.0000,0.0000,-0.6576,0.6576,0",
            ])
    }

    @Test("without an experiment there is no uplift")
    func noExperiment() {
        let w = TestWorld()
        let r = runWithExperiment(
            w, Self.world(w), offers: Self.offers, experiment: nil, asOf: Self.asOf, windowMonths: Self.windowMonths
        ).reports
        #expect(r.experiment == nil)
        #expect(r.uplift.isEmpty)
    }

    // MARK: - Numbers as text

    @Test(
        "lift and its bounds: 4 decimals, half away from zero, never -0.0000",
        arguments: [
            (0.03125, "0.0313"),  // exactly half: away from zero
            (-0.03125, "-0.0313"),
            (0.46875, "0.4688"),
            (-0.46875, "-0.4688"),
            (0.000049, "0.0000"),
            (-0.000049, "0.0000"),
            (-0.0, "0.0000"),
            (0.0, "0.0000"),
            (-0.000051, "-0.0001"),
            (1.0, "1.0000"),
            (-1.0, "-1.0000"),
            (0.1556, "0.1556"),
            (-0.0863, "-0.0863"),
        ])
    func decimals(value: Double, expected: String) {
        #expect(UpliftReport.decimal(value) == expected)
    }

    @Test(
        "incremental returns: lift × treatment customers, half away from zero; none without both arms",
        arguments: [
            (10, 5, 4, 1, 3 as Int?),  // 0.25 × 10 = 2.5 → 3
            (10, 0, 4, 1, -3),  // −2.5 → −3
            (2, 1, 4, 1, 1),  // 0.5 → 1
            (2, 0, 4, 1, -1),  // −0.5 → −1
            (6, 4, 2, 0, 4),
            (20_000, 10_000, 20_001, 10_001, 0),  // −0.49998 → 0, not −0
            (3, 1, 0, 0, nil),
            (0, 0, 2, 1, nil),
        ] as [(Int, Int, Int, Int, Int?)])
    func incrementalReturns(n1: Int, x1: Int, n0: Int, x0: Int, expected: Int?) {
        let row = UpliftRow(
            month: "2026-08", offerId: "wb.a", treatment: ArmCounts(customers: n1, returned: x1),
            holdout: ArmCounts(customers: n0, returned: x0))
        #expect(row.incrementalReturns == expected)
    }

    @Test("rates and lift in the CSV: empty when an arm has nobody, a negative written with a plain minus")
    func csvText() {
        let ids = ["a", "b", "c", "d", "e", "f", "g"]
        let counts: [(ArmCounts, ArmCounts)] = [
            (ArmCounts(customers: 10, returned: 5), ArmCounts(customers: 4, returned: 1)),
            (ArmCounts(customers: 10, returned: 0), ArmCounts(customers: 4, returned: 1)),
            (ArmCounts(customers: 2, returned: 1), ArmCounts(customers: 4, returned: 1)),
            (ArmCounts(customers: 2, returned: 0), ArmCounts(customers: 4, returned: 1)),
            (ArmCounts(customers: 20_000, returned: 10_000), ArmCounts(customers: 20_001, returned: 10_001)),
            (ArmCounts(customers: 3, returned: 1, redeemed: 1), ArmCounts()),
            (ArmCounts(), ArmCounts(customers: 2, returned: 1, redeemed: 1)),
        ]
        let rows = zip(ids, counts).map { UpliftRow(month: "2026-08", offerId: $0, treatment: $1.0, holdout: $1.1) }
        let lines = text(UpliftReport.csv(rows, offerIds: ids)).split(separator: "\n").map(String.init)
        // Computed independently (Python) from §9.2's formulas.
        #expect(
            Array(lines[1...7]) == [
                "2026-08,a,10,5,0,4,1,0,0.5000,0.2500,0.2500,-0.2709,0.5834,3",
                "2026-08,b,10,0,0,4,1,0,0.0000,0.2500,-0.2500,-0.6994,0.0947,-3",
                "2026-08,c,2,1,0,4,1,0,0.5000,0.2500,0.2500,-0.3553,0.7041,1",
                "2026-08,d,2,0,0,4,1,0,0.0000,0.2500,-0.2500,-0.6994,0.4387,-1",
                "2026-08,e,20000,10000,0,20001,10001,0,0.5000,0.5000,0.0000,-0.0098,0.0098,0",
                "2026-08,f,3,1,1,0,0,0,0.3333,,,,,",
                "2026-08,g,0,0,0,2,1,1,,0.5000,,,,",
            ])
        let all = lines.joined(separator: "\n")
        #expect(!all.contains("'"))
        #expect(!all.contains("-0.0000"))
        #expect(!all.contains(",-0,") && !all.hasSuffix(",-0"))
        // 17 lines: the header, 7 offers and * for the month, 7 offers and * for every month.
        #expect(lines.count == 17)
        #expect(lines[8].hasPrefix("2026-08,*,20027,10007,1,20019,10006,1,"))
        #expect(lines[16].hasPrefix("*,*,20027,10007,1,20019,10006,1,"))
    }

    // MARK: - Audiences

    /// Churned and eligible at T: A (short, treatment), C (long, treatment), K (short, held
    /// out), L (long, held out).
    static func audienceWorld(_ w: TestWorld) -> [Transaction] {
        Self.short(w, Self.a) + Self.long(w, Self.c) + Self.short(w, Self.k) + Self.long(w, Self.l)
    }

    /// Original transaction ids of a segment CSV, in order.
    static func segmentIds(_ dir: String, _ name: String) throws -> [String] {
        let t = try String(contentsOfFile: dir + "/segments/" + name + ".csv", encoding: .utf8)
        return t.split(separator: "\n").dropFirst().map { String($0.split(separator: ",")[1]) }
    }

    @Test("held-out customers are in no segment but in the holdout list, once the experiment applies")
    func heldOutAudiences() throws {
        let w = TestWorld()
        let run = runWithExperiment(
            w, Self.audienceWorld(w), offers: Self.offers, experiment: Self.experiment(), asOf: Self.asOf,
            windowMonths: 1)
        let audience = run.audience
        let byId = Dictionary(
            uniqueKeysWithValues: audience.results.map {
                (w.strings.string(run.customers.originalTransactionIds[Int($0.customer)]), $0)
            })
        #expect(byId.keys.sorted() == [Self.k, Self.l, Self.a, Self.c])
        for id in [Self.k, Self.l] {
            #expect(byId[id]?.heldOut == true)
            #expect(byId[id].map(audience.isLeftOut) == true)
        }
        for id in [Self.a, Self.c] {
            #expect(byId[id]?.heldOut == false)
            #expect(byId[id].map(audience.isLeftOut) == false)
        }
        // Left out of wb.a: K and L; of wb.b: L; of best-offer: K (wb.a) and L (wb.b).
        let held = audience.heldOut(.off, offers: 2)
        #expect(held.perOffer == [2, 1])
        #expect(held.best == 2)

        let dir = Paths.temporary()
        _ = try SegmentWriter(customers: run.customers, audience: audience, book: run.book, formats: ["csv"])
            .write(to: dir, threads: 1)
        #expect(try Self.segmentIds(dir, "wb.a") == [Self.a, Self.c])
        #expect(try Self.segmentIds(dir, "wb.b") == [Self.c])
        #expect(try Self.segmentIds(dir, "best-offer") == [Self.a, Self.c])
        #expect(try Self.segmentIds(dir, "holdout") == [Self.k, Self.l])
    }

    @Test(
        "the experiment applies from its start: before it, nobody is left out though the arms are drawn",
        arguments: [
            ("2026-11-22", "2026-11-22", true),  // T on the start's first instant
            ("2026-11-22T00:00:00.001Z", "2026-11-22", true),
            ("2026-11-21T23:59:59.999Z", "2026-11-22", false),
            ("2026-11-22", "2026-11-23", false),
            ("2026-11-22", "2026-06-01", true),
        ])
    func appliesFromStart(asOf: String, start: String, applies: Bool) throws {
        let e = Self.experiment(start: start)
        #expect(e.applies(at: ms(asOf)) == applies)
        let w = TestWorld()
        let run = runWithExperiment(
            w, Self.audienceWorld(w), offers: Self.offers, experiment: e, asOf: asOf, windowMonths: 1)
        let audience = run.audience
        #expect(audience.results.filter(\.heldOut).count == 2)
        #expect(audience.results.filter(audience.isLeftOut).count == (applies ? 2 : 0))
        let held = audience.heldOut(.off, offers: 2)
        #expect(held.perOffer == (applies ? [2, 1] : [0, 0]))
        #expect(held.best == (applies ? 2 : 0))

        let dir = Paths.temporary()
        _ = try SegmentWriter(customers: run.customers, audience: audience, book: run.book, formats: ["csv"])
            .write(to: dir, threads: 1)
        let all = [Self.k, Self.l, Self.a, Self.c]
        #expect(try Self.segmentIds(dir, "wb.a") == (applies ? [Self.a, Self.c] : all))
        #expect(try Self.segmentIds(dir, "best-offer") == (applies ? [Self.a, Self.c] : all))
        #expect(try Self.segmentIds(dir, "holdout") == (applies ? [Self.k, Self.l] : []))
    }

    @Test("without an experiment nobody is held out and no holdout list is written")
    func noExperimentNoHoldout() throws {
        let w = TestWorld()
        let run = runWithExperiment(
            w, Self.audienceWorld(w), offers: Self.offers, experiment: nil, asOf: Self.asOf, windowMonths: 1)
        #expect(run.audience.results.allSatisfy { !$0.heldOut && !run.audience.isLeftOut($0) })
        #expect(run.audience.heldOut(.off, offers: 2).perOffer == [0, 0])
        let dir = Paths.temporary()
        _ = try SegmentWriter(customers: run.customers, audience: run.audience, book: run.book, formats: ["csv"])
            .write(to: dir, threads: 1)
        #expect(!FileManager.default.fileExists(atPath: dir + "/segments/holdout.csv"))
        #expect(try Self.segmentIds(dir, "best-offer").count == 4)
    }
}
