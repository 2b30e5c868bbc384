import Testing

@testable import WinBack

@Suite("Report month instants: the reused reconstruction equals a fresh one")
struct ReportSuccessiveTimelinesTests {
    /// Every customer of both report worlds, plus refunds and an upgrade that become known
    /// between two instants, at every first instant of 2025-01 … 2027-01 and a few in between.
    @Test("at every instant, for every customer, the same timeline as CustomerTimeline.build")
    func sameAsFreshBuild() {
        let w = TestWorld()
        var rows = RedemptionReportTests.world(w) + WinBackReportsTests.world(w)
        rows += w.monthly(from: "2025-02-10T09:00:00Z", count: 4, customer: "refunded")
        rows.append(w.tx("2025-06-10T09:00:00Z", "2025-07-10T09:00:00Z", customer: "refunded", revoked: "2025-06-20T00:00:00Z"))
        rows.append(w.tx("2025-03-01T12:00:00Z", "2025-04-01T12:00:00Z", customer: "upgraded", upgraded: true))
        rows.append(w.tx("2025-03-15T12:00:00Z", "2025-04-15T12:00:00Z", product: "premium", customer: "upgraded"))
        rows.append(w.tx("2025-04-15T12:00:00Z", "2025-05-15T12:00:00Z", product: "premium", customer: "upgraded", revoked: "2025-09-01T00:00:00Z"))
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        var instants = (0..<25).map { MonthMath.monthStart(ms("2025-01-01"), offset: Int64($0)) }
        instants += ["2025-06-20T00:00:00Z", "2025-06-20T00:00:00.001Z", "2026-05-05T12:00:00Z", "2026-09-10T12:00:00Z"].map(ms)
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
                #expect(reused == fresh, "customer \(w.strings.string(customers.originalTransactionIds[k])) at \(Timestamp.iso(t))")
                if SuccessiveTimelines.lastPeriodContains(rows: customers.rows(of: k), t) {
                    shortcuts += 1
                    #expect(fresh?.state == .active, "customer \(w.strings.string(customers.originalTransactionIds[k])) at \(Timestamp.iso(t))")
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
        var shortcuts = 0, checked = 0
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
}
