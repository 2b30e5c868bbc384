import WinBackModel

/// What the rules need to know of one customer at one instant (docs/rules.md §3 rules 3–7).
///
/// Built by ``CustomerTimeline/build(rows:asOf:gapDays:renewal:periods:)`` from the customer's
/// rows, pure: no files, no clock.
public struct CustomerTimeline: Sendable, Equatable {
    public var state: SubscriptionState
    /// E: the latest period end.
    public var lastSubscribedEnd: Int64
    public var monthsSinceLastSubscribed: Int64
    /// Paid months of the most recent consecutive run.
    public var paidMonths: Int64
    /// Start of the first paid period of the most recent run; nil when it has none.
    public var paidRunStart: Int64?
    /// The customer's product and territory: those of the last period's row.
    public var productId: Int32
    public var storefront: Int32
    /// The last non-empty appAccountToken of the PURCHASED rows known at T.
    public var appAccountToken: AppAccountToken
    /// Per win-back offer id, when the customer's last redemption of it ended (rule 7).
    public var winBackEnds: [(offerId: Int32, end: Int64)]
    /// Index of the first period of the most recent run.
    public var lastRunFirstPeriod: Int

    public static func == (a: CustomerTimeline, b: CustomerTimeline) -> Bool {
        a.state == b.state && a.lastSubscribedEnd == b.lastSubscribedEnd
            && a.monthsSinceLastSubscribed == b.monthsSinceLastSubscribed && a.paidMonths == b.paidMonths
            && a.paidRunStart == b.paidRunStart && a.productId == b.productId && a.storefront == b.storefront
            && a.appAccountToken == b.appAccountToken && a.lastRunFirstPeriod == b.lastRunFirstPeriod
            && a.winBackEnds.map(\.offerId) == b.winBackEnds.map(\.offerId)
            && a.winBackEnds.map(\.end) == b.winBackEnds.map(\.end)
    }

    /// How long the App Store retries billing at most.
    public static let billingRetryWindow: Int64 = 60 * MonthMath.day

    /// When the customer's last redemption of win-back offer `offerId` ended, if any.
    @inline(__always)
    public func lastRedemptionEnd(of offerId: Int32) -> Int64? {
        for w in winBackEnds where w.offerId == offerId { return w.end }
        return nil
    }

    /// Reconstructs a customer at `asOf`.
    ///
    /// - Parameters:
    ///   - rows: the customer's deduplicated Production rows, ordered by
    ///     (purchaseDate, transactionId); rows not yet purchased at `asOf` are ignored here.
    ///   - renewal: the renewal info known at `asOf` (newest with signedDate ≤ asOf), if any.
    ///   - periods: scratch storage, filled with the customer's periods (reused across calls).
    /// - Returns: nil when the customer has no non-empty period at `asOf` (not a subscriber).
    public static func build<C: RandomAccessCollection>(
        rows: C, asOf t: Int64, gapDays: Int64, renewal: RenewalInfo?, periods: inout [Period]
    ) -> CustomerTimeline? where C.Element == Transaction, C.Index == Int {
        var months = PeriodMonths()
        return build(rows: rows, asOf: t, gapDays: gapDays, renewal: renewal, periods: &periods, months: &months)
    }

    /// The same, remembering each period's calendar months in `months` for the next call on
    /// the same customer (``SuccessiveTimelines``).
    static func build<C: RandomAccessCollection>(
        rows: C, asOf t: Int64, gapDays: Int64, renewal: RenewalInfo?, periods: inout [Period],
        months monthsOf: inout PeriodMonths
    ) -> CustomerTimeline? where C.Element == Transaction, C.Index == Int {
        var token = AppAccountToken.none
        var winBack: [(offerId: Int32, end: Int64)] = []
        collectPeriods(rows: rows, at: t, into: &periods) { r in
            if !r.appAccountToken.isNone { token = r.appAccountToken }
            if r.offerType == OfferType.winBack.rawValue, r.offerIdentifier >= 0 {
                if let k = winBack.firstIndex(where: { $0.offerId == r.offerIdentifier }) {
                    winBack[k].end = max(winBack[k].end, r.expiresDate)
                } else {
                    winBack.append((r.offerIdentifier, r.expiresDate))
                }
            }
        }
        guard let last = periods.last else { return nil }

        // Rule 5: runs split where a period starts more than gapDays after the reach so far.
        let gap = gapDays * MonthMath.day
        var reach = Int64.min
        var run: Int32 = -1
        var lastRunFirst = 0
        for k in periods.indices {
            if run < 0 || periods[k].start - reach > gap {
                run += 1
                lastRunFirst = k
            }
            periods[k].run = run
            reach = max(reach, periods[k].end)
        }
        var months = 0.0
        var paidRunStart: Int64?
        for k in lastRunFirst..<periods.count where periods[k].paid {
            if paidRunStart == nil { paidRunStart = periods[k].start }
            months += monthsOf.months(row: Int(periods[k].row), start: periods[k].start, end: periods[k].end)
        }
        let paidMonths = Int64((months + 1e-6).rounded(.down))

        // Rule 4: state at T.
        // After the cut, ends never decrease: the last period ends latest.
        let e = last.end
        let state: SubscriptionState
        if periods.contains(where: { $0.start <= t && t < $0.end }) {
            state = .active
        } else if let info = renewal,
            (info.gracePeriodExpiresDate.map { $0 > t } ?? false)
                || (info.isInBillingRetryPeriod && info.signedDate >= e && t < e + billingRetryWindow)
        {
            state = .billingRetry
        } else {
            state = .churned
        }

        let lastRow = rows[rows.startIndex + Int(last.row)]
        return CustomerTimeline(
            state: state, lastSubscribedEnd: e, monthsSinceLastSubscribed: MonthMath.wholeMonths(e, t),
            paidMonths: paidMonths, paidRunStart: paidRunStart, productId: lastRow.productId,
            storefront: lastRow.storefront, appAccountToken: token, winBackEnds: winBack,
            lastRunFirstPeriod: lastRunFirst)
    }
}

extension CustomerTimeline {
    /// The customer's periods at `t` (docs/rules.md §3 rule 3) into `periods` (cleared first):
    /// one per PURCHASED row known at T, cut by a revocation known at T, empty ones dropped,
    /// each cut at the next one's start where they overlap (an upgrade). `visit` sees every
    /// PURCHASED row known at T, in order.
    @inline(__always)
    static func collectPeriods<C: RandomAccessCollection>(
        rows: C, at t: Int64, into periods: inout [Period], _ visit: (Transaction) -> Void = { _ in }
    ) where C.Element == Transaction, C.Index == Int {
        periods.removeAll(keepingCapacity: true)
        var i = 0
        for r in rows {
            defer { i += 1 }
            // Rule 1: only rows purchased before T exist at T.
            guard r.isKnownPurchase(at: t) else { continue }
            visit(r)
            // Rule 3: a period per row; revocation known at T cuts it and makes it unpaid.
            let end = r.accessEnd(at: t)
            guard end > r.purchaseDate else { continue }
            periods.append(
                Period(
                    start: r.purchaseDate, end: end, paid: r.isPaid(at: t), revoked: r.isRevoked(at: t),
                    row: Int32(i)))
        }
        // Overlaps (upgrades): cut each period at the next one's start, then drop the emptied.
        if periods.count > 1 {
            for k in 0..<(periods.count - 1) where periods[k].end > periods[k + 1].start {
                periods[k].end = periods[k + 1].start
            }
            periods.removeAll { $0.end <= $0.start }
        }
    }
}

/// `calendarMonths` of the periods of one customer, by row, kept across successive builds:
/// a period that has not changed since the last build is not measured again.
struct PeriodMonths {
    private var entries: [(start: Int64, end: Int64, months: Double)] = []

    /// Forgets every period; room for a customer of `rows` rows.
    mutating func reset(rows: Int) {
        entries.removeAll(keepingCapacity: true)
        entries.append(contentsOf: repeatElement((start: Int64(0), end: Int64(0), months: -1.0), count: rows))
    }

    @inline(__always)
    mutating func months(row: Int, start: Int64, end: Int64) -> Double {
        guard row < entries.count else { return MonthMath.calendarMonths(start, end) }
        let e = entries[row]
        if e.months >= 0 && e.start == start && e.end == end { return e.months }
        let m = MonthMath.calendarMonths(start, end)
        entries[row] = (start, end, m)
        return m
    }
}
