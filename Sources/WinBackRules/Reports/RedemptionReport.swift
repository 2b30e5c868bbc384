import WinBackModel

/// `redemptions-by-offer-type.csv` (docs/rules.md §4.3): redemptions, customers, conversions and
/// pending episodes per (offer type, offer id, discount type) inside the report window.
public struct RedemptionRow: Sendable, Hashable, Codable {
    /// `introductory`, `promotional`, `offer_code`, `win_back` or `unknown:N`.
    public var offerType: String
    /// Empty for introductory offers.
    public var offerId: String
    /// The raw offerDiscountType of the episode's first row; may be empty.
    public var discountType: String
    public var redemptions: Int
    /// Distinct customers with a redemption under this key.
    public var customers: Int
    public var converted: Int
    public var pending: Int

    public init(
        offerType: String, offerId: String, discountType: String, redemptions: Int = 0, customers: Int = 0,
        converted: Int = 0, pending: Int = 0
    ) {
        self.offerType = offerType
        self.offerId = offerId
        self.discountType = discountType
        self.redemptions = redemptions
        self.customers = customers
        self.converted = converted
        self.pending = pending
    }

    /// converted / (redemptions − pending): pending episodes have not had their chance yet.
    public var conversionRate: String { Rate.format(converted, redemptions - pending) }
}

extension RedemptionRow: CountedRow {
    package static let counts = [\RedemptionRow.redemptions, \.customers, \.converted, \.pending]
}

/// Builds and prints the redemptions report.
public enum RedemptionReport {
    public static let columns = [
        "offer_type", "offer_id", "discount_type", "redemptions", "customers", "converted", "pending",
        "conversion_rate",
    ]

    /// A report key in interned ids; intro offers carry no offer id (`Transaction.none`).
    struct Key: Hashable {
        var offerType: Int64
        var offerId: Int32
        var discountType: Int32

        /// `emptyId` is the id of "" if interned: an empty discount type reads as an absent one.
        init(_ e: Episode, emptyId: Int32) {
            offerType = e.offerType
            offerId = e.offerType == OfferType.introductory.rawValue ? Transaction.none : e.offerIdentifier
            discountType = e.discountType == emptyId ? Transaction.none : e.discountType
        }
    }

    /// Counts one customer's episodes whose redemption falls in the window into `tally`, whose
    /// rows are named by ``rows(_:strings:)``. `seen` is scratch for the keys this customer was
    /// already counted under.
    static func count(
        _ episodes: [Episode], window: ReportWindow, emptyId: Int32, into tally: inout [Key: RedemptionRow],
        seen: inout [Key]
    ) {
        seen.removeAll(keepingCapacity: true)
        for e in episodes where e.start >= window.start && e.start < window.asOf {
            let key = Key(e, emptyId: emptyId)
            let newCustomer = !seen.contains(key)
            if newCustomer { seen.append(key) }
            // Changed in place: one lookup of the key.
            add(
                e, newCustomer: newCustomer,
                to: &tally[key, default: RedemptionRow(offerType: "", offerId: "", discountType: "")])
        }
    }

    @inline(__always)
    private static func add(_ e: Episode, newCustomer: Bool, to row: inout RedemptionRow) {
        row.redemptions += 1
        if e.outcome == .converted { row.converted += 1 }
        if e.outcome == .pending { row.pending += 1 }
        if newCustomer { row.customers += 1 }
    }

    /// The report rows in the order of docs/rules.md §4.3: offer type (introductory, promotional, offer_code,
    /// win_back, then unknown:… bytewise), offer id, discount type (bytewise).
    static func rows(_ tally: [Key: RedemptionRow], strings: StringTable) -> [RedemptionRow] {
        func text(_ id: Int32) -> String { id >= 0 ? strings.string(id) : "" }
        return sorted(
            tally.named { key, row in
                row.offerType = OfferType.label(key.offerType, strings: strings)
                row.offerId = text(key.offerId)
                row.discountType = text(key.discountType)
            })
    }

    /// Rows in report order: offer types introductory, promotional, offer_code, win_back, then
    /// unknown ones; then bytewise by type label, offer id and discount type.
    package static func sorted(_ rows: [RedemptionRow]) -> [RedemptionRow] {
        let known = Dictionary(
            uniqueKeysWithValues: OfferType.allCases.map { (OfferType.label($0.rawValue), Int($0.rawValue)) })
        let rows = rows.map { (rank: known[$0.offerType] ?? 5, row: $0) }
        return rows.sorted { a, b in
            if a.rank != b.rank { return a.rank < b.rank }
            for (x, y) in [
                (a.row.offerType, b.row.offerType), (a.row.offerId, b.row.offerId),
                (a.row.discountType, b.row.discountType),
            ] where x != y {
                return bytewiseLess(x, y)
            }
            return false
        }.map(\.row)
    }

    public static func csv(_ rows: [RedemptionRow]) -> [UInt8] {
        CSVRecord.table(columns, rows) { r, row in
            r.fields(
                row.offerType, row.offerId, row.discountType, row.redemptions, row.customers, row.converted,
                row.pending, row.conversionRate)
        }
    }
}

/// Bytewise order of two strings' UTF-8 (docs/rules.md §3: ids compare bytewise).
@inline(__always)
func bytewiseLess(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}
