/// Why one customer is or is not in each audience: the readable form of the reconstruction,
/// for `winback explain`. Built with the same functions as `run`, so the two always agree.
public struct Explanation: Sendable {
    /// One transaction row of the customer, with what the rules made of it.
    public struct Row: Sendable {
        public var transactionId: String
        public var productId: String
        public var purchaseDate: Int64
        public var expiresDate: Int64
        public var offer: String  // "introductory", "win_back wb.x", … or ""
        public var discountType: String
        public var revocationDate: Int64?
        public var isUpgraded: Bool
        /// Why the row gives no period, when it does not.
        public var ignored: String?
        /// For signed inputs, whether the row's signature was verified; nil for decoded ones.
        public var signatureVerified: Bool? = nil
    }

    /// One access period (SPEC §3 rule 3).
    public struct PeriodView: Sendable {
        public var start: Int64
        public var end: Int64
        public var paid: Bool
        public var refunded: Bool
        /// Run number, from 1.
        public var run: Int
        public var productId: String
        public var transactionId: String
        public var offer: String
        /// Days since the previous reach (nil for the first period).
        public var gapDays: Double?
        public var startsNewRun: Bool
        /// The row was upgraded to another product (its period was cut by the next one).
        public var upgraded: Bool
    }

    /// A criterion that failed, with the numbers behind it.
    public struct Failure: Sendable, Equatable {
        public var reason: String
        public var detail: String
        /// When the criterion will hold, if time alone fixes it.
        public var from: Int64?
    }

    /// The verdict on one offer of the customer's group.
    public struct Verdict: Sendable {
        public var offerId: String
        public var eligible: Bool
        public var rank: Int?
        public var failures: [Failure]
    }

    public var subscriptionGroupId: String
    public var originalTransactionId: String
    public var asOf: Int64
    public var consecutiveGapDays: Int64
    /// nil when the customer has no access period (not a subscriber).
    public var state: SubscriptionState?
    public var lastSubscribedEnd: Int64?
    public var monthsSinceLastSubscribed: Int64?
    public var paidMonths: Int64?
    public var paidRunStart: Int64?
    public var productId: String?
    public var storefront: String?
    public var appAccountToken: String?
    public var rows: [Row]
    public var periods: [PeriodView]
    public var winBackHistory: [(offerId: String, end: Int64)]
    public var offers: [Verdict]
    /// The renewal info applied, as Apple sent it.
    public var renewalSignedDate: Int64?
    public var appleEligibleWinBackOfferIds: [String]?
    /// For signed inputs, how the rows' signatures were checked; nil for decoded ones.
    public var signatures: String? = nil

    /// The eligible offer ids in rank order, as the segments list them.
    public var eligibleOfferIds: [String] {
        offers.filter(\.eligible).sorted { ($0.rank ?? 0) < ($1.rank ?? 0) }.map(\.offerId)
    }
}
