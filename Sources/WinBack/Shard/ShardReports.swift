import WinBackRules

/// One report's rows as a shard keeps them (docs/rules.md §8.1): taken from the shard's
/// ``Reports``, added up with the other shards' (not when two are of another catalog or
/// window: their line-by-line lists do not line up then), and put back into the run's.
/// A new report is its tally and one entry of ``ShardReports/tallies``, beside its entry of
/// ``ReportWriter/reportFiles``.
protocol ShardTally: Codable, SendableMetatype {
    init(_ r: Reports)
    /// Adds another shard's tally to this one; false when the two do not add up (another
    /// catalog or window), this one then no longer a sum of anything.
    mutating func add(_ o: Self) -> Bool
    func store(into r: inout Reports)
}

extension ShardTally {
    /// ``add(_:)`` of a tally known only as a ``ShardTally``: false unless it is of this kind.
    mutating func add(any o: any ShardTally) -> Bool {
        guard let o = o as? Self else { return false }
        return add(o)
    }
}

/// Where a report's rows are in ``Reports`` and how two shards' add: line by line (catalog or
/// window order) or by key, then put in the report's own order.
protocol RowsOfReport {
    associatedtype Row: SummableRow & Codable
    static var rows: WritableKeyPath<Reports, [Row]> { get }
    /// The report's order for rows summed by key; nil: summed line by line, kept in order.
    static var sorted: (([Row]) -> [Row])? { get }
    /// One row as a shard's `reports.json` holds it: by default the row's own Codable form.
    static func encode(_ row: Row, to list: inout UnkeyedEncodingContainer) throws
    static func decode(from list: inout UnkeyedDecodingContainer) throws -> Row
}

extension RowsOfReport {
    static func encode(_ row: Row, to list: inout UnkeyedEncodingContainer) throws { try list.encode(row) }
    static func decode(from list: inout UnkeyedDecodingContainer) throws -> Row { try list.decode(Row.self) }
}

/// The rows of one report as a shard keeps them.
struct RowsTally<Report: RowsOfReport>: ShardTally {
    var rows: [Report.Row]
    /// Where each key's row is in `rows`, once a shard's rows were added by key: kept for the
    /// next shard's, so a merge of many shards indexes each row once.
    private var index: [Report.Row.Key: Int]?

    private enum CodingKeys: String, CodingKey { case rows }

    init(_ r: Reports) { rows = r[keyPath: Report.rows] }

    init(from decoder: Decoder) throws {
        var list = try decoder.container(keyedBy: CodingKeys.self).nestedUnkeyedContainer(forKey: .rows)
        rows = []
        while !list.isAtEnd { rows.append(try Report.decode(from: &list)) }
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        var list = c.nestedUnkeyedContainer(forKey: .rows)
        for row in rows { try Report.encode(row, to: &list) }
    }

    mutating func add(_ o: Self) -> Bool {
        guard Report.sorted != nil else {
            guard let sum = rows.summed(lineByLine: o.rows) else { return false }
            rows = sum
            return true
        }
        rows.add(byKey: o.rows, index: &index)
        return true
    }

    func store(into r: inout Reports) { r[keyPath: Report.rows] = Report.sorted?(rows) ?? rows }
}

enum RedemptionRows: RowsOfReport {
    static var rows: WritableKeyPath<Reports, [RedemptionRow]> { \.redemptions }
    static var sorted: (([RedemptionRow]) -> [RedemptionRow])? { RedemptionReport.sorted }
}

enum RateRows: RowsOfReport {
    static var rows: WritableKeyPath<Reports, [RedemptionRateRow]> { \.rates }
    static var sorted: (([RedemptionRateRow]) -> [RedemptionRateRow])? { nil }
}

/// The eligibility summary has a row for every shape of churned customer met (tens of
/// thousands): each is written as a list of its fields in column order, not an object, which
/// JSON reads several times faster.
enum SummaryRows: RowsOfReport {
    static var rows: WritableKeyPath<Reports, [EligibilitySummaryRow]> { \.summary }
    static var sorted: (([EligibilitySummaryRow]) -> [EligibilitySummaryRow])? { EligibilitySummaryReport.sorted }

    static func encode(_ row: EligibilitySummaryRow, to list: inout UnkeyedEncodingContainer) throws {
        var fields = list.nestedUnkeyedContainer()
        try fields.encode(row.subscriptionGroupId)
        try fields.encode(row.productId)
        try fields.encode(row.paidTenure)
        try fields.encode(row.monthsSinceLastSubscribed)
        try fields.encode(row.hasRedeemedWinBack)
        if let m = row.monthsSinceLastWinBack { try fields.encode(m) } else { try fields.encodeNil() }
        try fields.encode(row.territory)
        try fields.encode(row.churned)
    }

    static func decode(from list: inout UnkeyedDecodingContainer) throws -> EligibilitySummaryRow {
        var fields = try list.nestedUnkeyedContainer()
        let row = EligibilitySummaryRow(
            subscriptionGroupId: try fields.decode(String.self), productId: try fields.decode(String.self),
            paidTenure: try fields.decode(Int64.self), monthsSinceLastSubscribed: try fields.decode(Int64.self),
            hasRedeemedWinBack: try fields.decode(Bool.self),
            monthsSinceLastWinBack: try fields.decodeNil() ? nil : try fields.decode(Int64.self),
            territory: try fields.decode(String.self), churned: try fields.decode(Int.self))
        guard fields.isAtEnd else {
            throw DecodingError.dataCorruptedError(
                in: fields, debugDescription: "an eligibility summary row has more fields than it should")
        }
        return row
    }
}

/// The uplift's cells (cohort months × catalog offers, docs/rules.md §9): counts, summed before
/// any rate or interval is computed.
enum UpliftRows: RowsOfReport {
    static var rows: WritableKeyPath<Reports, [UpliftRow]> { \.uplift }
    static var sorted: (([UpliftRow]) -> [UpliftRow])? { nil }
}

enum RetentionRows: RowsOfReport {
    static var rows: WritableKeyPath<Reports, [RetentionRow]> { \.retention }
    static var sorted: (([RetentionRow]) -> [RetentionRow])? { RetentionReport.sorted }
}

/// Revenue after a return (docs/rules.md §13): sums in milliunits, exact, so every shard count
/// publishes the same report.
enum RevenueRows: RowsOfReport {
    static var rows: WritableKeyPath<Reports, [RevenueRow]> { \.revenue }
    static var sorted: (([RevenueRow]) -> [RevenueRow])? { RevenueReport.sorted }
}

/// A shard's report rows: sums over disjoint sets of customers, so the run's reports are the
/// sums of the shards' by key (docs/rules.md §8.1). Every list is of ``SummableRow``s: each row
/// type owns its key and its `+`; each report's rows are a ``ShardTally`` registered once in
/// ``tallies``, so a merge of shards is a fold of ``add(_:)`` and a report added here needs
/// no edit in ``Merge``.
struct ShardReports: Codable {
    /// Every report's tally, by the key `reports.json` keeps it under.
    static let tallies: [(key: String, type: any ShardTally.Type)] = [
        ("redemptions", RowsTally<RedemptionRows>.self), ("rates", RowsTally<RateRows>.self),
        ("funnel", Funnels.self), ("summary", RowsTally<SummaryRows>.self), ("apple", Apple.self),
        ("uplift", RowsTally<UpliftRows>.self), ("retention", RowsTally<RetentionRows>.self),
        ("revenue", RowsTally<RevenueRows>.self), ("money", Money.self),
    ]

    struct Funnel: Codable, SummableRow {
        var offerId: String
        var funnel: FunnelRow

        var key: String { offerId }

        static func + (a: Funnel, b: Funnel) -> Funnel {
            var sum = a
            sum.funnel.add(b.funnel)
            return sum
        }
    }

    /// The counts of apple-agreement.csv (the disagreements are a sorted file of their own).
    struct Apple: ShardTally {
        struct Offer: Codable, SummableRow {
            var offerId: String
            var counts: AppleAgreement.Counts

            var key: String { offerId }

            static func + (a: Offer, b: Offer) -> Offer { Offer(offerId: a.offerId, counts: a.counts + b.counts) }
        }
        struct Unknown: Codable, SummableRow {
            var id: String
            var customers: Int

            var key: String { id }

            static func + (a: Unknown, b: Unknown) -> Unknown {
                Unknown(id: a.id, customers: a.customers + b.customers)
            }
        }
        var offers: [Offer]
        var unknownIds: [Unknown]
        var overall: AppleAgreement.Counts
        var topAgreement: Int

        init(_ r: Reports) {
            offers = r.apple.offers.map { .init(offerId: $0.offerId, counts: $0.counts) }
            unknownIds = r.apple.unknownIds.map { .init(id: $0.id, customers: $0.customers) }
            overall = r.apple.overall
            topAgreement = r.apple.topAgreement
        }

        init(offers: [Offer], unknownIds: [Unknown], overall: AppleAgreement.Counts, topAgreement: Int) {
            self.offers = offers
            self.unknownIds = unknownIds
            self.overall = overall
            self.topAgreement = topAgreement
        }

        /// The counts of both; false unless both are of the same catalog.
        mutating func add(_ o: Apple) -> Bool {
            guard let sum = offers.summed(lineByLine: o.offers) else { return false }
            offers = sum
            unknownIds = unknownIds.summed(byKey: o.unknownIds)
            overall = overall + o.overall
            topAgreement += o.topAgreement
            return true
        }

        /// The disagreements, a file of their own, are not among them.
        func store(into r: inout Reports) {
            r.apple = AppleAgreement(
                offers: offers.map { ($0.offerId, $0.counts) },
                unknownIds: AppleAgreement.sorted(unknownIds: unknownIds.map { ($0.id, $0.customers) }),
                overall: overall, topAgreement: topAgreement, disagreements: [])
        }
    }

    struct Funnels: ShardTally {
        var rows: [Funnel]
        init(_ r: Reports) { rows = r.funnel.map { Funnel(offerId: $0.offerId, funnel: $0.funnel) } }
        mutating func add(_ o: Self) -> Bool {
            guard let sum = rows.summed(lineByLine: o.rows) else { return false }
            rows = sum
            return true
        }
        func store(into r: inout Reports) { r.funnel = rows.map { ($0.offerId, $0.funnel) } }
    }

    /// What the manifest says of amounts (docs/rules.md §13.1), and the reporting currency and
    /// horizon every shard must share.
    struct Money: ShardTally {
        var money: MoneyCounts
        var reportingCurrency: String?
        var horizonMonths: Int
        init(_ r: Reports) {
            money = r.money
            reportingCurrency = r.reportingCurrency
            horizonMonths = r.horizonMonths
        }
        mutating func add(_ o: Self) -> Bool {
            guard reportingCurrency == o.reportingCurrency, horizonMonths == o.horizonMonths else { return false }
            money = money + o.money
            return true
        }
        func store(into r: inout Reports) {
            r.money = money
            r.reportingCurrency = reportingCurrency
            r.horizonMonths = horizonMonths
        }
    }

    /// Each report's tally, by its key in ``tallies``.
    var reports: [String: any ShardTally]
    /// Segment rows `audience.requireApple` left out, per catalog offer, then best-offer.
    var droppedByApple: [Int]
    /// Segment rows the experiment held out, per catalog offer, then best-offer (docs/rules.md §9.1).
    var heldOut: [Int]

    init(_ r: Reports, droppedByApple: [Int], heldOut: [Int]) {
        reports = Dictionary(uniqueKeysWithValues: Self.tallies.map { ($0.key, $0.type.init(r)) })
        self.droppedByApple = droppedByApple
        self.heldOut = heldOut
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        var reports: [String: any ShardTally] = [:]
        for t in Self.tallies { reports[t.key] = try c.decode(t.type, forKey: Key(t.key)) }
        self.reports = reports
        droppedByApple = try c.decode([Int].self, forKey: Key("droppedByApple"))
        heldOut = try c.decode([Int].self, forKey: Key("heldOut"))
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        for t in Self.tallies {
            guard let tally = reports[t.key] else { continue }
            try c.encode(tally, forKey: Key(t.key))
        }
        try c.encode(droppedByApple, forKey: Key("droppedByApple"))
        try c.encode(heldOut, forKey: Key("heldOut"))
    }

    /// Adds another shard's report rows to these: rows summed by key, those in catalog or
    /// window order line by line. False unless the two are of the same catalog and window (their
    /// line-by-line lists do not line up), these then no longer a sum of anything.
    mutating func add(_ o: ShardReports) -> Bool {
        guard droppedByApple.count == o.droppedByApple.count, heldOut.count == o.heldOut.count else { return false }
        for t in Self.tallies {
            // Taken out while it grows, so its rows are not copied.
            guard var a = reports.removeValue(forKey: t.key), let b = o.reports[t.key], a.add(any: b) else {
                return false
            }
            reports[t.key] = a
        }
        droppedByApple = zip(droppedByApple, o.droppedByApple).map(+)
        heldOut = zip(heldOut, o.heldOut).map(+)
        return true
    }

    /// The run's reports from the summed rows, each in its report's own order (docs/rules.md
    /// §4.3, §4.5); the disagreements, a file of their own, are not among them.
    func reports(window: ReportWindow, experiment: Experiment?) -> Reports {
        var r = Reports(
            window: window, redemptions: [], rates: [], funnel: [], summary: [],
            apple: AppleAgreement(offers: [], unknownIds: [], overall: .init(), topAgreement: 0, disagreements: []),
            experiment: experiment)
        for t in Self.tallies { reports[t.key]?.store(into: &r) }
        return r
    }
}
