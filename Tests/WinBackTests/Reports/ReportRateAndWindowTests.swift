import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Report rates and window (docs/rules.md §4.3)")
struct ReportRateAndWindowTests {
    @Test(
        "rates have four decimals rounded half up, and are empty without a denominator",
        arguments: [
            (1, 32, "0.0313"),  // 0.03125: the half goes up
            (3, 32, "0.0938"),  // 0.09375
            (1, 3, "0.3333"),
            (2, 3, "0.6667"),
            (1, 20_000, "0.0001"),  // 0.00005
            (1, 20_001, "0.0000"),  // just under the half
            (0, 7, "0.0000"),
            (7, 7, "1.0000"),
            (0, 0, ""),
            (3, 0, ""),
        ] as [(Int, Int, String)])
    func rateFormat(numerator: Int, denominator: Int, expected: String) {
        #expect(Rate.format(numerator, denominator) == expected)
    }

    @Test("T = 2026-11-22 with 12 months: 2025-11 … 2026-10, redemptions counted from 2025-11-01")
    func windowOfTwelveMonths() {
        let w = ReportWindow(asOf: ms("2026-11-22"), months: 12)
        #expect(
            w.months.indices.map(w.label) == [
                "2025-11", "2025-12", "2026-01", "2026-02", "2026-03", "2026-04", "2026-05", "2026-06", "2026-07",
                "2026-08", "2026-09", "2026-10",
            ])
        #expect(w.start == ms("2025-11-01"))
        #expect(w.currentMonth == ms("2026-11-01"))
    }

    @Test(
        "an instant falls in the complete month holding it; before the window or in the current month, in none",
        arguments: [
            ("2025-10-31T23:59:59.999Z", nil),
            ("2025-11-01T00:00:00Z", 0),
            ("2026-02-28T23:59:59.999Z", 3),
            ("2026-03-01T00:00:00Z", 4),
            ("2026-10-31T23:59:59.999Z", 11),
            ("2026-11-01T00:00:00Z", nil),
        ] as [(String, Int?)])
    func monthOfInstant(at: String, expected: Int?) {
        #expect(ReportWindow(asOf: ms("2026-11-22"), months: 12).month(of: ms(at)) == expected)
    }
}
