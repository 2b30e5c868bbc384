import WinBackModel

/// `eligibility-funnel.csv` (docs/rules.md §4.3): per catalog offer, where the group's customers drop
/// out. The counts are the ones ``Audience/evaluate(_:book:renewals:asOf:gapDays:threads:)``
/// gathered while building the segments, so the funnel and the segments always agree.
public enum FunnelReport {
    /// The header: the group's customers, the state columns, churned, a column for each
    /// criterion that drops churned customers (``Criterion/funnel``), eligible.
    public static let columns =
        ["offer_id", "live", "customers_in_group"] + Criterion.funnel(.state).map(\.label) + ["churned"]
        + Criterion.funnel(.drop).map(\.label) + ["eligible"]

    /// (offer id, funnel) in catalog order.
    static func rows(_ audience: Audience, book: OfferBook) -> [(offerId: String, funnel: FunnelRow)] {
        zip(book.offers, audience.funnel).map { ($0.offer.offerId, $1) }
    }

    public static func csv(_ rows: [(offerId: String, funnel: FunnelRow)]) -> [UInt8] {
        CSVRecord.table(columns, rows) { r, item in
            let (id, f) = item
            r.field(id)
            r.field(f.live ? "true" : "false")
            r.field(f.customersInGroup)
            for c in Criterion.funnel(.state) { r.field(f[c]) }
            r.field(f.churned)
            for c in Criterion.funnel(.drop) { r.field(f[c]) }
            r.field(f.eligible)
        }
    }
}
