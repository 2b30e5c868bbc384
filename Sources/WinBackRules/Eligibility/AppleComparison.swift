import WinBackModel

/// Apple's word on one offer of a segment row: the `apple_eligible` column (docs/rules.md §4.5).
public enum AppleEligible: UInt8, Sendable {
    /// The renewal info known at T carries no `eligibleWinBackOfferIds`: Apple said nothing.
    case silent
    /// Apple's list names the offer.
    case yes
    /// Apple's list (possibly empty) does not name the offer.
    case no

    /// The value written in the segments: `yes`, `no` or empty.
    public var label: String {
        switch self {
        case .silent: return ""
        case .yes: return "yes"
        case .no: return "no"
        }
    }
}

/// Which segment rows the pipeline key `audience.requireApple` keeps (docs/rules.md §4.5).
public enum AppleRequirement: String, Sendable, CaseIterable {
    /// `false`: every row, whatever Apple says.
    case off = "false"
    /// `true`: rows Apple lists, and rows Apple said nothing about (no list to check against).
    case notDenied = "true"
    /// `strict`: only rows Apple lists.
    case listed = "strict"

    @inline(__always)
    public func keeps(_ a: AppleEligible) -> Bool {
        switch self {
        case .off: return true
        case .notDenied: return a != .no
        case .listed: return a == .yes
        }
    }
}

/// One customer's comparison with Apple (docs/rules.md §4.5): the customer evaluated at S, the
/// signedDate of the renewal info that carries Apple's `eligibleWinBackOfferIds`, with the rows
/// and renewal info known at S, beside the ids Apple listed.
///
/// Pure: built by ``compare(rows:group:renewal:book:gapDays:periods:)`` from values, used by the
/// agreement reports and by `explain`, so that the two always agree.
public struct AppleComparison: Sendable {
    /// An offer in one set and not the other.
    public struct Disagreement: Sendable, Equatable {
        /// The catalog index, or nil for an id Apple listed that the catalog lacks.
        public var offer: Int?
        /// The id as listed (for a catalog offer, its offerId).
        public var offerId: String
        /// Whether Apple lists it; otherwise winback says eligible.
        public var apple: Bool
        /// The criteria winback finds failed at S (docs/rules.md §3 rule 10); empty when winback
        /// says eligible, and for an id not in the catalog.
        public var reasons: Reasons
    }

    /// S.
    public var signedDate: Int64
    /// The customer at S; nil when they had no access period then (not a subscriber).
    public var timeline: CustomerTimeline?
    /// Apple's list as given, best first.
    public var appleIds: [String]
    /// Catalog indices of the offers eligible at S, rank 1 first.
    public var winback: [Int]
    /// Catalog indices Apple lists, in catalog order (each once).
    public var appleOffers: [Int]
    /// Ids Apple lists that the catalog lacks, bytewise, each once.
    public var unknownIds: [String]
    /// Every offer in one set only: catalog offers in catalog order, then unknown ids bytewise.
    public var disagreements: [Disagreement]

    /// The two sets are equal (both empty included).
    public var agrees: Bool { disagreements.isEmpty }
    /// Apple lists some offer winback does not find eligible at S.
    public var appleOnly: Bool { disagreements.contains { $0.apple } }
    /// winback finds some offer eligible at S that Apple does not list.
    public var winbackOnly: Bool { disagreements.contains { !$0.apple } }
    /// Both lists are non-empty and Apple's first id is winback's rank-1 offer.
    public func topAgrees(_ book: OfferBook) -> Bool {
        guard let first = appleIds.first, let best = winback.first else { return false }
        return book.offers[best].offer.offerId == first
    }

    /// Compares one customer's evaluation at S with Apple's list.
    ///
    /// - Parameters:
    ///   - rows: the customer's rows, ordered as for ``CustomerTimeline/build(rows:asOf:gapDays:renewal:periods:)``.
    ///   - group: the customer's subscription group.
    ///   - renewal: the renewal info known at T, which carries the list; it is also the renewal
    ///     info known at S, its own signedDate (the newest signed at or before T is the newest
    ///     signed at or before S).
    ///   - periods: scratch storage, left holding the customer's periods at S.
    /// - Returns: nil when the renewal info carries no list, or no signedDate to evaluate at.
    public static func compare<C: RandomAccessCollection>(
        rows: C, group: Int32, renewal: RenewalInfo, book: OfferBook, gapDays: Int64, periods: inout [Period]
    ) -> AppleComparison? where C.Element == Transaction, C.Index == Int {
        guard let listed = renewal.eligibleWinBackOfferIds, renewal.signedDate != Transaction.unsigned else {
            return nil
        }
        let s = renewal.signedDate
        let tl = CustomerTimeline.build(rows: rows, asOf: s, gapDays: gapDays, renewal: renewal, periods: &periods)
        var winback: [Int] = []
        // The reasons of the group's offers at S, by catalog index, for the disagreements.
        var failed: [(offer: Int, reasons: Reasons)] = []
        if let tl {
            book.evaluate(group: group, tl, asOf: s) { _, i, reasons in
                if reasons.isEmpty { winback.append(i) } else { failed.append((i, reasons)) }
            }
        }
        var appleOffers: [Int] = []
        var unknown: [String] = []
        for id in listed {
            if let i = book.index(of: id) {
                if !appleOffers.contains(i) { appleOffers.append(i) }
            } else if !unknown.contains(id) {
                unknown.append(id)
            }
        }
        appleOffers.sort()
        unknown.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }

        var disagreements: [Disagreement] = []
        // Catalog offers in catalog order: those of one set only.
        for i in Set(appleOffers).symmetricDifference(winback).sorted() {
            let apple = appleOffers.contains(i)
            var reasons: Reasons = []
            if apple {
                if let tl {
                    if let f = failed.first(where: { $0.offer == i }) {
                        reasons = f.reasons
                    } else {
                        // An offer of another group: it fails the product criterion, and whatever else.
                        reasons = book.offers[i].failures(tl, asOf: s).union(.otherProduct)
                    }
                } else {
                    reasons = .notSubscriber
                }
            }
            disagreements.append(
                Disagreement(offer: i, offerId: book.offers[i].offer.offerId, apple: apple, reasons: reasons))
        }
        for id in unknown {
            disagreements.append(Disagreement(offer: nil, offerId: id, apple: true, reasons: []))
        }
        return AppleComparison(
            signedDate: s, timeline: tl, appleIds: listed, winback: winback, appleOffers: appleOffers,
            unknownIds: unknown, disagreements: disagreements)
    }
}

extension OfferBook {
    /// The catalog index of the offer with this offerId.
    func index(of offerId: String) -> Int? {
        indexByOfferId[offerId]
    }
}
