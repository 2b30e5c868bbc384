import Foundation
import WinBackModel
import WinBackRules
import WinBackSupport

/// The kind of a segment file, for its changes (docs/rules.md §10.5).
package enum SegmentKind: Equatable, Sendable {
    /// One catalog offer's segment (its catalog index).
    case offer(Int)
    /// `best-offer`: each customer once, with their rank-1 offer.
    case best
    /// `holdout`: the rows best-offer would hold for the held-out customers (§9.1).
    case holdout

    /// Whether rows of the segment may change their offer (`changed`).
    package var offerMayChange: Bool { self == .best || self == .holdout }
}

/// Why a customer left a segment (docs/rules.md §10.5), the first that applies in this order:
/// `returned`, `redeemed`, `held_out`, `unknown_customer`, then the first criterion of §3 the
/// customer fails tonight for the segment's offer (the baseline's offer for best-offer and
/// holdout), in §3 rule 10's order. Past those, what else leaves a customer out of a segment:
/// `offer_not_in_catalog` (the baseline's offer is no longer in the catalog), `not_held_out`
/// (left the holdout, eligible and no longer held out) and `dropped_by_require_apple` (eligible,
/// but left out by `audience.requireApple`, §4.5).
package enum ExitReason {
    package static let returned = "returned"
    package static let redeemed = "redeemed"
    package static let heldOut = "held_out"
    package static let unknownCustomer = "unknown_customer"
    package static let offerNotInCatalog = "offer_not_in_catalog"
    package static let notHeldOut = "not_held_out"
    package static let droppedByRequireApple = "dropped_by_require_apple"
}

/// The reasons of the customers who left a segment, from tonight's evaluation of the run's
/// customers (a run in memory, or one shard's customers): the rules of §3 as the evaluate stage
/// applies them (``CompiledOffer/failures(_:asOf:)``), never again by hand.
package struct ExitReasoner: Sendable {
    package let customers: CustomerRows
    package let audience: Audience
    package let book: OfferBook
    package let requireApple: AppleRequirement
    /// The baseline's as-of instant: a win-back redemption on or after it is new since then.
    package let baselineAsOf: Int64

    package init(
        customers: CustomerRows, audience: Audience, book: OfferBook, requireApple: AppleRequirement,
        baselineAsOf: Int64
    ) {
        self.customers = customers
        self.audience = audience
        self.book = book
        self.requireApple = requireApple
        self.baselineAsOf = baselineAsOf
    }

    /// The customer (group, originalTransactionId) in tonight's inputs, found by bisection in
    /// the customers' order (bytewise by group, then id: that of the segment files).
    package func customer(group: [UInt8], original: [UInt8]) -> Int? {
        let s = customers.strings
        var lo = 0
        var hi = customers.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let c = s.withBytes(customers.groups[mid]) { g in
                customers.originalTransactionIds[mid].withBytes(in: s) { o in
                    let byGroup = Bytes.compare(g, group)
                    return byGroup != 0 ? byGroup : Bytes.compare(o, original)
                }
            }
            if c == 0 { return mid }
            if c < 0 { lo = mid + 1 } else { hi = mid }
        }
        return nil
    }

    /// Customer k's result (a subscriber's), found by bisection: results are in customer order.
    package func result(of k: Int) -> Int? {
        var lo = 0
        var hi = audience.results.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let c = Int(audience.results[mid].customer)
            if c == k { return mid }
            if c < k { lo = mid + 1 } else { hi = mid }
        }
        return nil
    }

    /// Whether the customer of result `ri` is in segment `kind` tonight, as ``SegmentWriter``
    /// lists them.
    package func isMember(_ kind: SegmentKind, result ri: Int) -> Bool {
        let r = audience.results[ri]
        let leftOut = audience.isLeftOut(r)
        switch kind {
        case .offer(let o):
            guard !leftOut, let j = r.eligible.firstIndex(of: Int16(o)) else { return false }
            return requireApple.keeps(r.apple(rank: j + 1))
        case .best:
            return !leftOut && !r.eligible.isEmpty && requireApple.keeps(r.apple(rank: 1))
        case .holdout:
            return leftOut && !r.eligible.isEmpty && requireApple.keeps(r.apple(rank: 1))
        }
    }

    /// The reason of a baseline row of segment `kind` (customer `group`/`original`, offer
    /// `offer`) when the customer is not in the segment tonight; nil when they are.
    package func reasonIfExited(_ kind: SegmentKind, group: [UInt8], original: [UInt8], offer: [UInt8]) -> String? {
        if let k = customer(group: group, original: original), let ri = result(of: k), isMember(kind, result: ri) {
            return nil
        }
        return reason(kind, group: group, original: original, offer: offer)
    }

    /// The reason a customer left segment `kind`, whose baseline row named `offer`
    /// (docs/rules.md §10.5).
    package func reason(_ kind: SegmentKind, group: [UInt8], original: [UInt8], offer: [UInt8]) -> String {
        guard let k = customer(group: group, original: original) else { return ExitReason.unknownCustomer }
        let r = result(of: k).map { audience.results[$0] }
        if let r, r.timeline.state != .churned { return ExitReason.returned }
        let offerId = String(decoding: offer, as: UTF8.self)
        if redeemed(k, offerId: offerId) { return ExitReason.redeemed }
        if let r, kind != .holdout, audience.isLeftOut(r) { return ExitReason.heldOut }
        guard let o = book.offers.firstIndex(where: { $0.offer.offerId == offerId }) else {
            return ExitReason.offerNotInCatalog
        }
        guard let r else { return "not_subscriber" }
        var failed = book.offers[o].failures(r.timeline, asOf: audience.asOf)
        if book.offers[o].subscriptionGroupId != customers.groups[k] { failed.insert(.otherProduct) }
        if let first = failed.labels.first { return first }
        if kind == .holdout && !audience.isLeftOut(r) { return ExitReason.notHeldOut }
        return ExitReason.droppedByRequireApple
    }

    /// Whether customer k has a win-back row of `offerId` (offerType 4, docs/rules.md §3 rule 7)
    /// purchased on or after the baseline's as-of and before tonight's.
    /// Asked of the evaluation's ``LatestWinBacks``: the rows may be gone by now.
    package func redeemed(_ k: Int, offerId: String) -> Bool {
        guard let id = customers.strings.lookup(offerId),
            let latest = audience.winBacks.latest(customer: k, offer: id)
        else { return false }
        return latest >= baselineAsOf
    }
}
