import WinBackModel

/// One line of `winback-eligibility-summary.csv`: churned customers counted in the shape of
/// Apple's *Win-back eligibility report*, so a team can reconcile with App Store Connect.
/// See https://developer.apple.com/help/app-store-connect/reference/win-back-eligibility-report
public struct EligibilitySummaryRow: Sendable, Hashable, Codable {
    public var subscriptionGroupId: String
    /// The customer's product (docs/rules.md §3 rule 6).
    public var productId: String
    /// Paid months of the most recent run (Apple may count tenure differently).
    public var paidTenure: Int64
    public var monthsSinceLastSubscribed: Int64
    /// Any win-back (offerType 4) row among the customer's PURCHASED rows known at T.
    public var hasRedeemedWinBack: Bool
    /// Whole months from the latest expiresDate of a win-back row to T; nil without one.
    public var monthsSinceLastWinBack: Int64?
    /// ISO 3166-1 alpha-2; empty when the storefront is absent or not in the table.
    public var territory: String
    public var churned: Int

    public init(
        subscriptionGroupId: String, productId: String, paidTenure: Int64, monthsSinceLastSubscribed: Int64,
        hasRedeemedWinBack: Bool, monthsSinceLastWinBack: Int64?, territory: String, churned: Int
    ) {
        self.subscriptionGroupId = subscriptionGroupId
        self.productId = productId
        self.paidTenure = paidTenure
        self.monthsSinceLastSubscribed = monthsSinceLastSubscribed
        self.hasRedeemedWinBack = hasRedeemedWinBack
        self.monthsSinceLastWinBack = monthsSinceLastWinBack
        self.territory = territory
        self.churned = churned
    }
}

extension EligibilitySummaryRow: CountedRow {
    package static let counts = [\EligibilitySummaryRow.churned]
}

/// Builds and prints the Apple-shaped eligibility summary.
public enum EligibilitySummaryReport {
    public static let columns = [
        "Subscription Group ID", "Product ID", "Paid Subscription Tenure", "Time Since Last Subscribed",
        "Has Previously Redeemed Win-Back Offer", "Time Since Last Win-Back Offer", "Territory",
        "Churned Subscription Count",
    ]

    /// A summary key in interned ids.
    struct Key: Hashable, ColumnValue {
        var group: Int32
        var product: Int32
        var paidMonths: Int64
        var monthsSince: Int64
        var monthsSinceWinBack: Int64?
        var storefront: Int32

        /// The fields folded into one word.
        @inline(__always)
        var columnHash: UInt64 {
            @inline(__always) func mix(_ h: UInt64, _ v: UInt64) -> UInt64 { (h ^ v) &* 0x9E37_79B9_7F4A_7C15 }
            var h = UInt64(UInt32(bitPattern: group)) | UInt64(UInt32(bitPattern: product)) << 32
            h = mix(h, UInt64(bitPattern: paidMonths))
            h = mix(h, UInt64(bitPattern: monthsSince))
            h = mix(h, monthsSinceWinBack.map { UInt64(bitPattern: $0) } ?? 0xFFFF_0000_FFFF_0000)
            h = mix(h, UInt64(UInt32(bitPattern: storefront)))
            return h
        }

        func hash(into hasher: inout Hasher) { hasher.combine(columnHash) }
    }

    /// Churned customers per key: the keys numbered in a ``ColumnTable`` (found by their folded
    /// word, not through the standard library's seeded hasher: a key is looked up for every
    /// churned customer), their counts beside.
    struct Tally {
        private var keys = ColumnTable<Key>()
        private var counts: [Int] = []

        /// Adds `n` customers of `key`.
        @inline(__always)
        mutating func add(_ key: Key, _ n: Int = 1) {
            let i = Int(keys.intern(key))
            if i == counts.count { counts.append(n) } else { counts[i] += n }
        }

        /// Adds another tally's counts.
        mutating func add(_ other: Tally) {
            for (k, n) in zip(other.keys.values, other.counts) { add(k, n) }
        }

        /// Each key and its count, in the order the keys were first counted.
        var pairs: [(key: Key, value: Int)] { zip(keys.values, counts).map { (key: $0, value: $1) } }
    }

    /// Counts a churned customer; `lastWinBackEnd` is the latest expiresDate of their PURCHASED
    /// win-back rows known at T, nil without one.
    static func count(
        group: Int32, _ tl: CustomerTimeline, lastWinBackEnd: Int64?, asOf t: Int64, into tally: inout Tally
    ) {
        guard tl.state == .churned else { return }
        let key = Key(
            group: group, product: tl.productId, paidMonths: tl.paidMonths, monthsSince: tl.monthsSinceLastSubscribed,
            monthsSinceWinBack: lastWinBackEnd.map { MonthMath.wholeMonths($0, t) }, storefront: tl.storefront)
        tally.add(key)
    }

    /// The latest expiresDate of the customer's PURCHASED win-back rows known at `t`, if any.
    static func lastWinBackEnd<C: Collection>(_ rows: C, asOf t: Int64) -> Int64? where C.Element == Transaction {
        var last: Int64?
        for r in rows where r.isKnownPurchase(at: t) && r.offerType == OfferType.winBack.rawValue {
            last = max(last ?? r.expiresDate, r.expiresDate)
        }
        return last
    }

    /// Rows sorted by the key columns: text bytewise, numbers as numbers, empty first.
    static func rows(_ tally: Tally, strings: StringTable) -> [EligibilitySummaryRow] {
        rows(tally.pairs, strings: strings)
    }

    /// The same, of keys and their counts in any order (each key once).
    static func rows<Counts: Collection>(_ tally: Counts, strings: StringTable) -> [EligibilitySummaryRow]
    where Counts.Element == (key: Key, value: Int) {
        // Keys that differ only in storefronts of one territory (or missing from the ISO
        // table) meet here: in the merged keys, `storefront` holds the number of the
        // storefront's territory, looked up once per storefront.
        var territories: [String] = []
        var territoryNumber: [String: Int32] = [:]
        var territoryOf: [Int32: Int32] = [:]
        var merged: [Key: Int] = [:]
        merged.reserveCapacity(tally.count)
        for (k, n) in tally {
            let t: Int32
            if let known = territoryOf[k.storefront] {
                t = known
            } else {
                let name = k.storefront >= 0 ? ISO3166.alpha2(strings.string(k.storefront)) ?? "" : ""
                if let known = territoryNumber[name] {
                    t = known
                } else {
                    t = Int32(territories.count)
                    territories.append(name)
                    territoryNumber[name] = t
                }
                territoryOf[k.storefront] = t
            }
            var m = k
            m.storefront = t
            merged[m, default: 0] += n
        }
        // The order of ``less(_:_:)`` on the merged keys, whose few distinct groups, products
        // and territories are ranked once by their text (an id stands for one string).
        let entries = Array(merged)
        func ranks(_ ids: Set<Int32>) -> [Int32: Int32] {
            let ordered = ids.sorted { bytewiseLess(strings.string($0), strings.string($1)) }
            return Dictionary(uniqueKeysWithValues: ordered.enumerated().map { ($1, Int32($0)) })
        }
        let groupRank = ranks(Set(entries.map(\.key.group)))
        let productRank = ranks(Set(entries.map(\.key.product)))
        var territoryRank = [Int32](repeating: 0, count: territories.count)
        for (r, t) in territories.indices.sorted(by: { bytewiseLess(territories[$0], territories[$1]) }).enumerated() {
            territoryRank[t] = Int32(r)
        }
        var keys = entries.indices.map { i in
            let m = entries[i].key
            return SortKey(
                group: groupRank[m.group]!, product: productRank[m.product]!, paidTenure: m.paidMonths,
                monthsSince: m.monthsSince, winBack: m.monthsSinceWinBack ?? -1,
                territory: territoryRank[Int(m.storefront)], redeemed: m.monthsSinceWinBack != nil, index: Int32(i))
        }
        keys.sort()
        var names: [Int32: String] = [:]
        func name(_ id: Int32) -> String {
            if let s = names[id] { return s }
            let s = strings.string(id)
            names[id] = s
            return s
        }
        return keys.map { key in
            let (m, n) = entries[Int(key.index)]
            return EligibilitySummaryRow(
                subscriptionGroupId: name(m.group), productId: name(m.product), paidTenure: m.paidMonths,
                monthsSinceLastSubscribed: m.monthsSince, hasRedeemedWinBack: m.monthsSinceWinBack != nil,
                monthsSinceLastWinBack: m.monthsSinceWinBack, territory: territories[Int(m.storefront)], churned: n)
        }
    }

    /// `rows` in the order of ``less(_:_:)``, comparing integers: the few distinct groups,
    /// products and territories are ranked once instead of compared as strings at every step.
    package static func sorted(_ rows: [EligibilitySummaryRow]) -> [EligibilitySummaryRow] {
        func ranks(_ values: [String]) -> [String: Int] {
            Dictionary(uniqueKeysWithValues: Set(values).sorted(by: bytewiseLess).enumerated().map { ($1, $0) })
        }
        let group = ranks(rows.map(\.subscriptionGroupId))
        let product = ranks(rows.map(\.productId))
        let territory = ranks(rows.map(\.territory))
        // The fields of `less`, in its order; no win-back (-1) before any number of months.
        var keys = rows.indices.map { i in
            let r = rows[i]
            return SortKey(
                group: Int32(group[r.subscriptionGroupId]!), product: Int32(product[r.productId]!),
                paidTenure: r.paidTenure, monthsSince: r.monthsSinceLastSubscribed,
                winBack: r.monthsSinceLastWinBack ?? -1, territory: Int32(territory[r.territory]!),
                redeemed: r.hasRedeemedWinBack, index: Int32(i))
        }
        keys.sort()
        return keys.map { rows[Int($0.index)] }
    }

    /// A row's place in the summary's order, in integers compared in place (a list of them a
    /// row was an allocation each, compared element by element through a generic function).
    private struct SortKey: Comparable {
        var group: Int32
        var product: Int32
        var paidTenure: Int64
        var monthsSince: Int64
        var winBack: Int64
        var territory: Int32
        var redeemed: Bool
        /// The row's index: equal keys (never two rows of one summary) keep their order.
        var index: Int32

        static func < (a: SortKey, b: SortKey) -> Bool {
            if a.group != b.group { return a.group < b.group }
            if a.product != b.product { return a.product < b.product }
            if a.paidTenure != b.paidTenure { return a.paidTenure < b.paidTenure }
            if a.monthsSince != b.monthsSince { return a.monthsSince < b.monthsSince }
            if a.redeemed != b.redeemed { return !a.redeemed }
            if a.winBack != b.winBack { return a.winBack < b.winBack }
            if a.territory != b.territory { return a.territory < b.territory }
            return a.index < b.index
        }
    }

    static func less(_ a: EligibilitySummaryRow, _ b: EligibilitySummaryRow) -> Bool {
        if a.subscriptionGroupId != b.subscriptionGroupId {
            return bytewiseLess(a.subscriptionGroupId, b.subscriptionGroupId)
        }
        if a.productId != b.productId { return bytewiseLess(a.productId, b.productId) }
        if a.paidTenure != b.paidTenure { return a.paidTenure < b.paidTenure }
        if a.monthsSinceLastSubscribed != b.monthsSinceLastSubscribed {
            return a.monthsSinceLastSubscribed < b.monthsSinceLastSubscribed
        }
        // Empty ("" before "Yes", no win-back before any number) sorts first.
        if a.hasRedeemedWinBack != b.hasRedeemedWinBack { return !a.hasRedeemedWinBack }
        if a.monthsSinceLastWinBack != b.monthsSinceLastWinBack {
            return (a.monthsSinceLastWinBack ?? -1) < (b.monthsSinceLastWinBack ?? -1)
        }
        return bytewiseLess(a.territory, b.territory)
    }

    public static func csv(_ rows: [EligibilitySummaryRow]) -> [UInt8] {
        CSVRecord.table(columns, rows) { r, row in
            r.fields(
                row.subscriptionGroupId, row.productId, row.paidTenure, row.monthsSinceLastSubscribed,
                row.hasRedeemedWinBack ? "Yes" : "", row.monthsSinceLastWinBack, row.territory, row.churned)
        }
    }
}
