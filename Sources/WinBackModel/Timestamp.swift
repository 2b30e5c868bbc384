/// Parsing and printing of the UTC timestamps and dates the project reads and writes.
///
/// Hand-rolled on bytes: these run per row, where a Foundation date formatter would dominate the profile.
public enum Timestamp {
    /// `2026-08-14T10:22:31.568Z`: ISO 8601 UTC with milliseconds.
    public static func iso(_ t: Int64) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        appendISO(t, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `iso(t)` to a byte buffer without allocating a String.
    public static func appendISO(_ t: Int64, to out: inout [UInt8]) {
        let (days, ms) = MonthMath.split(t)
        let c = MonthMath.civilFromDays(days)
        if c.year >= 0 && c.year <= 9999 {
            // The common case: fixed widths, written in place into the array's new capacity.
            out.append(addingCapacity: 24) { b in
                @inline(__always) func digits(_ v: Int64, _ width: Int) {
                    var unit: Int64 = width == 4 ? 1000 : width == 3 ? 100 : 10
                    while unit > 0 {
                        b.append(UInt8(truncatingIfNeeded: 48 + v / unit % 10))
                        unit /= 10
                    }
                }
                let s = ms / 1000
                digits(c.year, 4)
                b.append(UInt8(ascii: "-"))
                digits(c.month, 2)
                b.append(UInt8(ascii: "-"))
                digits(c.day, 2)
                b.append(UInt8(ascii: "T"))
                digits(s / 3600, 2)
                b.append(UInt8(ascii: ":"))
                digits((s / 60) % 60, 2)
                b.append(UInt8(ascii: ":"))
                digits(s % 60, 2)
                b.append(UInt8(ascii: "."))
                digits(ms % 1000, 3)
                b.append(UInt8(ascii: "Z"))
            }
            return
        }
        appendDate(year: c.year, month: c.month, day: c.day, to: &out)
        out.append(UInt8(ascii: "T"))
        let s = ms / 1000
        pad(s / 3600, 2, &out)
        out.append(UInt8(ascii: ":"))
        pad((s / 60) % 60, 2, &out)
        out.append(UInt8(ascii: ":"))
        pad(s % 60, 2, &out)
        out.append(UInt8(ascii: "."))
        pad(ms % 1000, 3, &out)
        out.append(UInt8(ascii: "Z"))
    }

    /// `YYYY-MM-DD` of the UTC day containing `t`.
    public static func date(_ t: Int64) -> String {
        var out: [UInt8] = []
        let c = MonthMath.civilFromDays(MonthMath.dayNumber(t))
        appendDate(year: c.year, month: c.month, day: c.day, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `YYYY-MM` of the UTC month containing `t`.
    public static func month(_ t: Int64) -> String {
        String(date(t).prefix(7))
    }

    static func appendDate(year: Int64, month: Int64, day: Int64, to out: inout [UInt8]) {
        if year < 0 { out.append(UInt8(ascii: "-")) }
        pad(abs(year), 4, &out)
        out.append(UInt8(ascii: "-"))
        pad(month, 2, &out)
        out.append(UInt8(ascii: "-"))
        pad(day, 2, &out)
    }

    /// Appends the decimal digits of `v` (≥ 0), zero-padded to `width`, allocating nothing.
    @inline(__always)
    static func pad(_ v: Int64, _ width: Int, _ out: inout [UInt8]) {
        var n = 1
        var div: Int64 = 1
        while v / div >= 10 {
            div *= 10
            n += 1
        }
        for _ in n..<max(width, n) { out.append(UInt8(ascii: "0")) }
        var rest = v
        while div > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest / div))
            rest %= div
            div /= 10
        }
    }

    /// Parses `YYYY-MM-DD` into the day number, validating the calendar date.
    public static func parseDate<S: StringProtocol>(_ s: S) -> Int64? {
        let b = Array(s.utf8)
        guard b.count == 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-") else { return nil }
        guard let y = digits(b.span, 0, 4), let m = digits(b.span, 5, 2), let d = digits(b.span, 8, 2) else {
            return nil
        }
        guard (1...12).contains(m), d >= 1, d <= MonthMath.daysInMonth(year: y, month: m) else { return nil }
        return MonthMath.daysFromCivil(year: y, month: m, day: d)
    }

    /// Why `s`, written as `YYYY-MM-DD` (alone or starting a date-time), names no day of the
    /// calendar: `February 2026 has 28 days`, `there is no month 13`. Nil when `s` is a date,
    /// or is not written as one (whose message says it is not `YYYY-MM-DD`).
    public static func whyNotADate<S: StringProtocol>(_ s: S) -> String? {
        let b = Array(s.utf8)
        guard b.count >= 10, b.count == 10 || b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "),
            b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
            let y = digits(b.span, 0, 4), let m = digits(b.span, 5, 2), let d = digits(b.span, 8, 2)
        else { return nil }
        guard (1...12).contains(m) else { return "there is no month \(m)" }
        guard d >= 1 else { return "there is no day 0" }
        let days = MonthMath.daysInMonth(year: y, month: m)
        guard d <= days else {
            let names = [
                "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                "November", "December",
            ]
            return "\(names[Int(m) - 1]) \(y) has \(days) days"
        }
        return nil
    }

    /// Parses a UTC date-time: `YYYY-MM-DDTHH:MM:SS[.sss]Z` (or with a space and no `Z` when
    /// `allowSpace`), returning milliseconds since the epoch.
    public static func parseDateTime(_ b: Span<UInt8>, allowSpaceForm: Bool = true) -> Int64? {
        guard b.count >= 19 else { return nil }
        guard b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":")
        else { return nil }
        let sep = b[10]
        var end = b.count
        if sep == UInt8(ascii: "T") {
            guard b[end - 1] == UInt8(ascii: "Z") else { return nil }
            end -= 1
        } else if sep == UInt8(ascii: " ") && allowSpaceForm {
            // UTC without a zone designator.
        } else {
            return nil
        }
        guard let y = digits(b, 0, 4), let mo = digits(b, 5, 2), let d = digits(b, 8, 2),
            let h = digits(b, 11, 2), let mi = digits(b, 14, 2), let s = digits(b, 17, 2)
        else { return nil }
        guard (1...12).contains(mo), d >= 1, d <= MonthMath.daysInMonth(year: y, month: mo),
            h < 24, mi < 60, s < 60
        else { return nil }
        var ms: Int64 = 0
        if end > 19 {
            guard b[19] == UInt8(ascii: "."), end - 20 >= 1, end - 20 <= 3,
                let f = digits(b, 20, end - 20)
            else { return nil }
            ms = f * [1, 100, 10, 1][end - 20]
        }
        let days = MonthMath.daysFromCivil(year: y, month: mo, day: d)
        return days * MonthMath.day + ((h * 60 + mi) * 60 + s) * 1000 + ms
    }

    public static func parseDateTime(_ s: String) -> Int64? {
        parseDateTime(s.utf8.span)
    }

    @inline(__always)
    static func digits(_ b: Span<UInt8>, _ at: Int, _ n: Int) -> Int64? {
        var v: Int64 = 0
        for i in at..<(at + n) {
            let c = b[i]
            guard c >= 48 && c <= 57 else { return nil }
            v = v * 10 + Int64(c - 48)
        }
        return v
    }
}
