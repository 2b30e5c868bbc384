import WinBackModel
import WinBackRules

/// Simulates one customer's subscription history: trials, renewals, upgrades and downgrades,
/// refunds, late renewals after billing retry, churn and come-back (sometimes through a
/// win-back offer), promotional and offer-code redemptions, family sharing, sandbox.
struct CustomerSimulator {
    let asOf: Int64
    let seed: UInt64
    /// A campaign to simulate (docs/rules.md §9.4): from its start, a treatment customer who is
    /// eligible at a month's first instant returns with the rank-1 offer that month with
    /// ``campaignPull`` odds, beside the returns everyone makes anyway.
    var experiment: Experiment? = nil
    static let day = MonthMath.day
    /// The monthly odds that the campaign brings back an eligible treatment customer.
    static let campaignPull = 0.05

    /// When the campaign brings back a customer who left at `left` and would otherwise come back
    /// at `until` (or never, `asOf`): the first month from the experiment's start at whose first
    /// instant they are eligible and the draw succeeds; then the instant and the offer.
    func campaignReturn(
        left: Int64, until: Int64, group: String, original: UInt64, rows: [GeneratedTransaction],
        rng: inout SplitMix64
    ) -> (at: Int64, offer: String, free: Bool)? {
        guard let e = experiment,
            !e.assignment.isHeldOut(group: group, originalTransactionId: String(original))
        else { return nil }
        // The first cohort month begins on or after the start.
        let first = MonthMath.monthStart(e.start) == e.start ? e.start : MonthMath.monthStart(e.start, offset: 1)
        var m = max(MonthMath.monthStart(left, offset: 1), first)
        while m < min(until, asOf) {
            if let best = GeneratedAppleList.eligible(rows, at: m).first, rng.chance(Self.campaignPull) {
                let at = Self.seconds(m + Int64(rng.int(0...27)) * Self.day + Int64(rng.int(0...86_399)) * 1000)
                guard at < until && at < asOf else { return nil }
                let free =
                    GeneratedAppleList.rules.catalog.offers.first { $0.offerId == best }?.offerMode == "FREE_TRIAL"
                return (at, best, free)
            }
            m = MonthMath.monthStart(m, offset: 1)
        }
        return nil
    }

    static let storefronts: [(String, Int)] = [
        ("USA", 35), ("GBR", 10), ("CAN", 8), ("DEU", 8), ("FRA", 7), ("JPN", 7), ("AUS", 5), ("BRA", 5),
        ("IND", 4), ("MEX", 3), ("ITA", 3), ("ESP", 3), ("NLD", 2),
    ]
    static let currencies: [String: String] = [
        "USA": "USD", "GBR": "GBP", "CAN": "CAD", "DEU": "EUR", "FRA": "EUR", "JPN": "JPY", "AUS": "AUD",
        "BRA": "BRL", "IND": "INR", "MEX": "MXN", "ITA": "EUR", "ESP": "EUR", "NLD": "EUR",
    ]

    struct Result {
        var rows: [GeneratedTransaction] = []
        var renewal: GeneratedRenewal?
    }

    /// Whole seconds: every format (RevenueCat's included) can carry the same instants.
    static func seconds(_ t: Int64) -> Int64 { t / 1000 * 1000 }

    static func uuid(_ rng: inout SplitMix64) -> String {
        let hex = Array("0123456789abcdef")
        var s = ""
        let a = rng.next()
        let b = rng.next()
        for i in 0..<32 {
            if i == 8 || i == 12 || i == 16 || i == 20 { s.append("-") }
            var nibble = Int(((i < 16 ? a : b) >> UInt64((i % 16) * 4)) & 0xF)
            if i == 12 { nibble = 4 }
            if i == 16 { nibble = 8 | (nibble & 3) }
            s.append(hex[nibble])
        }
        return s
    }

    func simulate(_ c: Int) -> Result {
        var rng = SplitMix64(seed: seed, index: UInt64(c))
        // The campaign's draws come from a generator of their own: without an experiment the
        // world is the same as ever.
        var campaign = SplitMix64(seed: seed ^ 0xCA3B_A16E, index: UInt64(c))
        typealias P = GeneratedCatalog
        let photo = rng.chance(0.3)
        var product =
            photo
            ? (rng.chance(0.7) ? P.photoMonthly : P.photoYearly)
            : rng.weighted([(P.basic, 60), (P.premium, 30), (P.premiumYearly, 10)])
        let storefront = rng.weighted(Self.storefronts)
        let token = rng.chance(0.85) ? Self.uuid(&rng) : nil
        let sandbox = rng.chance(0.01)
        let original = 1_000_000_000_000_000 + UInt64(c) * 10
        let userId = "user-\(c)"
        var k: UInt64 = 0
        var out = Result()

        func row(_ start: Int64, _ end: Int64) -> GeneratedTransaction {
            defer { k += 1 }
            let tx = 2_000_000_000_000_000 + UInt64(c) * 1000 + k
            return GeneratedTransaction(
                transactionId: tx, originalTransactionId: original, webOrderLineItemId: tx + 5_000_000_000_000_000,
                productId: product.id, groupId: product.group, purchaseDate: start, expiresDate: end,
                signedDate: start + Int64(rng.int(0...3600)) * 1000, sandbox: sandbox, storefront: storefront,
                appAccountToken: token, price: product.priceMilli, currency: Self.currencies[storefront] ?? "USD",
                renewal: k > 0, userId: userId)
        }

        // Started between three years and a month before the as-of day.
        let span = (asOf - MonthMath.addMonths(asOf, -36)) / 1000
        var t = Self.seconds(asOf - Int64(rng.int(30 * 86_400...Int(span))) * 1000)
        if rng.chance(0.4) {
            // An introductory free trial.
            let end = product.months == 1 ? t + 7 * Self.day : MonthMath.addMonths(t, 1)
            var r = row(t, end)
            (r.offerType, r.offerDiscountType, r.offerPeriod, r.price) =
                (1, "FREE_TRIAL", product.months == 1 ? "P1W" : "P1M", 0)
            out.rows.append(r)
            t = end
        }
        var comebacks = 0
        var pendingWinBack: (id: String, free: Bool, left: Int)?
        var first = true
        while t < asOf && k < 900 {
            let end = MonthMath.addMonths(t, product.months)
            var r = row(t, end)
            Self.markOffer(&r, winBack: &pendingWinBack, first: first, product: product, rng: &rng)
            first = false
            if product.id == P.basic.id && r.offerType == nil && rng.chance(0.03) {
                // Upgrade mid-period: the old transaction is revoked as upgraded.
                let mid = Self.seconds(t + (end - t) / 2)
                r.isUpgraded = true
                r.revocationDate = mid
                out.rows.append(r)
                product = P.premium
                t = mid
                continue
            }
            if rng.chance(0.015) {
                // Refunded, and gone for good.
                Self.refund(&r, from: t, to: end, rng: &rng)
                out.rows.append(r)
                break
            }
            out.rows.append(r)
            t = end
            let churn = product.months == 12 ? 0.3 : 0.07
            if pendingWinBack == nil && rng.chance(churn) {
                guard
                    lapse(
                        at: &t, comebacks: &comebacks, winBack: &pendingWinBack, product: product,
                        original: original, rows: out.rows, rng: &rng, campaign: &campaign)
                else { break }
            } else if product.id == P.premium.id && rng.chance(0.02) {
                product = P.basic  // downgrade at renewal
            }
        }

        out.renewal = renewal(after: out.rows, original: original, c: c, rng: &rng)
        if sandbox {
            out.renewal = nil
        }
        // A family member sharing the subscription: their own originalTransactionId.
        if !sandbox && rng.chance(0.04) { out.rows += Self.family(of: out.rows, original: original, userId: userId) }
        // A purchase that is not a subscription.
        if rng.chance(0.03), let any = out.rows.first {
            var coins = row(any.purchaseDate + Self.day, any.purchaseDate + Self.day)
            (coins.autoRenewable, coins.productId, coins.groupId) = (false, "com.example.streamingpass.coins.100", "")
            (coins.price, coins.originalTransactionId) = (990, coins.transactionId)
            out.rows.append(coins)
        }
        return out
    }

    /// A lapse after a period: a late renewal after billing retry, a come-back (with a win-back
    /// offer now and then, or through the campaign), or gone for good (false).
    func lapse(
        at t: inout Int64, comebacks: inout Int, winBack pendingWinBack: inout (id: String, free: Bool, left: Int)?,
        product: GeneratedCatalog.Product, original: UInt64, rows: [GeneratedTransaction], rng: inout SplitMix64,
        campaign: inout SplitMix64
    ) -> Bool {
        guard comebacks < 3 && rng.chance(0.45) else {
            guard
                let c = campaignReturn(
                    left: t, until: asOf, group: product.group, original: original, rows: rows,
                    rng: &campaign)
            else { return false }
            comebacks += 1
            t = c.at
            pendingWinBack = (c.offer, c.free, c.free ? 1 : (product.months == 12 ? 1 : 3))
            return true
        }
        comebacks += 1
        let long = rng.chance(0.65)
        // A short gap is a late renewal after billing retry; a long one a come-back.
        let gapDays = long ? rng.int(61...540) : rng.int(2...60)
        let back = Self.seconds(t + Int64(gapDays) * Self.day + Int64(rng.int(0...86_000)) * 1000)
        if let c = campaignReturn(
            left: t, until: back, group: product.group, original: original, rows: rows, rng: &campaign)
        {
            t = c.at
            pendingWinBack = (c.offer, c.free, c.free ? 1 : (product.months == 12 ? 1 : 3))
            return true
        }
        t = back
        let offers = GeneratedCatalog.winBackOffers(for: product.id)
        if long && !offers.isEmpty && rng.chance(0.5) {
            let o = offers[rng.int(0...(offers.count - 1))]
            pendingWinBack = (o.id, o.free, o.free ? 1 : (product.months == 12 ? 1 : 3))
        }
        return true
    }

    /// Renewal info for some: billing retry and grace periods just after a lapse, auto-renew
    /// status and Apple's own eligible win-back offers for others; nil for the rest.
    func renewal(
        after rows: [GeneratedTransaction], original: UInt64, c: Int, rng: inout SplitMix64
    ) -> GeneratedRenewal? {
        guard let last = rows.last else { return nil }
        let end = last.revocationDate ?? last.expiresDate
        let lapsed = end <= asOf
        if lapsed && asOf - end < 60 * Self.day && last.revocationDate == nil && rng.chance(0.6) {
            let signed = min(asOf - 3_600_000, end + Int64(rng.int(0...2)) * Self.day)
            return GeneratedRenewal(
                originalTransactionId: original, autoRenewStatus: 1, isInBillingRetryPeriod: true,
                gracePeriodExpiresDate: rng.chance(0.3) ? end + 16 * Self.day : nil, eligibleWinBackOfferIds: nil,
                signedDate: signed)
        } else if rng.chance(0.25) {
            // Signed days to weeks before the as-of, carrying the offers winback's rules find
            // at that instant, now and then with a disagreement (docs/rules.md §4.5). Drawn
            // from a generator of their own, so the transactions stay as they were.
            var apple = SplitMix64(seed: seed ^ 0xA991_E11D, index: UInt64(c))
            let signed = Self.seconds(asOf - Int64(apple.int(86_400...(42 * 86_400))) * 1000)
            var info = RenewalInfo(signedDate: signed)
            info.autoRenewStatus = lapsed ? 0 : 1
            return GeneratedRenewal(
                originalTransactionId: original, autoRenewStatus: lapsed ? 0 : 1, isInBillingRetryPeriod: false,
                gracePeriodExpiresDate: nil,
                eligibleWinBackOfferIds: GeneratedAppleList.apple(rows, renewal: info, rng: &apple),
                signedDate: signed)
        }
        return nil
    }

    /// The offer a period is bought with: the win-back offer being redeemed, else now and then
    /// an offer code on the first period or a promotional offer on a later one.
    static func markOffer(
        _ r: inout GeneratedTransaction, winBack pendingWinBack: inout (id: String, free: Bool, left: Int)?,
        first: Bool, product: GeneratedCatalog.Product, rng: inout SplitMix64
    ) {
        if let w = pendingWinBack {
            r.offerType = 4
            r.offerIdentifier = w.id
            r.offerDiscountType = w.free ? "FREE_TRIAL" : (product.months == 12 ? "PAY_UP_FRONT" : "PAY_AS_YOU_GO")
            r.offerPeriod = product.months == 12 ? "P1Y" : "P1M"
            r.price = w.free ? 0 : product.priceMilli / 2
            pendingWinBack = w.left > 1 ? (w.id, w.free, w.left - 1) : nil
        } else if first && rng.chance(0.02) {
            r.offerType = 3
            r.offerIdentifier = "code.spring.1m"
            r.offerDiscountType = "FREE_TRIAL"
            r.offerPeriod = "P1M"
            r.price = 0
        } else if !first && rng.chance(0.02) {
            r.offerType = 2
            r.offerIdentifier = "promo.loyalty.half"
            r.offerDiscountType = "PAY_AS_YOU_GO"
            r.offerPeriod = "P1M"
            r.price = product.priceMilli / 2
        }
    }

    /// A refund: revoked within the period, with its reason and type.
    static func refund(_ r: inout GeneratedTransaction, from t: Int64, to end: Int64, rng: inout SplitMix64) {
        r.revocationDate = min(end - 1000, t + Int64(rng.int(1...20)) * Self.day)
        r.revocationReason = rng.int(0...1)
        // Prorated at 0, 50 or 100 %, or in full (docs/rules.md §13.1), decided by the row's
        // id so the world's other draws stay as they were.
        switch r.transactionId % 4 {
        case 0, 1:
            r.revocationType = "REFUND_PRORATED"
            r.revocationPercentage = Int(r.transactionId / 4 % 3) * 50_000
        case 2: r.revocationType = "REFUND_FULL"
        default: break
        }
    }

    /// A family member's rows: the same periods under their own originalTransactionId.
    static func family(of rows: [GeneratedTransaction], original: UInt64, userId: String) -> [GeneratedTransaction] {
        rows.map { r -> GeneratedTransaction in
            var f = r
            f.transactionId += 500
            f.webOrderLineItemId += 500
            f.originalTransactionId = original + 1
            f.familyShared = true
            f.appAccountToken = nil
            f.userId = userId + "-family"
            return f
        }
    }

}
