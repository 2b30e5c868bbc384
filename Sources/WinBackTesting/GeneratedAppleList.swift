import Foundation
import WinBackModel
import WinBackRules

/// Apple's `eligibleWinBackOfferIds` for a generated customer's renewal info: the offers winback's
/// own rules find the customer eligible for at the renewal info's signedDate (docs/rules.md §3
/// with T = signedDate, §4.5), best first, with a few deliberate disagreements so that the
/// agreement reports of a generated world have something to show.
enum GeneratedAppleList {
    /// The generated pipeline's `consecutiveGapDays` (the default).
    static let gapDays: Int64 = 60
    /// An id Apple might still list after the catalog dropped the offer.
    static let retiredOfferId = "wb.basic.retired2023"

    /// The generated catalog compiled against ids of its own: every group, product, offer and
    /// storefront a generated row can carry.
    struct Rules: Sendable {
        let ids: [String: Int32]
        let book: OfferBook
        let catalog: OfferCatalog

        init() {
            let (catalog, _) = OfferCatalog.parse(Data(GeneratedCatalog.offersJSON.utf8))
            var ids: [String: Int32] = [:]
            func add(_ s: String) { if ids[s] == nil { ids[s] = Int32(ids.count) } }
            for p in GeneratedCatalog.products {
                add(p.group)
                add(p.id)
            }
            for o in catalog.offers {
                add(o.subscriptionGroupId)
                add(o.productId)
                add(o.offerId)
                for t in o.territories { add(t) }
            }
            for (storefront, _) in CustomerSimulator.storefronts { add(storefront) }
            self.ids = ids
            self.catalog = catalog
            book = OfferBook(catalog: catalog, ids: { ids[$0] })
        }
    }

    static let rules = Rules()

    /// The customer's rows as the pipeline would hold them: their own (PURCHASED, Production,
    /// auto-renewable) rows, ordered by (purchaseDate, transactionId).
    static func transactions(_ rows: [GeneratedTransaction]) -> [Transaction] {
        let ids = rules.ids
        return rows.filter { $0.autoRenewable && !$0.familyShared && !$0.sandbox }.map { g in
            var t = Transaction(
                transactionId: TransactionKey(raw: Int64(g.transactionId)),
                originalTransactionId: TransactionKey(raw: Int64(g.originalTransactionId)),
                subscriptionGroupId: ids[g.groupId] ?? Transaction.none,
                productId: ids[g.productId] ?? Transaction.none,
                purchaseDate: g.purchaseDate, expiresDate: g.expiresDate)
            t.signedDate = g.signedDate
            t.revocationDate = g.revocationDate ?? Transaction.never
            t.offerType = Int64(g.offerType ?? 0)
            t.offerIdentifier = g.offerIdentifier.flatMap { ids[$0] } ?? Transaction.none
            t.isFreeTrial = g.offerDiscountType == "FREE_TRIAL"
            t.isUpgraded = g.isUpgraded
            t.storefront = ids[g.storefront] ?? Transaction.none
            return t
        }.sorted { ($0.purchaseDate, $0.transactionId.raw) < ($1.purchaseDate, $1.transactionId.raw) }
    }

    /// The offers winback finds `rows`' customer eligible for at `signedDate`, best first.
    static func eligible(_ rows: [GeneratedTransaction], renewal: RenewalInfo) -> [String] {
        let own = transactions(rows)
        guard let last = own.last else { return [] }
        var periods: [Period] = []
        guard
            let tl = CustomerTimeline.build(
                rows: own, asOf: renewal.signedDate, gapDays: gapDays, renewal: renewal, periods: &periods)
        else { return [] }
        var out: [String] = []
        rules.book.evaluate(group: last.subscriptionGroupId, tl, asOf: renewal.signedDate) { _, i, failed in
            if failed.isEmpty { out.append(rules.book.offers[i].offer.offerId) }
        }
        return out
    }

    /// The offers winback finds `rows`' customer eligible for at `t` with no renewal info, as
    /// the uplift report evaluates them at a month's first instant (docs/rules.md §9.2), best first.
    static func eligible(_ rows: [GeneratedTransaction], at t: Int64) -> [String] {
        let own = transactions(rows)
        guard let last = own.last else { return [] }
        var periods: [Period] = []
        guard let tl = CustomerTimeline.build(rows: own, asOf: t, gapDays: gapDays, renewal: nil, periods: &periods)
        else { return [] }
        var out: [String] = []
        rules.book.evaluate(group: last.subscriptionGroupId, tl, asOf: t) { _, i, failed in
            if failed.isEmpty { out.append(rules.book.offers[i].offer.offerId) }
        }
        return out
    }

    /// Apple's list for the customer: `eligible`, except for a few customers whose list drops
    /// its last id, gains an offer of their group it lacks, or gains an id the catalog lacks.
    static func apple(_ rows: [GeneratedTransaction], renewal: RenewalInfo, rng: inout SplitMix64) -> [String] {
        var ids = eligible(rows, renewal: renewal)
        let roll = rng.int(0...99)
        if roll < 4, !ids.isEmpty {
            ids.removeLast()
        } else if roll < 7, let group = rows.last?.groupId,
            let extra = rules.catalog.offers.first(where: {
                $0.subscriptionGroupId == group && !ids.contains($0.offerId)
            })
        {
            ids.append(extra.offerId)
        } else if roll < 9 {
            ids.append(retiredOfferId)
        }
        return ids
    }
}
