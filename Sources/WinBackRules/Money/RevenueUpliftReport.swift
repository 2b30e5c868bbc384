import Foundation
import WinBackModel

/// Builds and prints `winback-revenue-uplift.csv` (docs/rules.md §13.3): per cohort month and
/// offer, each arm's revenue per customer over the horizon, their difference with a 95 %
/// interval, and the revenue the campaign added among the treatment's customers.
public enum RevenueUpliftReport {
    public static let columns = [
        "month", "offer_id", "horizon_months", "currency", "treatment_customers", "holdout_customers",
        "treatment_revenue_per_customer", "holdout_revenue_per_customer", "revenue_lift", "revenue_lift_low",
        "revenue_lift_high", "incremental_revenue",
    ]

    static let z = 1.959963984540054

    /// One line's figures, in milliunits.
    public struct Figures: Sendable, Equatable {
        public var month: String
        public var offerId: String
        public var treatmentCustomers: Int
        public var holdoutCustomers: Int
        public var treatment: CohortRevenue
        public var holdout: CohortRevenue
        /// Whether the revenue columns are written (the month's horizon has passed).
        public var counted: Bool

        /// Σx/n of an arm, units with three decimals; empty when the arm has nobody.
        public var treatmentMean: String {
            counted ? Milliunits.quotient(treatment.sum.value, treatment.customers) : ""
        }
        public var holdoutMean: String { counted ? Milliunits.quotient(holdout.sum.value, holdout.customers) : "" }

        /// The difference of the means, as an exact fraction (numerator, denominator n1·n0);
        /// nil unless both arms have someone.
        var liftFraction: (Int128, Int128)? {
            guard counted, treatment.customers > 0, holdout.customers > 0 else { return nil }
            let (n1, n0) = (Int128(treatment.customers), Int128(holdout.customers))
            let (a, o1) = treatment.sum.value.multipliedReportingOverflow(by: n0)
            let (b, o2) = holdout.sum.value.multipliedReportingOverflow(by: n1)
            guard !o1, !o2 else { return nil }
            return (a - b, n1 * n0)
        }

        /// The lift in milliunits, as a double.
        public var lift: Double? {
            guard counted, treatment.customers > 0, holdout.customers > 0 else { return nil }
            return Double(treatment.sum.value) / Double(treatment.customers) - Double(holdout.sum.value)
                / Double(holdout.customers)
        }

        /// lift ∓ z·sqrt(s1²/n1 + s0²/n0), milliunits; nil unless both arms have two or more.
        public var interval: (low: Double, high: Double)? {
            guard counted, let lift, let v1 = treatment.variance, let v0 = holdout.variance else { return nil }
            let h =
                RevenueUpliftReport.z * (v1 / Double(treatment.customers) + v0 / Double(holdout.customers)).squareRoot()
            return (lift - h, lift + h)
        }

        public var liftText: String {
            if let (num, den) = liftFraction { return RevenueUpliftReport.rounded(num, den) }
            return lift.map { Milliunits.units(double: $0) } ?? ""
        }

        /// lift × n1 = (Σx1·n0 − Σx0·n1) / n0, rounded only when written.
        public var incrementalText: String {
            if let (num, _) = liftFraction { return RevenueUpliftReport.rounded(num, Int128(holdout.customers)) }
            return lift.map { Milliunits.units(double: $0 * Double(treatment.customers)) } ?? ""
        }
    }

    /// `num / den` milliunits (den > 0) in units, three decimals, half away from zero.
    static func rounded(_ num: Int128, _ den: Int128) -> String {
        let n = num.magnitude
        let d = den.magnitude
        let q = (2 * n + d) / (2 * d)
        return Milliunits.units(num < 0 && q > 0 ? -Int128(q) : Int128(q))
    }

    /// Every line from the cohort months' counted rows (month, then catalog order): per month
    /// each offer then `*`; then `*` months per offer and `*`, which sum only the months whose
    /// horizon has passed (docs/rules.md §13.3).
    public static func figures(_ rows: [UpliftRow], offerIds: [String]) -> [Figures] {
        UpliftReport.table(rows, offerIds: offerIds).map { r in
            let star = r.month == "*"
            // A month's horizon has passed when every customer of it was counted with revenue.
            let counted =
                star
                || (r.treatment.revenue.customers == r.treatment.customers
                    && r.holdout.revenue.customers == r.holdout.customers)
            return Figures(
                month: r.month, offerId: r.offerId,
                treatmentCustomers: star ? r.treatment.revenue.customers : r.treatment.customers,
                holdoutCustomers: star ? r.holdout.revenue.customers : r.holdout.customers,
                treatment: r.treatment.revenue, holdout: r.holdout.revenue, counted: counted)
        }
    }

    /// The reporting currency, or the one currency of the priced rows; nil when the rows are in
    /// several and there is no `money` (the file then holds its header only).
    public static func currency(_ r: Reports) -> String? {
        if let c = r.reportingCurrency { return c }
        return r.money.currencies.count <= 1 ? (r.money.currencies.first ?? "") : nil
    }

    public static func csv(_ r: Reports, offerIds: [String]) -> [UInt8] {
        guard let currency = currency(r) else { return CSVRecord.table(columns, [Figures]()) { _, _ in } }
        return CSVRecord.table(columns, figures(r.uplift, offerIds: offerIds)) { w, f in
            w.field(f.month)
            w.field(f.offerId)
            w.field(r.horizonMonths)
            w.field(currency)
            w.field(f.treatmentCustomers)
            w.field(f.holdoutCustomers)
            // Signed numbers, written as they are (not guarded as text that could start a formula).
            w.field(escaped: Array(f.treatmentMean.utf8))
            w.field(escaped: Array(f.holdoutMean.utf8))
            w.field(escaped: Array(f.liftText.utf8))
            if let i = f.interval {
                w.field(escaped: Array(Milliunits.units(double: i.low).utf8))
                w.field(escaped: Array(Milliunits.units(double: i.high).utf8))
            } else {
                w.empty()
                w.empty()
            }
            w.field(escaped: Array(f.incrementalText.utf8))
        }
    }
}
