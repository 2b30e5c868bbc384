import Testing

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Dates that do not exist say why")
struct TimestampTests {
    @Test(
        "a date written YYYY-MM-DD that names no day says which part is wrong",
        arguments: [
            ("2026-02-30", "February 2026 has 28 days"),
            ("2024-02-30", "February 2024 has 29 days"),
            ("2026-04-31", "April 2026 has 30 days"),
            ("2026-13-01", "there is no month 13"),
            ("2026-00-10", "there is no month 0"),
            ("2026-01-00", "there is no day 0"),
            ("2026-02-30T00:00:00Z", "February 2026 has 28 days"),
        ])
    func impossible(text: String, why: String) {
        #expect(Timestamp.parseDate(text) == nil)
        #expect(Timestamp.whyNotADate(text) == why)
    }

    @Test(
        "a real date, or text not written as a date, has no such reason",
        arguments: ["2026-02-28", "2024-02-29", "2026-2-3", "yesterday", "2026/02/30", "2026-02-30x", ""])
    func noReason(text: String) {
        #expect(Timestamp.whyNotADate(text) == nil)
    }
}
