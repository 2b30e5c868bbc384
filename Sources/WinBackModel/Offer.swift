/// A win-back offer of the catalog, with the App Store Connect `winBackOffers` attribute names.
/// See https://developer.apple.com/documentation/appstoreconnectapi/winbackoffer/attributes-data.dictionary
public struct Offer: Sendable, Equatable {
    public enum Priority: String, Sendable {
        case high = "HIGH"
        case normal = "NORMAL"
    }

    public var offerId: String
    public var referenceName: String?
    public var subscriptionGroupId: String
    public var productId: String
    public var appleId: String?
    public var duration: String?
    public var offerMode: String?
    public var periodCount: Int?
    /// `customerEligibilityPaidSubscriptionDurationInMonths`.
    public var paidMonths: Int
    /// `customerEligibilityTimeSinceLastSubscribedInMonths.minimum`.
    public var minMonthsSince: Int
    /// `customerEligibilityTimeSinceLastSubscribedInMonths.maximum`.
    public var maxMonthsSince: Int
    /// `customerEligibilityWaitBetweenOffersInMonths`; nil = no wait.
    public var waitMonths: Int?
    /// Day numbers (days since 1970-01-01); nil start = live since always, nil end = open.
    public var startDay: Int64?
    public var endDay: Int64?
    public var priority: Priority
    /// Alpha-3 codes; empty = every territory.
    public var territories: [String]
    /// `targetSubscriptionPlanType`: `UPFRONT` or `MONTHLY` (the billing plans of 2026); nil when
    /// absent. Shown in explain and the manifest; no effect on eligibility (docs/rules.md §13.4).
    public var targetSubscriptionPlanType: String?

    public init(
        offerId: String, subscriptionGroupId: String, productId: String, paidMonths: Int,
        minMonthsSince: Int, maxMonthsSince: Int, waitMonths: Int? = nil,
        startDay: Int64? = nil, endDay: Int64? = nil, priority: Priority = .normal,
        territories: [String] = [], appleId: String? = nil
    ) {
        self.offerId = offerId
        self.subscriptionGroupId = subscriptionGroupId
        self.productId = productId
        self.paidMonths = paidMonths
        self.minMonthsSince = minMonthsSince
        self.maxMonthsSince = maxMonthsSince
        self.waitMonths = waitMonths
        self.startDay = startDay
        self.endDay = endDay
        self.priority = priority
        self.territories = territories
        self.appleId = appleId
    }

    /// Live on the UTC day `day`: startDate ≤ day ≤ endDate.
    public func isLive(onDay day: Int64) -> Bool {
        if let s = startDay, day < s { return false }
        if let e = endDay, day > e { return false }
        return true
    }

    /// `https://apps.apple.com/win-back/<appleId>`, or empty without an appleId.
    public var offerURL: String {
        appleId.map { "https://apps.apple.com/win-back/\($0)" } ?? ""
    }
}
