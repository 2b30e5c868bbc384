import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Month arithmetic (docs/rules.md §3)")
struct MonthMathTests {
    @Test(
        "addMonths clamps the day to the target month and keeps the time of day",
        arguments: [
            ("2025-01-31T12:00:00Z", 1, "2025-02-28T12:00:00.000Z"),
            ("2024-01-31T12:00:00Z", 1, "2024-02-29T12:00:00.000Z"),  // leap year
            ("2024-02-29T08:30:00Z", 12, "2025-02-28T08:30:00.000Z"),
            ("2024-02-29T08:30:00Z", 48, "2028-02-29T08:30:00.000Z"),
            ("2025-03-31T00:00:00Z", -1, "2025-02-28T00:00:00.000Z"),
            ("2025-01-15T23:59:59.999Z", -1, "2024-12-15T23:59:59.999Z"),
            ("2025-12-15T01:00:00Z", 1, "2026-01-15T01:00:00.000Z"),
            ("2025-05-31T12:00:00Z", 1, "2025-06-30T12:00:00.000Z"),
            ("2025-01-31T12:00:00Z", 2, "2025-03-31T12:00:00.000Z"),
            ("1900-01-31T00:00:00Z", 1, "1900-02-28T00:00:00.000Z"),  // not a leap year
            ("2000-01-31T00:00:00Z", 1, "2000-02-29T00:00:00.000Z"),  // a leap year
            ("1969-12-31T23:00:00Z", 2, "1970-02-28T23:00:00.000Z"),  // before the epoch
            ("2025-06-10T00:00:00Z", 0, "2025-06-10T00:00:00.000Z"),
        ])
    func addMonths(start: String, k: Int, expected: String) {
        #expect(Timestamp.iso(MonthMath.addMonths(ms(start), Int64(k))) == expected)
    }

    @Test(
        "wholeMonths is the largest k with addMonths(a, k) ≤ b",
        arguments: [
            ("2025-01-31T12:00:00Z", "2025-02-28T12:00:00Z", 1),
            ("2025-01-31T12:00:00Z", "2025-02-28T11:59:59.999Z", 0),
            ("2025-05-01T12:00:00Z", "2025-07-01T00:00:00Z", 1),
            ("2025-05-01T12:00:00Z", "2025-07-01T12:00:00Z", 2),
            ("2025-05-01T12:00:00Z", "2025-05-01T12:00:00Z", 0),
            ("2025-05-01T12:00:00Z", "2025-04-01T12:00:00Z", 0),  // b before a
            ("2024-02-29T00:00:00Z", "2025-02-28T00:00:00Z", 12),
            ("2024-02-29T00:00:00Z", "2025-02-27T23:59:59.999Z", 11),
            ("2020-01-15T00:00:00Z", "2026-01-15T00:00:00Z", 72),
            ("2025-03-31T00:00:00Z", "2025-04-30T00:00:00Z", 1),
        ])
    func wholeMonths(a: String, b: String, expected: Int) {
        #expect(MonthMath.wholeMonths(ms(a), ms(b)) == Int64(expected))
    }

    @Test(
        "calendarMonths adds the elapsed fraction of the next month",
        arguments: [
            ("2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z", 1.0),
            ("2025-02-01T00:00:00Z", "2025-02-15T00:00:00Z", 0.5),  // 14 of 28 days
            ("2024-02-01T00:00:00Z", "2024-02-15T00:00:00Z", 14.0 / 29.0),  // leap February
            ("2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z", 1.0),  // clamped month counts whole
            ("2025-01-15T00:00:00Z", "2025-03-01T00:00:00Z", 1.0 + 14.0 / 28.0),
            ("2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z", 12.0),
            ("2025-03-01T00:00:00Z", "2025-03-01T00:00:00Z", 0.0),
        ])
    func calendarMonths(a: String, b: String, expected: Double) {
        #expect(abs(MonthMath.calendarMonths(ms(a), ms(b)) - expected) < 1e-12)
    }

    /// The definition (docs/rules.md §3, notation): k whole months plus the elapsed fraction of
    /// the next, each month's edges by ``MonthMath/addMonths(_:_:)``. A period of whole months
    /// (most renewals) is k exactly, with no division made for it.
    @Test("calendarMonths is k plus the fraction of the next month, exactly, whole months or not")
    func calendarMonthsByDefinition() {
        var rng = SplitMix64(seed: 29)
        let start = ms("2000-01-01T00:00:00Z")
        for i in 0..<20_000 {
            let a = start + Int64(rng.next() % UInt64(30 * 365 * MonthMath.day))
            let k = Int64(rng.next() % 40)
            // Every other period ends on a month's edge from a; the rest anywhere in the month.
            let b = i % 2 == 0 ? MonthMath.addMonths(a, k) : a + Int64(rng.next() % UInt64(40 * 31 * MonthMath.day))
            let whole = MonthMath.wholeMonths(a, b)
            let lo = MonthMath.addMonths(a, whole)
            let hi = MonthMath.addMonths(a, whole + 1)
            let expected = Double(whole) + Double(b - lo) / Double(hi - lo)
            #expect(MonthMath.calendarMonths(a, b) == expected, "\(a) \(b)")
            if i % 2 == 0 { #expect(MonthMath.calendarMonths(a, b) == Double(whole)) }
        }
    }

    @Test("ISO timestamps are written with fixed widths, at the edges of days, years and the format")
    func isoTimestamps() {
        let day = MonthMath.day
        #expect(Timestamp.iso(0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.iso(-1) == "1969-12-31T23:59:59.999Z")
        #expect(
            Timestamp.iso(MonthMath.daysFromCivil(year: 2024, month: 2, day: 29) * day + 3_723_004)
                == "2024-02-29T01:02:03.004Z")
        #expect(Timestamp.iso(MonthMath.daysFromCivil(year: 1, month: 1, day: 1) * day) == "0001-01-01T00:00:00.000Z")
        #expect(
            Timestamp.iso(MonthMath.daysFromCivil(year: 10000, month: 1, day: 1) * day - 1)
                == "9999-12-31T23:59:59.999Z")
        // Past four digits of year, the general path.
        #expect(
            Timestamp.iso(MonthMath.daysFromCivil(year: 10000, month: 1, day: 1) * day) == "10000-01-01T00:00:00.000Z")
        #expect(
            Timestamp.iso(MonthMath.daysFromCivil(year: -1, month: 12, day: 31) * day) == "-0001-12-31T00:00:00.000Z")
        // Every written timestamp reads back as itself.
        var rng = SplitMix64(seed: 11)
        for _ in 0..<2000 {
            let t = Int64(rng.next() % UInt64(253_402_300_800_000))  // up to 9999-12-31
            #expect(Timestamp.parseDateTime(Timestamp.iso(t)) == t, "\(t)")
        }
    }

    @Test("civil dates round-trip over four centuries")
    func civilRoundTrip() {
        var day = MonthMath.daysFromCivil(year: 1900, month: 1, day: 1)
        let end = MonthMath.daysFromCivil(year: 2300, month: 1, day: 1)
        var previous = (year: Int64(1899), month: Int64(12), day: Int64(31))
        while day < end {
            let c = MonthMath.civilFromDays(day)
            #expect(MonthMath.daysFromCivil(year: c.year, month: c.month, day: c.day) == day)
            // Consecutive days step by one day, month or year.
            let next = previous.day + 1 <= MonthMath.daysInMonth(year: previous.year, month: previous.month)
            if next {
                #expect(c == (previous.year, previous.month, previous.day + 1))
            } else {
                #expect(c.day == 1)
            }
            previous = c
            day += 1
        }
    }

    @Test("the 32-bit calendar forms agree with the general ones, day by day and at their limits")
    func fastCalendarAgrees() {
        // Every day of ±2,000 years around the epoch, and 10,000 days at each edge of the
        // fast range and beyond it.
        var days = Array(Int64(-730_500)...Int64(730_500))
        for edge: Int64 in [-11_000_000, 11_000_000] { days += Array((edge - 5000)...(edge + 5000)) }
        var civilMismatches = 0
        var dayMismatches = 0
        for z in days {
            let c = MonthMath.civilFromDays(z)
            let g = MonthMath.civilFromDaysGeneral(z)
            if c != g { civilMismatches += 1 }
            if MonthMath.daysFromCivil(year: g.year, month: g.month, day: g.day) != z { dayMismatches += 1 }
        }
        #expect(civilMismatches == 0)
        #expect(dayMismatches == 0)
        // Every month and day number 1...31 (past a month's end counts on, as in the general
        // form) of years at and beyond the fast range's edges, and of leap and common years.
        var mismatches: [String] = []
        for year: Int64 in [-32_001, -32_000, -31_999, -1, 0, 1, 1900, 2000, 2024, 2100, 31_999, 32_000, 32_001] {
            for month: Int64 in 1...12 {
                for day: Int64 in 1...31
                where MonthMath.daysFromCivil(year: year, month: month, day: day)
                    != MonthMath.daysFromCivilGeneral(year: year, month: month, day: day)
                {
                    mismatches.append("\(year)-\(month)-\(day)")
                }
            }
        }
        #expect(mismatches.isEmpty)
        #expect(MonthMath.daysFromCivil(year: 2024, month: 2, day: 29) == 19_782)
        #expect(MonthMath.civilFromDays(19_782) == (2024, 2, 29))
        #expect(MonthMath.civilFromDays(-1) == (1969, 12, 31))
        #expect(MonthMath.civilFromDays(0) == (1970, 1, 1))
    }

    @Test("timestamps print and parse in ISO 8601 UTC with milliseconds")
    func timestamps() {
        #expect(Timestamp.iso(0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.iso(ms("2026-08-14T10:22:31.568Z")) == "2026-08-14T10:22:31.568Z")
        #expect(Timestamp.parseDateTime("2026-08-14 10:22:31") == ms("2026-08-14T10:22:31Z"))
        #expect(Timestamp.parseDateTime("2026-08-14T10:22:31.5Z") == ms("2026-08-14T10:22:31.500Z"))
        #expect(Timestamp.parseDateTime("2026-02-30T10:22:31Z") == nil)
        #expect(Timestamp.parseDate("2025-02-29") == nil)
        #expect(Timestamp.parseDate("2024-02-29") != nil)
        #expect(Timestamp.date(ms("2026-11-22T23:59:59.999Z")) == "2026-11-22")
        #expect(Timestamp.date(-1) == "1969-12-31")
    }
}

@Suite("wholeMonths against its definition")
struct WholeMonthsDefinitionTests {
    /// The definition, literally: the largest k ≥ 0 with addMonths(a, k) ≤ b.
    func byDefinition(_ a: Int64, _ b: Int64) -> Int64 {
        if b < a { return 0 }
        var k: Int64 = 0
        while MonthMath.addMonths(a, k + 1) <= b { k += 1 }
        return k
    }

    /// 20,000 pairs (a, b): days clustered near month ends, times near midnight and noon, b
    /// from 40 days before a to about 30 months after.
    func pairs(seed: UInt64) -> [(Int64, Int64)] {
        var rng = SplitMix64(seed: seed)
        func r(_ range: ClosedRange<Int64>) -> Int64 { Int64.random(in: range, using: &rng) }
        let base = ms("2023-12-28T00:00:00Z")
        return (0..<20_000).map { _ in
            let a = base + r(0...1_200) * MonthMath.day + r(0...3) * 43_200_000 - r(0...1)
            let b = a + r(-40...900) * MonthMath.day + r(-2...2) * 43_200_000 + r(-1...1)
            return (a, b)
        }
    }

    @Test("the closed form agrees with the definition on 20,000 pairs around month ends and leap days")
    func agrees() {
        for (a, b) in pairs(seed: 42) {
            #expect(MonthMath.wholeMonths(a, b) == byDefinition(a, b), "\(Timestamp.iso(a)) → \(Timestamp.iso(b))")
        }
    }

    /// calendarMonths by its definition: whole months k, plus the elapsed fraction of
    /// [addMonths(a, k), addMonths(a, k + 1)).
    @Test("calendarMonths agrees with its definition on 20,000 pairs around month ends and leap days")
    func calendarMonthsAgrees() {
        for (a, b) in pairs(seed: 7) {
            var expected = 0.0
            if b > a {
                let k = byDefinition(a, b)
                let lo = MonthMath.addMonths(a, k)
                let hi = MonthMath.addMonths(a, k + 1)
                expected = Double(k) + Double(b - lo) / Double(hi - lo)
            }
            #expect(MonthMath.calendarMonths(a, b) == expected, "\(Timestamp.iso(a)) → \(Timestamp.iso(b))")
        }
    }
}
