/// Why a customer is not eligible for an offer (docs/rules.md §3 rule 10); a set, since `explain`
/// and the funnel list every criterion that fails.
public struct Reasons: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let active = Reasons(rawValue: 1 << 0)
    public static let billingRetry = Reasons(rawValue: 1 << 1)
    public static let notSubscriber = Reasons(rawValue: 1 << 2)
    public static let otherProduct = Reasons(rawValue: 1 << 3)
    public static let offerNotLive = Reasons(rawValue: 1 << 4)
    public static let territory = Reasons(rawValue: 1 << 5)
    public static let paidDuration = Reasons(rawValue: 1 << 6)
    public static let tooRecent = Reasons(rawValue: 1 << 7)
    public static let tooLongAgo = Reasons(rawValue: 1 << 8)
    public static let waitBetweenOffers = Reasons(rawValue: 1 << 9)

    /// Every reason with its label, in the order of docs/rules.md §3 rule 10.
    public static let all: [(Reasons, String)] = [
        (.active, "active"), (.billingRetry, "billing_retry"), (.notSubscriber, "not_subscriber"),
        (.otherProduct, "other_product"), (.offerNotLive, "offer_not_live"), (.territory, "territory"),
        (.paidDuration, "paid_duration"), (.tooRecent, "too_recent"), (.tooLongAgo, "too_long_ago"),
        (.waitBetweenOffers, "wait_between_offers"),
    ]

    /// The labels of the reasons in this set, in the order of docs/rules.md §3 rule 10.
    public var labels: [String] {
        Reasons.all.filter { contains($0.0) }.map(\.1)
    }
}
