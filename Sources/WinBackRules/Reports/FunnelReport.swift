import WinBackModel

/// `eligibility-funnel.csv` (docs/rules.md §4.3): per catalog offer, where the group's customers drop
/// out. The counts are the ones ``Audience/evaluate(_:book:renewals:asOf:gapDays:threads:)``
/// gathered while building the segments, so the funnel and the segments always agree.
public enum FunnelReport {
    public static let columns = [
        "offer_id", "live", "customers_in_group", "active", "billing_retry", "churned", "other_product", "territory",
        "paid_duration", "too_recent", "too_long_ago", "wait_between_offers", "eligible",
    ]

    /// (offer id, funnel) in catalog order.
    static func rows(_ audience: Audience, book: OfferBook) -> [(offerId: String, funnel: FunnelRow)] {
        zip(book.offers, audience.funnel).map { ($0.offer.offerId, $1) }
    }

    public static func csv(_ rows: [(offerId: String, funnel: FunnelRow)]) -> [UInt8] {
        CSVRecord.table(columns, rows) { r, item in
            let (id, f) = item
            r.field(id)
            r.field(f.live ? "true" : "false")
            for v in [
                f.customersInGroup, f.active, f.billingRetry, f.churned, f.otherProduct, f.territory, f.paidDuration,
                f.tooRecent, f.tooLongAgo, f.waitBetweenOffers, f.eligible,
            ] {
                r.field(v)
            }
        }
    }
}
