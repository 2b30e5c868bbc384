import WinBackModel

/// One offer episode of a customer (docs/rules.md §4.3): a maximal run of consecutive rows with the same
/// (offerType, offerIdentifier), each starting at most `consecutiveGapDays` after the previous
/// row's expiresDate. Its first row is the redemption.
public struct Episode: Sendable, Equatable {
    /// What became of the episode at T.
    public enum Outcome: UInt8, Sendable {
        /// The next row has no offer, is paid and starts at most the gap after the episode's end.
        case converted
        /// No row follows yet, and the episode ended less than the gap before T.
        case pending
        /// Anything else: the customer left, or moved to another offer or a free period.
        case lapsed
    }

    /// Raw `offerType` (never 0: rows without an offer make no episode).
    public var offerType: Int64
    public var offerIdentifier: Int32
    /// The first row's `offerDiscountType`.
    public var discountType: Int32
    /// purchaseDate of the first row: when the offer was redeemed.
    public var start: Int64
    /// expiresDate of the last row.
    public var end: Int64
    public var outcome: Outcome

    /// The episodes of one customer at `t`, in order, into `out` (cleared first, capacity kept).
    ///
    /// - Parameter rows: the customer's rows ordered by (purchaseDate, transactionId); rows that
    ///   are not PURCHASED or not yet purchased at `t` are skipped.
    public static func scan<C: Collection>(
        _ rows: C, asOf t: Int64, gapDays: Int64, into out: inout [Episode]
    ) where C.Element == Transaction {
        out.removeAll(keepingCapacity: true)
        let gap = gapDays * MonthMath.day
        var open = false  // whether out.last is still taking rows
        for r in rows where r.isKnownPurchase(at: t) {
            if open {
                let e = out[out.count - 1]
                if r.offerType == e.offerType && r.offerIdentifier == e.offerIdentifier
                    && r.purchaseDate - e.end <= gap
                {
                    out[out.count - 1].end = r.expiresDate
                    continue
                }
                // `r` is the row right after the episode.
                out[out.count - 1].outcome =
                    r.offerType == 0 && r.isPaid(at: t) && r.purchaseDate - e.end <= gap ? .converted : .lapsed
                open = false
            }
            if r.offerType != 0 {
                out.append(
                    Episode(
                        offerType: r.offerType, offerIdentifier: r.offerIdentifier, discountType: r.offerDiscountType,
                        start: r.purchaseDate, end: r.expiresDate, outcome: .lapsed))
                open = true
            }
        }
        if open, out[out.count - 1].end + gap > t {
            out[out.count - 1].outcome = .pending
        }
    }
}
