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

    /// Every reason with its label, in the order of docs/rules.md §3 rule 10 (``Criterion``).
    public static let all: [(Reasons, String)] = Criterion.allCases.map { ($0.reason, $0.label) }

    /// The labels of the reasons in this set, in the order of docs/rules.md §3 rule 10.
    public var labels: [String] {
        Reasons.all.filter { contains($0.0) }.map(\.1)
    }
}

/// The criteria of an offer, one case each, in the order of docs/rules.md §3 rule 10: the one
/// list that the reasons' bits, their labels, the funnel's columns (`eligibility-funnel.csv`
/// and the page's chart) and `explain`'s lines are drawn from. A new criterion is a case here;
/// every `switch` over it (its label, its words, its place in the funnel, its count in
/// ``FunnelRow``, its line in `explain`) then fails to compile until it is given its own.
public enum Criterion: Int, CaseIterable, Sendable {
    case active, billingRetry, notSubscriber, otherProduct, offerNotLive, territory, paidDuration, tooRecent
    case tooLongAgo, waitBetweenOffers

    /// Where the funnel counts the customers a criterion keeps out (docs/rules.md §4.3).
    public enum FunnelPlace: Sendable {
        /// A state column, counted before the other criteria: the customer is not churned.
        case state
        /// A column of churned customers the criterion drops.
        case drop
        /// Not a column: a customer who is not a subscriber of the group is not in its funnel,
        /// and an offer that is not live says so in the `live` column.
        case none
    }

    /// The reason's bit in a set of ``Reasons``.
    @inline(__always)
    public var reason: Reasons { Reasons(rawValue: 1 << UInt16(rawValue)) }

    /// The label in reasons, the funnel's header and `explain`: `too_recent`.
    public var label: String {
        switch self {
        case .active: "active"
        case .billingRetry: "billing_retry"
        case .notSubscriber: "not_subscriber"
        case .otherProduct: "other_product"
        case .offerNotLive: "offer_not_live"
        case .territory: "territory"
        case .paidDuration: "paid_duration"
        case .tooRecent: "too_recent"
        case .tooLongAgo: "too_long_ago"
        case .waitBetweenOffers: "wait_between_offers"
        }
    }

    /// The words on the report page: `too recent`.
    public var words: String { label.replacingOccurrences(of: "_", with: " ") }

    public var funnel: FunnelPlace {
        switch self {
        case .active, .billingRetry: .state
        case .notSubscriber, .offerNotLive: .none
        case .otherProduct, .territory, .paidDuration, .tooRecent, .tooLongAgo, .waitBetweenOffers: .drop
        }
    }

    /// The criteria the funnel has a column for, in its order.
    public static func funnel(_ place: FunnelPlace) -> [Criterion] { allCases.filter { $0.funnel == place } }
}
