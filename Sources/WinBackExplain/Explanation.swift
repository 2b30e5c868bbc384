import WinBackRead
import WinBackRules

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

    /// One access period (docs/rules.md §3 rule 3).
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

    /// One offer on which Apple and winback disagree at S (docs/rules.md §4.5).
    public struct AppleDisagreement: Sendable {
        public var offerId: String
        /// Whether the catalog has the offer.
        public var inCatalog: Bool
        /// Apple lists it; otherwise winback finds it eligible at S.
        public var apple: Bool
        /// Why winback finds it not eligible at S, with the numbers; empty when winback says
        /// eligible or the catalog lacks the offer.
        public var failures: [Failure]
    }

    /// Apple's `eligibleWinBackOfferIds` beside winback's own evaluation at S, the signedDate of
    /// the renewal info that carries the list (docs/rules.md §4.5).
    public struct AppleView: Sendable {
        /// S.
        public var signedDate: Int64
        /// The customer at S; nil when they had no access period then.
        public var state: SubscriptionState?
        public var paidMonths: Int64?
        public var lastSubscribedEnd: Int64?
        public var monthsSinceLastSubscribed: Int64?
        public var appleIds: [String]
        /// The offers winback finds eligible at S, rank 1 first.
        public var winbackIds: [String]
        public var disagreements: [AppleDisagreement]
    }

    /// The verdict on one offer of the customer's group.
    public struct Verdict: Sendable {
        public var offerId: String
        public var eligible: Bool
        public var rank: Int?
        public var failures: [Failure]
        /// The offer's `targetSubscriptionPlanType`, when the catalog gives one (docs/rules.md §13.4).
        public var planType: String? = nil
    }

    /// The customer's arm of the run's experiment (docs/rules.md §9.1).
    public struct ExperimentView: Sendable {
        public var name: String
        public var holdout: String
        public var start: Int64
        /// 0..<10 000.
        public var bucket: Int
        public var heldOut: Bool
        /// Whether the experiment leaves the holdout out of the audiences at T.
        public var applies: Bool
    }

    /// One return (docs/rules.md §9.3): a period starting at least a whole month after every
    /// earlier one ended.
    public struct ReturnView: Sendable {
        public var start: Int64
        /// When the customer had left: the latest end among the earlier periods.
        public var reach: Int64
        /// `win_back`, `promotional`, `offer_code`, `introductory`, `unknown:N` or `none`.
        public var kind: String
        public var offerId: String
        /// Whether retention-after-return.csv counts it (it began in its months).
        public var counted: Bool
        /// Per horizon in months: nil when not yet observable, else whether subscribed then.
        public var retained: [(months: Int64, retained: Bool?)]
        /// Per horizon in months: the net revenue of the customer's rows from the return until
        /// then, in units of ``currency`` (docs/rules.md §13.2); nil when not yet observable, or
        /// when the return's row has no amount and amounts stay per currency.
        public var revenue: [(months: Int64, net: String?)] = []
        /// The reporting currency, or the return's row's; empty when it has none.
        public var currency = ""
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
    /// The comparison with Apple at S, when the renewal info known at T carries Apple's list
    /// and a signedDate.
    public var apple: AppleView?
    /// For signed inputs, how the rows' signatures were checked; nil for decoded ones.
    public var signatures: String? = nil
    /// The customer's bucket and arm, when the pipeline has an experiment.
    public var experiment: ExperimentView? = nil
    /// Every return of the customer at T, with its kind.
    public var returns: [ReturnView] = []
    /// With an experiment, per cohort month of the report window: the customer's cohort revenue
    /// over `money.horizonMonths` (docs/rules.md §13.3), nil while the horizon has not passed.
    public var cohortRevenue: [(month: String, net: String?)] = []
    /// The currency of amounts: `money.currency`, or empty when they stay per currency.
    public var moneyCurrency = ""
    /// Rejected lines that name the customer: rows the timeline does not have.
    public var rejectedLines: [Reject] = []
    /// What the reader should know of how the customer was explained: the as-of taken from the
    /// latest published run (docs/rules.md §10.10), an identity value asked for that a later row
    /// of the identities file superseded (§6.3).
    public var notes: [String] = []

    /// The eligible offer ids in rank order, as the segments list them.
    public var eligibleOfferIds: [String] {
        offers.filter(\.eligible).sorted { ($0.rank ?? 0) < ($1.rank ?? 0) }.map(\.offerId)
    }
}
