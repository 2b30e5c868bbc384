import WinBackModel

/// An offer with its strings resolved to the ids of one run's string table, so that
/// evaluating it is integer comparisons only.
public struct CompiledOffer: Sendable {
    /// Id that no string has: an offer whose group or product no row mentions matches nobody.
    public static let missing: Int32 = -2

    /// Position in the catalog.
    public var index: Int
    public var subscriptionGroupId: Int32
    public var productId: Int32
    /// The offer id as an `offerIdentifier` in transactions (for the wait between offers).
    public var offerIdentifier: Int32
    /// Storefront ids allowed; nil = every territory.
    public var territories: [Int32]?
    public var offer: Offer

    public init(index: Int, offer: Offer, ids: (String) -> Int32?) {
        self.index = index
        self.offer = offer
        subscriptionGroupId = ids(offer.subscriptionGroupId) ?? CompiledOffer.missing
        productId = ids(offer.productId) ?? CompiledOffer.missing
        offerIdentifier = ids(offer.offerId) ?? CompiledOffer.missing
        territories = offer.territories.isEmpty ? nil : offer.territories.map { ids($0) ?? CompiledOffer.missing }
    }

    /// Every criterion of docs/rules.md §3 rule 8 that `c` fails for this offer at `t`; empty = eligible.
    /// The caller has checked that the customer belongs to the offer's group.
    @inline(__always)
    public func failures(_ c: CustomerTimeline, asOf t: Int64) -> Reasons {
        var r: Reasons = []
        switch c.state {
        case .active: r.insert(.active)
        case .billingRetry: r.insert(.billingRetry)
        case .churned: break
        }
        if c.productId != productId { r.insert(.otherProduct) }
        if !offer.isLive(onDay: MonthMath.dayNumber(t)) { r.insert(.offerNotLive) }
        if let allowed = territories, !allowed.contains(c.storefront) {
            r.insert(.territory)
        }
        if c.paidMonths < Int64(offer.paidMonths) { r.insert(.paidDuration) }
        if c.monthsSinceLastSubscribed < Int64(offer.minMonthsSince) { r.insert(.tooRecent) }
        if c.monthsSinceLastSubscribed > Int64(offer.maxMonthsSince) { r.insert(.tooLongAgo) }
        if let wait = offer.waitMonths, let end = c.lastRedemptionEnd(of: offerIdentifier),
            MonthMath.wholeMonths(end, t) < Int64(wait)
        {
            r.insert(.waitBetweenOffers)
        }
        return r
    }
}

/// The offers of a catalog, compiled for one run, with each group's offers in rank order.
public struct OfferBook: Sendable {
    public var offers: [CompiledOffer]
    /// Catalog index by offerId (the first, should a hand-made catalog repeat one), for the ids
    /// Apple lists (docs/rules.md §4.5).
    var indexByOfferId: [String: Int] = [:]
    /// Each group's offers ranked, laid out for the evaluations of every customer at every
    /// instant: each group with where its offers lie in one list. A run has a handful of
    /// groups, so a scan finds one for less than hashing the id, and nothing is copied on the
    /// way (``withRanked(_:_:)``).
    private var groupRanges: [(group: Int32, start: Int, end: Int)] = []
    private var rankedList: [Int] = []

    /// Offer indices per subscription group id, ranked: HIGH priority first, then catalog order.
    /// Made on each call, for the edges (`explain`, tests); evaluation reads ``withRanked(_:_:)``.
    public var rankedByGroup: [Int32: [Int]] {
        Dictionary(uniqueKeysWithValues: groupRanges.map { ($0.group, Array(rankedList[$0.start..<$0.end])) })
    }

    public init(catalog: OfferCatalog, ids: (String) -> Int32?) {
        let offers = catalog.offers.enumerated().map { CompiledOffer(index: $0.offset, offer: $0.element, ids: ids) }
        self.offers = offers
        for o in offers where indexByOfferId[o.offer.offerId] == nil { indexByOfferId[o.offer.offerId] = o.index }
        var byGroup: [Int32: [Int]] = [:]
        for o in offers where o.subscriptionGroupId != CompiledOffer.missing {
            byGroup[o.subscriptionGroupId, default: []].append(o.index)
        }
        for (g, list) in byGroup {
            byGroup[g] = list.sorted { a, b in
                let pa = offers[a].offer.priority == .high ? 0 : 1
                let pb = offers[b].offer.priority == .high ? 0 : 1
                return pa != pb ? pa < pb : a < b
            }
        }
        for (g, list) in byGroup.sorted(by: { $0.key < $1.key }) {
            groupRanges.append((g, rankedList.count, rankedList.count + list.count))
            rankedList += list
        }
    }

    /// Calls `body` with `group`'s ranked offers (catalog indices, as in ``rankedByGroup``), in
    /// place; none for a group without offers.
    @inline(__always)
    public func withRanked<R>(_ group: Int32, _ body: (UnsafeBufferPointer<Int>) -> R) -> R {
        rankedList.withUnsafeBufferPointer { list in
            for r in groupRanges where r.group == group {
                return body(UnsafeBufferPointer(rebasing: list[r.start..<r.end]))
            }
            return body(UnsafeBufferPointer(start: nil, count: 0))
        }
    }

    /// Evaluates `c`, a customer of `group`, against each of the group's offers in rank order
    /// (docs/rules.md §3 rules 8–9), calling `visit(j, offer, failed)` with the offer's place j in
    /// the ranking, its catalog index and the criteria failed (empty = eligible). Offers whose bit
    /// is set in `skipping` (bit j for the j-th ranked offer, the first 64) are passed over.
    @inline(__always)
    public func evaluate(
        group: Int32, _ c: CustomerTimeline, asOf t: Int64, skipping: UInt64 = 0,
        _ visit: (_ place: Int, _ offer: Int, _ failed: Reasons) -> Void
    ) {
        // The offers are read where they are: a copy of one would take a reference to each of
        // its strings, on every evaluation, from every thread.
        offers.withUnsafeBufferPointer { offers in
            withRanked(group) { ranked in
                for (j, i) in ranked.enumerated() where j >= 64 || skipping & (1 << UInt64(j)) == 0 {
                    visit(j, i, offers[i].failures(c, asOf: t))
                }
            }
        }
    }
}
