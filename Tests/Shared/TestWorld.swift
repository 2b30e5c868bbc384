import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTesting
import WinBackWrite

/// Parses `2025-01-01T12:00:00Z` or `2025-01-01` (00:00) into ms; traps on a typo in a test.
package func ms(_ s: String) -> Int64 {
    if let d = Timestamp.parseDate(s) { return d * MonthMath.day }
    guard let t = Timestamp.parseDateTime(s) else { fatalError("bad test timestamp \(s)") }
    return t
}

/// Builds hand-written customer histories with ids interned in one table.
package final class TestWorld {
    package let strings = StringTable()
    package var nextId = 1

    package init() {}

    package func id(_ s: String) -> Int32 { strings.intern(s) }
    /// The key of a transaction or customer id.
    package func key(_ s: String) -> TransactionKey { TransactionKey(s, table: strings) }
    /// The token of a UUID.
    package func token(_ s: String) -> AppAccountToken {
        guard let t = AppAccountToken.parse(s, table: strings) else { preconditionFailure("\(s) is not a UUID") }
        return t
    }

    /// One transaction; dates are `ms(...)` strings.
    package func tx(
        _ purchase: String, _ expires: String, product: String = "basic", group: String = "g1",
        customer: String = "c1", id txId: String? = nil, free: Bool = false, offerType: Int64 = 0,
        offerId: String? = nil, revoked: String? = nil, upgraded: Bool = false, family: Bool = false,
        storefront: String? = "USA", token: String? = nil, signed: Int64 = Transaction.unsigned,
        sandbox: Bool = false
    ) -> Transaction {
        let tid = txId ?? "t\(nextId)"
        nextId += 1
        var t = Transaction(
            transactionId: TransactionKey(tid, table: strings), originalTransactionId: key(customer),
            subscriptionGroupId: id(group),
            productId: id(product), purchaseDate: ms(purchase), expiresDate: ms(expires))
        t.isFreeTrial = free
        if free { t.offerDiscountType = id("FREE_TRIAL") }
        t.offerType = offerType
        if let offerId { t.offerIdentifier = id(offerId) }
        if let revoked { t.revocationDate = ms(revoked) }
        t.isUpgraded = upgraded
        t.ownership = family ? .familyShared : .purchased
        if let storefront { t.storefront = id(storefront) }
        if let token { t.appAccountToken = self.token(token) }
        t.signedDate = signed
        t.production = !sandbox
        return t
    }

    /// Monthly paid renewals starting at `from` (12:00 UTC), `count` of them.
    package func monthly(
        from: String, count: Int, product: String = "basic", customer: String = "c1", group: String = "g1",
        storefront: String? = "USA"
    ) -> [Transaction] {
        let start = ms(from)
        return (0..<count).map { k in
            let p = MonthMath.addMonths(start, Int64(k))
            let e = MonthMath.addMonths(start, Int64(k + 1))
            return tx(
                Timestamp.iso(p), Timestamp.iso(e), product: product, group: group, customer: customer,
                storefront: storefront)
        }
    }

    /// Sorts like the pipeline does: (purchaseDate, transactionId bytes).
    package func ordered(_ rows: [Transaction]) -> [Transaction] {
        rows.sorted {
            $0.purchaseDate != $1.purchaseDate
                ? $0.purchaseDate < $1.purchaseDate : strings.less($0.transactionId, $1.transactionId)
        }
    }

    package func timeline(
        _ rows: [Transaction], at t: String, gapDays: Int64 = 60, renewal: RenewalInfo? = nil
    ) -> CustomerTimeline? {
        var periods: [Period] = []
        return CustomerTimeline.build(
            rows: ordered(rows), asOf: ms(t), gapDays: gapDays, renewal: renewal, periods: &periods)
    }

    package func periods(_ rows: [Transaction], at t: String, gapDays: Int64 = 60) -> [Period] {
        var periods: [Period] = []
        _ = CustomerTimeline.build(rows: ordered(rows), asOf: ms(t), gapDays: gapDays, renewal: nil, periods: &periods)
        return periods
    }

    /// Apple's example offer: Basic, one month free, ≥ 3 paid months, 2–24 months since, wait 6.
    package static func basicOffer(
        paid: Int = 3, min: Int = 2, max: Int = 24, wait: Int? = 6, start: String? = "2024-07-01",
        end: String? = nil, territories: [String] = [], priority: Offer.Priority = .high,
        id: String = "wb.basic.1m.free"
    ) -> Offer {
        Offer(
            offerId: id, subscriptionGroupId: "g1", productId: "basic", paidMonths: paid, minMonthsSince: min,
            maxMonthsSince: max, waitMonths: wait, startDay: start.flatMap { Timestamp.parseDate($0) },
            endDay: end.flatMap { Timestamp.parseDate($0) }, priority: priority, territories: territories)
    }

    package func compile(_ offer: Offer, index: Int = 0) -> CompiledOffer {
        CompiledOffer(index: index, offer: offer, ids: { self.strings.lookup($0) })
    }

    /// Failing reasons of `offer` for the customer made of `rows` at `t`.
    package func failures(_ offer: Offer, _ rows: [Transaction], at t: String, renewal: RenewalInfo? = nil) -> Reasons?
    {
        guard let tl = timeline(rows, at: t, renewal: renewal) else { return nil }
        return compile(offer).failures(tl, asOf: ms(t))
    }
}
