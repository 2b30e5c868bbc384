import WinBackModel

/// One line of `winback-redemption-rates.csv` (docs/rules.md §4.3): of the customers eligible for a
/// win-back offer at the first instant of a month, how many redeemed it during that month.
public struct RedemptionRateRow: Sendable, Hashable, Codable {
    /// `YYYY-MM`.
    public var month: String
    public var offerId: String
    /// Customers eligible at the month's first instant, by docs/rules.md §3 with only what was known then.
    public var eligibleAtMonthStart: Int
    /// Of those, customers who redeemed the offer during the month.
    public var redeemedByEligible: Int
    /// Every customer who redeemed the offer during the month, eligible at its start or not.
    public var redeemedTotal: Int

    public init(
        month: String, offerId: String, eligibleAtMonthStart: Int, redeemedByEligible: Int, redeemedTotal: Int
    ) {
        self.month = month
        self.offerId = offerId
        self.eligibleAtMonthStart = eligibleAtMonthStart
        self.redeemedByEligible = redeemedByEligible
        self.redeemedTotal = redeemedTotal
    }

    public var redemptionRate: String { Rate.format(redeemedByEligible, eligibleAtMonthStart) }
}

extension RedemptionRateRow: CountedRow {
    package static let counts = [\RedemptionRateRow.eligibleAtMonthStart, \.redeemedByEligible, \.redeemedTotal]
}

/// Builds and prints the monthly win-back redemption rates.
public enum RedemptionRatesReport {
    public static let columns = [
        "month", "offer_id", "eligible_at_month_start", "redeemed_by_eligible", "redemption_rate", "redeemed_total",
    ]

    /// Scratch reused across customers by one worker.
    struct Scratch {
        var timelines = SuccessiveTimelines()
        /// (month index, catalog index) pairs the customer redeemed.
        var redeemed: [(month: Int, offer: Int)] = []
    }

    /// Counts one customer into `tally` (the rows of ``cells(_:book:)``, month-major).
    ///
    /// The customer is reconstructed at each month's first instant from the same rows, with no
    /// renewal info (docs/rules.md §4.3), and evaluated against their group's offers; their
    /// redemptions come from the episodes found at T.
    ///
    /// With an experiment (`cohorts` the window's cohort months, docs/rules.md §9.2), the
    /// customer is also counted into `uplift` in each cohort month they are eligible at, under
    /// their rank-1 offer and their arm.
    static func count<C: RandomAccessCollection>(
        rows: C, group: Int32, episodes: [Episode], book: OfferBook, window: ReportWindow, gapDays: Int64,
        scratch: inout Scratch, into tally: inout [RedemptionRateRow], cohorts: Range<Int> = 0..<0,
        heldOut: Bool = false,
        money: CohortMoney? = nil, uplift: inout [UpliftRow]
    ) where C.Element == Transaction, C.Index == Int {
        guard let first = rows.first else { return }
        book.withRanked(group) { ranked in
            guard !ranked.isEmpty else { return }
            count(
                rows: rows, first: first, group: group, ranked: ranked, episodes: episodes, book: book,
                window: window, gapDays: gapDays, scratch: &scratch, into: &tally, cohorts: cohorts,
                heldOut: heldOut, money: money, uplift: &uplift)
        }
    }

    /// ``count(rows:group:episodes:book:window:gapDays:scratch:into:cohorts:heldOut:money:uplift:)``
    /// for a customer of a group with offers, `ranked` in rank order.
    @inline(__always)
    private static func count<C: RandomAccessCollection>(
        rows: C, first: Transaction, group: Int32, ranked: some RandomAccessCollection<Int>, episodes: [Episode],
        book: OfferBook, window: ReportWindow, gapDays: Int64, scratch: inout Scratch,
        into tally: inout [RedemptionRateRow], cohorts: Range<Int>, heldOut: Bool, money: CohortMoney?,
        uplift: inout [UpliftRow]
    ) where C.Element == Transaction, C.Index == Int {
        let n = book.offers.count
        scratch.redeemed.removeAll(keepingCapacity: true)
        for e in episodes where e.offerType == OfferType.winBack.rawValue {
            guard let m = window.month(of: e.start) else { continue }
            for o in ranked where book.offers[o].offerIdentifier == e.offerIdentifier {
                if !scratch.redeemed.contains(where: { $0.month == m && $0.offer == o }) {
                    scratch.redeemed.append((m, o))
                    tally[m * n + o].redeemedTotal += 1
                }
            }
        }
        scratch.timelines.reset()
        // Ranked offers (bit j for ranked[j], the first 64) that the customer fails for a
        // reason the clock cannot change: they fail again every month until the
        // reconstruction is rebuilt, and need not be evaluated before then.
        var settled: UInt64 = 0
        let all: UInt64 = ranked.count >= 64 ? .max : (1 << UInt64(ranked.count)) - 1
        for (m, tm) in window.months.enumerated() where first.purchaseDate < tm {
            // Only churned customers count; most months most customers are plainly active.
            if SuccessiveTimelines.lastPeriodContains(rows: rows, tm) { continue }
            let tl = scratch.timelines.timeline(
                rows: rows, at: tm, gapDays: gapDays, unlessUnchanged: ranked.count <= 64 && settled == all)
            if scratch.timelines.rebuilt { settled = 0 }
            guard let tl, tl.state == .churned else { continue }
            var best = -1  // the rank-1 offer at tm
            book.evaluate(group: group, tl, asOf: tm, skipping: settled) { j, o, failed in
                if failed.isEmpty {
                    if best < 0 { best = o }
                    tally[m * n + o].eligibleAtMonthStart += 1
                    if scratch.redeemed.contains(where: { $0.month == m && $0.offer == o }) {
                        tally[m * n + o].redeemedByEligible += 1
                    }
                } else if j < 64 && !failed.isDisjoint(with: RedemptionRatesReport.fixedByReconstruction) {
                    settled |= 1 << UInt64(j)
                }
            }
            if best >= 0 && cohorts.contains(m) {
                UpliftReport.count(
                    rows: rows, episodes: episodes, month: m, offer: best, heldOut: heldOut, window: window, offers: n,
                    money: money, into: &uplift)
            }
        }
    }

    /// Reasons that depend only on what a reconstruction fixes (the product, the storefront,
    /// the paid months), not on the instant it is looked at.
    static let fixedByReconstruction: Reasons = [.otherProduct, .territory, .paidDuration]

    /// One row per complete month and catalog offer, nothing counted yet: by month, then catalog
    /// order (months × catalog offers, month-major). `count` counts into them in place, so the
    /// summed cells are the report's rows.
    static func cells(_ window: ReportWindow, book: OfferBook) -> [RedemptionRateRow] {
        window.months.indices.flatMap { m in
            let month = window.label(m)
            return book.offers.map {
                RedemptionRateRow(
                    month: month, offerId: $0.offer.offerId, eligibleAtMonthStart: 0, redeemedByEligible: 0,
                    redeemedTotal: 0)
            }
        }
    }

    public static func csv(_ rows: [RedemptionRateRow]) -> [UInt8] {
        CSVRecord.table(columns, rows) { r, row in
            r.fields(
                row.month, row.offerId, row.eligibleAtMonthStart, row.redeemedByEligible, row.redemptionRate,
                row.redeemedTotal)
        }
    }
}
