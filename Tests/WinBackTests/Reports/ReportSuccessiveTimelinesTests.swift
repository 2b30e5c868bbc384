import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Report month instants: the reused reconstruction equals a fresh one")
struct ReportSuccessiveTimelinesTests {
    /// Every customer of both report worlds, plus refunds and an upgrade that become known
    /// between two instants, at every first instant of 2025-01 … 2027-01 and a few in between.
    @Test("at every instant, for every customer, the same timeline as CustomerTimeline.build")
    func sameAsFreshBuild() {
        let w = TestWorld()
        var rows = RedemptionReportTests.world(w) + WinBackReportsTests.world(w)
        rows += w.monthly(from: "2025-02-10T09:00:00Z", count: 4, customer: "refunded")
        rows.append(
            w.tx("2025-06-10T09:00:00Z", "2025-07-10T09:00:00Z", customer: "refunded", revoked: "2025-06-20T00:00:00Z"))
        rows.append(w.tx("2025-03-01T12:00:00Z", "2025-04-01T12:00:00Z", customer: "upgraded", upgraded: true))
        rows.append(w.tx("2025-03-15T12:00:00Z", "2025-04-15T12:00:00Z", product: "premium", customer: "upgraded"))
        rows.append(
            w.tx(
                "2025-04-15T12:00:00Z", "2025-05-15T12:00:00Z", product: "premium", customer: "upgraded",
                revoked: "2025-09-01T00:00:00Z"))
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        var instants = (0..<25).map { MonthMath.monthStart(ms("2025-01-01"), offset: Int64($0)) }
        instants += [
            "2025-06-20T00:00:00Z", "2025-06-20T00:00:00.001Z", "2026-05-05T12:00:00Z", "2026-09-10T12:00:00Z",
        ].map(ms)
        instants.sort()
        var successive = SuccessiveTimelines()
        var periods: [Period] = []
        var shortcuts = 0
        for k in 0..<customers.count {
            successive.reset()
            for t in instants {
                let reused = successive.timeline(rows: customers.rows(of: k), at: t, gapDays: 60)
                let fresh = CustomerTimeline.build(
                    rows: customers.rows(of: k), asOf: t, gapDays: 60, renewal: nil, periods: &periods)
                #expect(
                    reused == fresh,
                    "customer \(w.strings.string(customers.originalTransactionIds[k])) at \(Timestamp.iso(t))")
                if SuccessiveTimelines.lastPeriodContains(rows: customers.rows(of: k), t) {
                    shortcuts += 1
                    #expect(
                        fresh?.state == .active,
                        "customer \(w.strings.string(customers.originalTransactionIds[k])) at \(Timestamp.iso(t))")
                }
            }
        }
        #expect(shortcuts > 20)
    }

    /// On random histories (overlaps, refunds known early or late, upgrades, family sharing,
    /// empty and free periods), the last-period shortcut never calls active a customer whom the
    /// full reconstruction does not.
    @Test("the last-period shortcut only ever says active when the customer is active")
    func shortcutIsSound() {
        let w = TestWorld()
        var rng = SplitMix64(seed: 3)
        var rows: [Transaction] = []
        let start = ms("2024-01-01T00:00:00Z")
        for c in 0..<300 {
            var t = start + Int64(rng.below(200)) * MonthMath.day
            for _ in 0..<(1 + rng.below(12)) {
                let length = [7, 30, 31, 365, 0][rng.below(5)] * MonthMath.day + Int64(rng.below(3)) * 3_600_000
                let revoked: String? =
                    rng.below(6) == 0 ? Timestamp.iso(t + Int64(rng.below(60)) * MonthMath.day) : nil
                rows.append(
                    w.tx(
                        Timestamp.iso(t), Timestamp.iso(t + length), customer: "c\(c)", free: rng.below(5) == 0,
                        revoked: revoked, upgraded: rng.below(8) == 0, family: rng.below(8) == 0))
                t += [length, length / 2, length + 90 * MonthMath.day, MonthMath.day][rng.below(4)]
            }
        }
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        var periods: [Period] = []
        var shortcuts = 0
        var checked = 0
        for k in 0..<customers.count {
            for m in 0..<36 {
                let t = MonthMath.monthStart(start, offset: Int64(m)) + Int64(rng.below(3)) * 43_200_000
                let fresh = CustomerTimeline.build(
                    rows: customers.rows(of: k), asOf: t, gapDays: 60, renewal: nil, periods: &periods)
                checked += 1
                if SuccessiveTimelines.lastPeriodContains(rows: customers.rows(of: k), t) {
                    shortcuts += 1
                    #expect(fresh?.state == .active, "customer \(k) at \(Timestamp.iso(t))")
                }
            }
        }
        #expect(shortcuts > checked / 10)
    }

    @Test("rebuilt says whether rows or revocations changed since the last instant; unlessUnchanged skips only then")
    func rebuiltAndSkip() {
        let w = TestWorld()
        var rows = w.monthly(from: "2025-01-10T12:00:00Z", count: 3)
        rows.append(w.tx("2025-09-10T12:00:00Z", "2025-10-10T12:00:00Z", revoked: "2025-09-20T00:00:00Z"))
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        var s = SuccessiveTimelines()
        func at(_ t: String, skip: Bool = false) -> CustomerTimeline? {
            s.timeline(rows: customers.rows(of: 0), at: ms(t), gapDays: 60, unlessUnchanged: skip)
        }
        #expect(at("2025-05-01") != nil && s.rebuilt)  // first call
        #expect(at("2025-06-01", skip: true) == nil && !s.rebuilt)  // nothing new: skipped
        #expect(at("2025-07-01")?.monthsSinceLastSubscribed == 2 && !s.rebuilt)  // same periods, clock moved
        #expect(at("2025-09-15", skip: true) != nil && s.rebuilt)  // a row bought: not skipped
        #expect(at("2025-09-18", skip: true) == nil && !s.rebuilt)
        #expect(at("2025-10-01", skip: true)?.state == .churned && s.rebuilt)  // the refund became known
    }

    /// Random histories over two groups and three products, with offers that fail on product,
    /// territory, paid months, months since and the wait: the monthly eligible counts, which
    /// skip offers failed for a reason only a rebuilt reconstruction can change, equal those
    /// of a fresh evaluation of every customer at every month's first instant.
    @Test("monthly eligible counts equal a fresh evaluation at every month start")
    func monthlyCountsEqualFreshEvaluation() {
        let w = TestWorld()
        var rng = SplitMix64(seed: 11)
        var rows: [Transaction] = []
        let start = ms("2024-01-01T00:00:00Z")
        let products = ["basic", "premium", "yearly"]
        let stores = ["USA", "CAN", "FRA"]
        for c in 0..<400 {
            var t = start + Int64(rng.below(400)) * MonthMath.day
            let group = c % 5 == 0 ? "g2" : "g1"
            for _ in 0..<(1 + rng.below(10)) {
                let product = products[rng.below(3)]
                let length = (product == "yearly" ? 365 : [30, 31, 0][rng.below(3)]) * MonthMath.day
                let revoked: String? =
                    rng.below(7) == 0 ? Timestamp.iso(t + Int64(rng.below(90)) * MonthMath.day) : nil
                let winBack = rng.below(6) == 0
                rows.append(
                    w.tx(
                        Timestamp.iso(t), Timestamp.iso(t + length), product: product, group: group,
                        customer: "c\(c)", free: rng.below(6) == 0, offerType: winBack ? 4 : 0,
                        offerId: winBack ? ["wb.a", "wb.b"][rng.below(2)] : nil, revoked: revoked,
                        storefront: stores[rng.below(3)]))
                t += [length, length + Int64(rng.below(200)) * MonthMath.day, MonthMath.day][rng.below(3)]
            }
        }
        func offer(
            _ id: String, _ product: String, group: String = "g1", paid: Int, min: Int, max: Int, wait: Int?,
            territories: [String] = []
        ) -> Offer {
            Offer(
                offerId: id, subscriptionGroupId: group, productId: product, paidMonths: paid, minMonthsSince: min,
                maxMonthsSince: max, waitMonths: wait, startDay: nil, endDay: nil, priority: .normal,
                territories: territories)
        }
        let offers = [
            offer("wb.a", "basic", paid: 2, min: 1, max: 6, wait: 3),
            offer("wb.b", "basic", paid: 0, min: 0, max: 60, wait: nil, territories: ["USA"]),
            offer("wb.c", "premium", paid: 5, min: 2, max: 24, wait: 6, territories: ["CAN", "FRA"]),
            offer("wb.d", "yearly", group: "g2", paid: 11, min: 0, max: 12, wait: nil),
        ]
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        let book = OfferBook(catalog: OfferCatalog(offers: offers), ids: { w.strings.lookup($0) })
        let window = ReportWindow(asOf: ms("2026-11-22"), months: 30)
        var tally = RedemptionRatesReport.cells(window, book: book)
        var scratch = RedemptionRatesReport.Scratch()
        var episodes: [Episode] = []
        var expected = [Int](repeating: 0, count: tally.count)
        var periods: [Period] = []
        var none: [UpliftRow] = []
        for k in 0..<customers.count {
            let rows = customers.rows(of: k)
            Episode.scan(rows, asOf: ms("2026-11-22"), gapDays: 60, into: &episodes)
            RedemptionRatesReport.count(
                rows: rows, group: customers.groups[k], episodes: episodes, book: book, window: window, gapDays: 60,
                scratch: &scratch, into: &tally, uplift: &none)
            for (m, tm) in window.months.enumerated() {
                guard
                    let tl = CustomerTimeline.build(rows: rows, asOf: tm, gapDays: 60, renewal: nil, periods: &periods),
                    tl.state == .churned
                else { continue }
                for o in book.rankedByGroup[customers.groups[k]] ?? []
                where book.offers[o].failures(tl, asOf: tm).isEmpty {
                    expected[m * offers.count + o] += 1
                }
            }
        }
        #expect(tally.map(\.eligibleAtMonthStart) == expected)
        #expect(expected.reduce(0, +) > 200)
        #expect(
            Set(offers.indices.map { o in window.months.indices.reduce(0) { $0 + expected[$1 * offers.count + o] } })
                .count > 1)
    }
}
