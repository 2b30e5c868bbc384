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
        for k in 0..<customers.count {
            successive.reset()
            for t in instants {
                let reused = successive.timeline(rows: customers.rows(of: k), at: t, gapDays: 60)
                let fresh = CustomerTimeline.build(
                    rows: customers.rows(of: k), asOf: t, gapDays: 60, renewal: nil, periods: &periods)
                #expect(reused == fresh, "customer \(w.strings.string(customers.originalTransactionIds[k])) at \(Timestamp.iso(t))")
            }
        }
    }
}
