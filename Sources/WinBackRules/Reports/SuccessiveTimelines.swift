import WinBackModel

/// One customer reconstructed at successive, increasing instants with no renewal info, as the
/// monthly redemption rates need (docs/rules.md §4.3), without redoing the whole reconstruction at each.
///
/// Between two instants the reconstruction can only change when a row is purchased or a
/// revocation becomes known; otherwise the periods are the same and only the state and the
/// months since the last subscription move with the clock. In that case they are recomputed
/// from the kept periods, and the result equals ``CustomerTimeline/build(rows:asOf:gapDays:renewal:periods:)``
/// at the new instant (a test holds them equal).
struct SuccessiveTimelines {
    /// The periods of the last reconstruction.
    private(set) var periods: [Period] = []
    private var last: CustomerTimeline?
    /// Rows purchased before the previous call's instant; -1 when none yet.
    private var known = -1
    private var months = PeriodMonths()
    /// The earliest revocationDate at or after the previous call's instant among the known
    /// rows (`Int64.max` when none): the next instant at which a revocation becomes known.
    private var nextRevocation: Int64 = .max

    /// Forgets the previous customer (keeps the storage).
    mutating func reset() {
        known = -1
        last = nil
    }

    /// Whether the last call rebuilt the reconstruction (a row was bought or a revocation became
    /// known since the call before): otherwise the periods, the product, the storefront and the
    /// paid months are those of the call before, and only the state and the months since the
    /// last subscription moved with the clock.
    private(set) var rebuilt = false

    /// The customer at `t`, which must not precede the previous call's instant since `reset()`.
    ///
    /// With `unlessUnchanged`, returns nil without computing anything more when the
    /// reconstruction is that of the call before (``rebuilt`` is false): for callers that
    /// already know what they need of it.
    mutating func timeline<C: RandomAccessCollection>(
        rows: C, at t: Int64, gapDays: Int64, unlessUnchanged: Bool = false
    ) -> CustomerTimeline?
    where C.Element == Transaction, C.Index == Int {
        // Rows are ordered by purchaseDate: the known ones are a prefix.
        if known < 0 { months.reset(rows: rows.count) }
        var n = max(known, 0)
        while n < rows.count && rows[rows.startIndex + n].purchaseDate < t { n += 1 }
        // With the same rows known, the next revocation found among them the last time is
        // still the next one: none fell in between, or the reconstruction is rebuilt below.
        let same = n == known && nextRevocation >= t
        if !same {
            nextRevocation = .max
            for i in 0..<n {
                let d = rows[rows.startIndex + i].revocationDate
                if d >= t && d < nextRevocation { nextRevocation = d }
            }
        }
        known = n
        rebuilt = !same
        if same && unlessUnchanged { return nil }
        if !same {
            last = CustomerTimeline.build(
                rows: rows, asOf: t, gapDays: gapDays, renewal: nil, periods: &periods, months: &months)
            return last
        }
        guard var tl = last else { return nil }
        // Without renewal info a customer is active or churned (rule 4); no period reaches
        // past the latest end.
        tl.state = t < tl.lastSubscribedEnd && periods.contains { $0.start <= t && t < $0.end } ? .active : .churned
        tl.monthsSinceLastSubscribed = MonthMath.wholeMonths(tl.lastSubscribedEnd, t)
        last = tl
        return tl
    }

    /// Whether the customer is active at `t` by their last period alone: the last purchased
    /// row bought before `t` whose period is not empty, if it is still running at `t`. That
    /// period is never cut by a later one, so when this holds ``CustomerTimeline/build(rows:asOf:gapDays:renewal:periods:)``
    /// finds the customer active too; when it does not, only a full reconstruction can tell.
    static func lastPeriodContains<C: RandomAccessCollection>(rows: C, _ t: Int64) -> Bool
    where C.Element == Transaction, C.Index == Int {
        var i = rows.endIndex
        // Rows are ordered by purchaseDate: those bought before t are a prefix.
        while i > rows.startIndex && rows[i - 1].purchaseDate >= t { i -= 1 }
        while i > rows.startIndex {
            i -= 1
            let r = rows[i]
            guard r.ownership == .purchased else { continue }
            let end = r.accessEnd(at: t)
            if end <= r.purchaseDate { continue }  // an empty period is dropped
            return t < end
        }
        return false
    }
}
