import WinBackModel

/// One access period of a customer: `[start, end)` from one PURCHASED row (docs/rules.md §3 rule 3).
public struct Period: Sendable, Equatable {
    public var start: Int64
    public var end: Int64
    /// Paid: not a free trial and not revoked.
    public var paid: Bool
    /// Revoked at the as-of instant (refund), which also cut `end`.
    public var revoked: Bool
    /// Index of the row that gave the period, in the customer's ordered rows.
    public var row: Int32
    /// Which consecutive run (rule 5) the period belongs to, from 0.
    public var run: Int32

    public init(start: Int64, end: Int64, paid: Bool, revoked: Bool = false, row: Int32, run: Int32 = 0) {
        self.start = start
        self.end = end
        self.paid = paid
        self.revoked = revoked
        self.row = row
        self.run = run
    }
}

/// A customer's subscription state at the as-of instant (docs/rules.md §3 rule 4).
public enum SubscriptionState: UInt8, Sendable {
    case active
    case billingRetry
    case churned

    public var label: String {
        switch self {
        case .active: return "active"
        case .billingRetry: return "billing_retry"
        case .churned: return "churned"
        }
    }
}
