import WinBackModel

/// The months the reports cover (docs/rules.md §4.3): the `windowMonths` calendar months before the
/// month containing T, plus (for redemption counts only) the current month up to T.
public struct ReportWindow: Sendable, Equatable {
    public var asOf: Int64
    /// First instant of each complete month, oldest first.
    public var months: [Int64]

    public init(asOf t: Int64, months count: Int) {
        asOf = t
        months = (0..<Int64(max(0, count))).map { MonthMath.monthStart(t, offset: $0 - Int64(count)) }
    }

    /// First instant of the window: redemptions count from here up to T.
    public var start: Int64 { months.first ?? MonthMath.monthStart(asOf) }

    /// First instant of the month containing T, where the complete months end.
    public var currentMonth: Int64 { MonthMath.monthStart(asOf) }

    /// Index of the complete month containing `t`, or nil outside them.
    @inline(__always)
    public func month(of t: Int64) -> Int? {
        guard t >= start, t < currentMonth else { return nil }
        // Few months (≤ 120): the last start not after t.
        var lo = 0
        var hi = months.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if months[mid] <= t { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }

    /// `YYYY-MM` of complete month `i`.
    public func label(_ i: Int) -> String { Timestamp.month(months[i]) }
}
