import WinBackModel
import WinBackSupport

/// The agreement of winback's eligibility with Apple's own `eligibleWinBackOfferIds`
/// (docs/rules.md §4.5): `apple-agreement.csv` and `apple-disagreements.csv`.
///
/// Every customer whose renewal info known at T carries Apple's list is evaluated again at S,
/// that renewal info's signedDate (``AppleComparison``). Pure, and counted in the reports' pass
/// (``Reports``): workers take contiguous pieces of the customers, each tallying into a tally of
/// its own; the tallies are sums and the disagreements are kept in customer order, piece after
/// piece, so the result is the same for any thread count.
public struct AppleAgreement: Sendable {
    package init(
        offers: [(offerId: String, counts: Counts)], unknownIds: [(id: String, customers: Int)], overall: Counts,
        topAgreement: Int, disagreements: [Disagreement]
    ) {
        self.offers = offers
        self.unknownIds = unknownIds
        self.overall = overall
        self.topAgreement = topAgreement
        self.disagreements = disagreements
    }

    /// Counts of one row of `apple-agreement.csv`.
    public struct Counts: Sendable, Equatable, Codable {
        public var compared = 0
        public var both = 0
        public var appleOnly = 0
        public var winbackOnly = 0

        public init(compared: Int = 0, both: Int = 0, appleOnly: Int = 0, winbackOnly: Int = 0) {
            self.compared = compared
            self.both = both
            self.appleOnly = appleOnly
            self.winbackOnly = winbackOnly
        }

        /// Compared, and neither set holds the offer: agreement that the customer is not eligible.
        public var neither: Int { compared - both - appleOnly - winbackOnly }

        package mutating func add(_ o: Counts) {
            compared += o.compared
            both += o.both
            appleOnly += o.appleOnly
            winbackOnly += o.winbackOnly
        }

        package static func + (a: Counts, b: Counts) -> Counts {
            var sum = a
            sum.add(b)
            return sum
        }
    }

    /// One row of `apple-disagreements.csv`.
    public struct Disagreement: Sendable, Equatable {
        public var subscriptionGroupId: String
        public var originalTransactionId: String
        /// The customer's appAccountToken at T (docs/rules.md §3 rule 6); "" when none.
        public var appAccountToken: String
        public var offerId: String
        /// Apple lists the offer; otherwise winback finds it eligible at S.
        public var apple: Bool
        /// S.
        public var signedDate: Int64
        /// winback's failing criteria at S; empty when winback says eligible.
        public var reasons: Reasons
    }

    /// Per catalog offer, in catalog order: counts over the customers of the offer's group.
    public var offers: [(offerId: String, counts: Counts)]
    /// Ids Apple listed that the catalog lacks, bytewise, with how many customers had them listed.
    public var unknownIds: [(id: String, customers: Int)]
    /// The `*` row: counts over customers rather than (customer, offer) pairs.
    public var overall: Counts
    /// Customers with both lists non-empty whose first listed id is winback's rank-1 offer.
    public var topAgreement: Int
    /// Sorted by (group, originalTransactionId), then catalog order, unknown ids last.
    public var disagreements: [Disagreement]

    /// What one piece of the customers adds up to.
    struct Tally {
        var offers: [Counts]
        var unknown: [String: Int] = [:]
        var overall = Counts()
        var top = 0
        var disagreements: [Disagreement] = []

        /// Adds the tally of the customers after this one's.
        mutating func add(_ o: Tally) {
            for i in offers.indices { offers[i].add(o.offers[i]) }
            for (id, c) in o.unknown { unknown[id, default: 0] += c }
            overall.add(o.overall)
            top += o.top
            disagreements += o.disagreements
        }
    }

    /// Compares customer `k`, whose rows are `rows` and whose renewal info known at T carries
    /// Apple's list (``CustomerResult/appleAnswered``), into `tally`; `periods` is scratch.
    static func count(
        _ tally: inout Tally, customer k: Int, rows: [Transaction], of customers: CustomerRows,
        _ result: CustomerResult,
        renewal: RenewalInfo, book: OfferBook, gapDays: Int64, periods: inout [Period]
    ) {
        let group = customers.groups[k]
        guard
            let c = AppleComparison.compare(
                rows: rows, group: group, renewal: renewal, book: book, gapDays: gapDays,
                periods: &periods)
        else { return }
        tally.overall.compared += 1
        if c.agrees { tally.overall.both += 1 }
        if c.appleOnly { tally.overall.appleOnly += 1 }
        if c.winbackOnly { tally.overall.winbackOnly += 1 }
        if c.topAgrees(book) { tally.top += 1 }
        book.withRanked(group) { ranked in
            for o in ranked {
                let a = c.appleOffers.contains(o)
                let w = c.winback.contains(o)
                tally.offers[o].compared += 1
                if a && w { tally.offers[o].both += 1 }
                if a && !w { tally.offers[o].appleOnly += 1 }
                if w && !a { tally.offers[o].winbackOnly += 1 }
            }
        }
        for id in c.unknownIds { tally.unknown[id, default: 0] += 1 }
        guard !c.disagreements.isEmpty else { return }
        let s = customers.strings
        let groupId = s.string(group)
        let original = s.string(customers.originalTransactionIds[k])
        let token = result.timeline.appAccountToken.string(in: s) ?? ""
        for d in c.disagreements {
            tally.disagreements.append(
                Disagreement(
                    subscriptionGroupId: groupId, originalTransactionId: original, appAccountToken: token,
                    offerId: d.offerId, apple: d.apple, signedDate: c.signedDate, reasons: d.reasons))
        }
    }

    /// The agreement of every customer counted into `total` (the tallies of every piece, added
    /// in customer order).
    init(_ total: Tally, book: OfferBook) {
        self.init(
            offers: zip(book.offers, total.offers).map { ($0.offer.offerId, $1) },
            unknownIds: AppleAgreement.sorted(unknownIds: total.unknown.map { (id: $0.key, customers: $0.value) }),
            overall: total.overall, topAgreement: total.top, disagreements: total.disagreements)
    }

    /// Ids not in the catalog in report order: bytewise (docs/rules.md §4.5).
    package static func sorted(unknownIds: [(id: String, customers: Int)]) -> [(id: String, customers: Int)] {
        unknownIds.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
    }

    /// The overall agreement rate: customers whose two sets are equal, of those compared.
    public var agreementRate: String { Rate.format(overall.both, overall.compared) }

    /// Catalog offers, in catalog order, that Apple lists for none of their group's customers
    /// although some renewal info carries its list (docs/rules.md §4.3): a wrong offer id, or an
    /// offer not live in App Store Connect. Empty when no renewal info carries the list.
    public var neverListed: [String] {
        guard overall.compared > 0 else { return [] }
        return offers.filter { $0.counts.both + $0.counts.appleOnly == 0 }.map(\.offerId)
    }
}

/// Writes ``AppleAgreement`` as the two CSV files of docs/rules.md §4.5.
public enum AppleAgreementReport {
    public static let columns = [
        "offer_id", "compared", "both", "apple_only", "winback_only", "agreement_rate", "top_agreement",
    ]
    public static let disagreementColumns = [
        "subscription_group_id", "original_transaction_id", "app_account_token", "offer_id", "apple", "winback",
        "renewal_signed_date", "reasons",
    ]

    /// One row of `apple-agreement.csv`; nil cells are empty.
    struct Row {
        var offerId: String
        var compared: Int?
        var both: Int?
        var appleOnly: Int?
        var winbackOnly: Int?
        var rate: String
        var top: Int?
    }

    /// The rows of `apple-agreement.csv`: catalog offers, ids not in the catalog, then `*`.
    static func rows(_ a: AppleAgreement) -> [Row] {
        var rows = a.offers.map { id, c in
            Row(
                offerId: id, compared: c.compared, both: c.both, appleOnly: c.appleOnly, winbackOnly: c.winbackOnly,
                rate: Rate.format(c.compared - c.appleOnly - c.winbackOnly, c.compared), top: nil)
        }
        rows += a.unknownIds.map {
            Row(offerId: $0.id, compared: nil, both: nil, appleOnly: $0.customers, winbackOnly: nil, rate: "", top: nil)
        }
        let o = a.overall
        rows.append(
            Row(
                offerId: "*", compared: o.compared, both: o.both, appleOnly: o.appleOnly, winbackOnly: o.winbackOnly,
                rate: a.agreementRate, top: a.topAgreement))
        return rows
    }

    public static func csv(_ a: AppleAgreement) -> [UInt8] {
        CSVRecord.table(columns, rows(a)) { r, row in
            r.field(row.offerId)
            for v in [row.compared, row.both, row.appleOnly, row.winbackOnly] {
                if let v { r.field(v) } else { r.empty() }
            }
            r.field(row.rate)
            if let top = row.top { r.field(top) } else { r.empty() }
        }
    }

    public static func disagreementsCSV(_ a: AppleAgreement) -> [UInt8] {
        CSVRecord.table(disagreementColumns, a.disagreements) { r, d in
            r.field(d.subscriptionGroupId)
            r.field(d.originalTransactionId)
            r.field(d.appAccountToken)
            r.field(d.offerId)
            r.field(d.apple ? "eligible" : "not")
            r.field(d.apple ? "not" : "eligible")
            r.field(timestamp: d.signedDate)
            r.field(d.reasons.labels.joined(separator: ";"))
        }
    }

    /// The number of rows of `apple-agreement.csv`.
    package static func rowCount(_ a: AppleAgreement) -> Int { a.offers.count + a.unknownIds.count + 1 }
}
