import WinBackModel

/// One arm's counts in a cohort month (docs/rules.md §9.2).
public struct ArmCounts: Sendable, Equatable, Codable {
    /// Customers eligible for some offer at the month's first instant, counted under their rank-1 offer.
    public var customers = 0
    /// Of those, customers with a PURCHASED row bought during the month.
    public var returned = 0
    /// Of those, customers whose win-back redemption (any offer) began during the month.
    public var redeemed = 0
    /// Cohort revenue (docs/rules.md §13.3): the customers counted in a month whose horizon has
    /// passed, and the sums of their revenue x and of x², in milliunits.
    public var revenue = CohortRevenue()

    public init(customers: Int = 0, returned: Int = 0, redeemed: Int = 0, revenue: CohortRevenue = CohortRevenue()) {
        self.customers = customers
        self.returned = returned
        self.redeemed = redeemed
        self.revenue = revenue
    }

    static func + (a: ArmCounts, b: ArmCounts) -> ArmCounts {
        ArmCounts(
            customers: a.customers + b.customers, returned: a.returned + b.returned, redeemed: a.redeemed + b.redeemed,
            revenue: a.revenue + b.revenue)
    }

    /// returned / customers, docs/rules.md §4.3 rounding; empty when the arm has nobody.
    public var returnRate: String { Rate.format(returned, customers) }
}

/// One line of `winback-uplift.csv` (docs/rules.md §9.2): a cohort month and an offer (`*` for
/// all of the month's customers, or of every cohort month), each arm's counts, and what the
/// difference of their return rates says.
public struct UpliftRow: Sendable, Equatable, Codable {
    /// `YYYY-MM`, or `*` for every cohort month.
    public var month: String
    /// A catalog offer's id, or `*` for every offer.
    public var offerId: String
    public var treatment: ArmCounts
    public var holdout: ArmCounts

    public init(month: String, offerId: String, treatment: ArmCounts = .init(), holdout: ArmCounts = .init()) {
        self.month = month
        self.offerId = offerId
        self.treatment = treatment
        self.holdout = holdout
    }

    /// The treatment's return rate less the holdout's, with Newcombe's 95 % interval; nil
    /// unless both arms have someone. Computed from the counts, after any summing.
    public var lift: (lift: Double, low: Double, high: Double)? {
        Newcombe.difference(treatment.returned, of: treatment.customers, less: holdout.returned, of: holdout.customers)
    }

    /// The returns the campaign added among the treatment's customers: lift × treatment
    /// customers, rounded half away from zero; nil when the lift is.
    public var incrementalReturns: Int? {
        guard let d = lift?.lift else { return nil }
        let v = Int((d * Double(treatment.customers)).rounded(.toNearestOrAwayFromZero))
        return v == 0 ? 0 : v
    }
}

extension UpliftRow: SummableRow {
    package var key: [String] { [month, offerId] }

    package static func + (a: UpliftRow, b: UpliftRow) -> UpliftRow {
        UpliftRow(
            month: a.month, offerId: a.offerId, treatment: a.treatment + b.treatment, holdout: a.holdout + b.holdout)
    }
}

/// Builds and prints the uplift of a holdout experiment (docs/rules.md §9.2).
public enum UpliftReport {
    public static let columns = [
        "month", "offer_id", "treatment_customers", "treatment_returned", "treatment_redeemed", "holdout_customers",
        "holdout_returned", "holdout_redeemed", "treatment_return_rate", "holdout_return_rate", "lift", "lift_low",
        "lift_high", "incremental_returns",
    ]

    /// The complete months of `window` that are cohort months of `experiment`: those whose
    /// first instant is on or after the experiment's start (a suffix of the window).
    public static func cohorts(_ window: ReportWindow, _ experiment: Experiment) -> Range<Int> {
        (window.months.firstIndex { $0 >= experiment.start } ?? window.months.count)..<window.months.count
    }

    /// Counts customer's month `m` (a cohort month) into `cells` (window months × catalog
    /// offers, month-major): the customer is eligible at its first instant with rank-1 offer
    /// `offer`.
    @inline(__always)
    static func count<C: RandomAccessCollection>(
        rows: C, episodes: [Episode], month m: Int, offer: Int, heldOut: Bool, window: ReportWindow, offers n: Int,
        money: CohortMoney? = nil, into cells: inout [UpliftRow]
    ) where C.Element == Transaction, C.Index == Int {
        let from = window.months[m]
        let to = m + 1 < window.months.count ? window.months[m + 1] : window.currentMonth
        let t = window.asOf
        let returned = rows.contains { $0.isKnownPurchase(at: t) && $0.purchaseDate >= from && $0.purchaseDate < to }
        let redeemed = episodes.contains {
            $0.offerType == OfferType.winBack.rawValue && $0.start >= from && $0.start < to
        }
        var one = ArmCounts(customers: 1, returned: returned ? 1 : 0, redeemed: redeemed ? 1 : 0)
        if let money, let x = money.revenue(rows: rows, from: from, asOf: t) { one.revenue.add(x) }
        if heldOut {
            cells[m * n + offer].holdout = cells[m * n + offer].holdout + one
        } else {
            cells[m * n + offer].treatment = cells[m * n + offer].treatment + one
        }
    }

    /// Empty cells for every cohort month and catalog offer (none without an experiment).
    static func cells(_ window: ReportWindow, book: OfferBook, experiment: Experiment?) -> [UpliftRow] {
        guard experiment != nil else { return [] }
        return window.months.indices.flatMap { m in
            book.offers.map { UpliftRow(month: window.label(m), offerId: $0.offer.offerId) }
        }
    }

    /// The counted rows of the cohort months, in month then catalog order.
    static func rows(_ cells: [UpliftRow], window: ReportWindow, experiment: Experiment?) -> [UpliftRow] {
        guard let experiment, !cells.isEmpty else { return [] }
        let n = cells.count / max(1, window.months.count)
        let c = cohorts(window, experiment)
        return Array(cells[(c.lowerBound * n)..<(c.upperBound * n)])
    }

    /// Every line of the report from the cohort months' rows (month, then catalog order):
    /// per month each offer then `*`; then `*` months per offer and `*` (docs/rules.md §9.2).
    public static func table(_ rows: [UpliftRow], offerIds: [String]) -> [UpliftRow] {
        var out: [UpliftRow] = []
        var overall = offerIds.map { UpliftRow(month: "*", offerId: $0) }
        var i = 0
        while i < rows.count {
            let month = rows[i].month
            var all = UpliftRow(month: month, offerId: "*")
            var o = 0
            while i < rows.count && rows[i].month == month {
                out.append(rows[i])
                all = all + rows[i]
                if o < overall.count { overall[o] = overall[o] + rows[i] }
                o += 1
                i += 1
            }
            out.append(all)
        }
        var total = UpliftRow(month: "*", offerId: "*")
        for r in overall { total = total + r }
        return out + overall + [total]
    }

    public static func csv(_ rows: [UpliftRow], offerIds: [String]) -> [UInt8] {
        CSVRecord.table(columns, table(rows, offerIds: offerIds)) { r, row in
            r.field(row.month)
            r.field(row.offerId)
            r.field(row.treatment.customers)
            r.field(row.treatment.returned)
            r.field(row.treatment.redeemed)
            r.field(row.holdout.customers)
            r.field(row.holdout.returned)
            r.field(row.holdout.redeemed)
            r.field(row.treatment.returnRate)
            r.field(row.holdout.returnRate)
            // Signed numbers, written as they are (not guarded as text that could start a formula).
            if let lift = row.lift {
                for v in [lift.lift, lift.low, lift.high] { r.field(escaped: Array(decimal(v).utf8)) }
            } else {
                for _ in 0..<3 { r.empty() }
            }
            if let n = row.incrementalReturns { r.field(n) } else { r.empty() }
        }
    }

    /// `v` with four decimals, rounded half away from zero, `-0.0000` written `0.0000`.
    public static func decimal(_ v: Double) -> String {
        let scaled = Int64((v * 10_000).rounded(.toNearestOrAwayFromZero))
        let magnitude = scaled.magnitude
        let fraction = String(magnitude % 10_000)
        return (scaled < 0 ? "-" : "") + "\(magnitude / 10_000)." + String(repeating: "0", count: 4 - fraction.count)
            + fraction
    }
}
