/// What a row was charged and what went back (docs/rules.md §13.1), in milliunits of its
/// currency. Nothing here runs unless a report asks for amounts.
extension Transaction {
    /// Whether the row has an amount: a price and a currency.
    @inline(__always)
    public var isPriced: Bool { price >= 0 && currency >= 0 }

    /// The milliunits refunded at `t` (docs/rules.md §13.1): none unless revoked before `t`
    /// and not upgraded; none for a family revoke; `floor(price × p / 100 000)` for a prorated
    /// refund with a percentage p; else the whole price.
    public func refunded(at t: Int64) -> Int64 {
        guard isPriced, isRevoked(at: t) else { return 0 }
        switch revocationType {
        case .familyRevoke:
            return 0
        case .refundProrated where revocationPercentage >= 0:
            // price ≥ 0 and p ≤ 100 000, so the quotient is the floor and fits.
            return Int64(Int128(price) * Int128(revocationPercentage) / 100_000)
        default:
            return price
        }
    }

    /// price − refunded at `t`; 0 for a row without an amount.
    public func net(at t: Int64) -> Int64 { isPriced ? price - refunded(at: t) : 0 }
}
