/// Calendar arithmetic in UTC on millisecond timestamps, as docs/rules.md §3 defines it.
///
/// Every function here is pure and allocation-free: it runs millions of times per night.
public enum MonthMath {
    /// Milliseconds in a day.
    public static let day: Int64 = 86_400_000

    /// Days since 1970-01-01 of a proleptic Gregorian civil date.
    ///
    /// Neri and Schneider's form (“Euclidean affine functions and their application to calendar
    /// algorithms”, 2022): a shift by 82 eras makes every quantity unsigned and 32-bit, and the
    /// divisions become multiplications and shifts. Years outside ±32,000 take the general form.
    @inlinable
    public static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        guard year > -32_000 && year < 32_000 && month >= 1 && month <= 12 && day >= 1 && day <= 31 else {
            return daysFromCivilGeneral(year: year, month: month, day: day)
        }
        let j: UInt32 = month <= 2 ? 1 : 0
        let y = UInt32(truncatingIfNeeded: year + 400 * 82) &- j
        let m = j == 1 ? UInt32(month) + 12 : UInt32(month)
        let c = y / 100
        let yearDays = 1461 &* y / 4 &- c &+ c / 4
        let monthDays = (979 &* m &- 2919) / 32
        let n = yearDays &+ monthDays &+ UInt32(day) &- 1
        return Int64(n) - (719_468 + 146_097 * 82)
    }

    /// ``daysFromCivil(year:month:day:)`` for any year (Hinnant's algorithm, 64-bit divisions).
    @inlinable
    static func daysFromCivilGeneral(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The civil date of a day number (days since 1970-01-01): Neri and Schneider's form, as
    /// in ``daysFromCivil(year:month:day:)``, for days within ±11 million (about 30,000 years).
    @inlinable
    public static func civilFromDays(_ z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
        guard z0 > -11_000_000 && z0 < 11_000_000 else { return civilFromDaysGeneral(z0) }
        let n = UInt32(truncatingIfNeeded: z0 + (719_468 + 146_097 * 82))
        // Century, then year of the century, then day of the year (from March 1).
        let n1 = 4 &* n &+ 3
        let century = n1 / 146_097
        let n2 = (n1 % 146_097) | 3
        let p2 = UInt64(2_939_745) &* UInt64(n2)
        let yearOfCentury = UInt32(truncatingIfNeeded: p2 >> 32)
        let dayOfYear = UInt32(truncatingIfNeeded: p2) / 2_939_745 / 4
        // Month and day, from March.
        let n3 = 2141 &* dayOfYear &+ 197_913
        let m = n3 >> 16
        let d = (n3 & 0xFFFF) / 2141
        let j: UInt32 = dayOfYear >= 306 ? 1 : 0
        let y = Int64(100 &* century &+ yearOfCentury) - 400 * 82 + Int64(j)
        return (y, Int64(j == 1 ? m &- 12 : m), Int64(d) + 1)
    }

    /// ``civilFromDays(_:)`` for any day number (Hinnant's algorithm, 64-bit divisions).
    @inlinable
    static func civilFromDaysGeneral(_ z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }

    @inlinable
    public static func isLeap(_ year: Int64) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    @inlinable
    public static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Floor division of a timestamp into (day number, millisecond of day).
    @inlinable
    public static func split(_ t: Int64) -> (days: Int64, msOfDay: Int64) {
        var days = t / day
        var ms = t % day
        if ms < 0 {
            days -= 1
            ms += day
        }
        return (days, ms)
    }

    /// The day number (days since epoch) containing `t`.
    @inlinable
    public static func dayNumber(_ t: Int64) -> Int64 { split(t).days }

    /// `addMonths(t, k)`: same time of day, day of month clamped to the target month's length.
    @inlinable
    public static func addMonths(_ t: Int64, _ k: Int64) -> Int64 {
        let (days, ms) = split(t)
        let c = civilFromDays(days)
        let (y, month) = shifted(year: c.year, month: c.month, by: k)
        let d = min(c.day, daysInMonth(year: y, month: month))
        return daysFromCivil(year: y, month: month, day: d) * day + ms
    }

    /// `wholeMonths(a, b)`: the largest k ≥ 0 with `addMonths(a, k) ≤ b`; 0 when b < a.
    @inlinable
    public static func wholeMonths(_ a: Int64, _ b: Int64) -> Int64 {
        if b < a { return 0 }
        return monthsBetween(a, b).k
    }

    /// `calendarMonths(a, b)` for a ≤ b: whole months plus the elapsed fraction of the next one.
    @inlinable
    public static func calendarMonths(_ a: Int64, _ b: Int64) -> Double {
        if b <= a { return 0 }
        // addMonths(a, k) and addMonths(a, k + 1) from a's civil date, computed once (this runs
        // for every paid period of every customer, many times a night).
        let (k, ca, ta) = monthsBetween(a, b)
        func shifted(_ n: Int64) -> Int64 {
            let m0 = ca.month - 1 + n
            let y = ca.year + m0 / 12
            let month = m0 % 12 + 1
            return daysFromCivil(year: y, month: month, day: min(ca.day, daysInMonth(year: y, month: month))) * day + ta
        }
        let lo = shifted(k)
        // Most periods are whole months (a renewal ends where the next month begins): no
        // fraction to divide for, and k + 0.0 is k.
        if b == lo { return Double(k) }
        let hi = shifted(k + 1)
        return Double(k) + Double(b - lo) / Double(hi - lo)
    }

    /// For a ≤ b: `wholeMonths(a, b)`, with a's civil date and time of day.
    ///
    /// Closed form: `addMonths(a, k)` for the month difference k lands in b's month, on a's day
    /// clamped to that month, at a's time of day; if that is after b, one month fewer.
    @inlinable
    static func monthsBetween(_ a: Int64, _ b: Int64)
        -> (k: Int64, civil: (year: Int64, month: Int64, day: Int64), msOfDay: Int64)
    {
        let (da, ta) = split(a)
        let (db, tb) = split(b)
        let ca = civilFromDays(da)
        let cb = civilFromDays(db)
        var k = (cb.year - ca.year) * 12 + (cb.month - ca.month)
        let dayInB = min(ca.day, daysInMonth(year: cb.year, month: cb.month))
        if cb.day < dayInB || (cb.day == dayInB && tb < ta) { k -= 1 }
        return (max(0, k), ca, ta)
    }

    /// The first instant (00:00 UTC) of the month containing `t`, shifted by `k` months.
    @inlinable
    public static func monthStart(_ t: Int64, offset k: Int64 = 0) -> Int64 {
        let c = civilFromDays(split(t).days)
        let (y, m) = shifted(year: c.year, month: c.month, by: k)
        return daysFromCivil(year: y, month: m, day: 1) * day
    }

    /// The year and month (1–12) `k` months after month `month` of `year`.
    @inlinable
    package static func shifted(year: Int64, month: Int64, by k: Int64) -> (year: Int64, month: Int64) {
        let m0 = month - 1 + k
        var y = year + m0 / 12
        var m = m0 % 12
        if m < 0 {
            m += 12
            y -= 1
        }
        return (y, m + 1)
    }
}
