import WinBackModel

/// One return of a customer (docs/rules.md §9.3): a period that starts at least one whole month
/// after every earlier period ended.
public struct Return: Sendable, Equatable {
    /// P: the period's start (its row's purchaseDate).
    public var start: Int64
    /// The latest end among the earlier periods: when the customer had left.
    public var reach: Int64
    /// The period's row's raw offerType (0 = none) and offerIdentifier (an id of the run's
    /// string table, negative when absent).
    public var offerType: Int64
    public var offerIdentifier: Int32
    /// Per horizon of ``RetentionReport/horizons``: whether it has passed at T, and whether
    /// some period at T contains it.
    public var observable: [Bool]
    public var retained: [Bool]
    /// The period's row: its offset in the customer's rows.
    public var row: Int = 0

    /// `win_back`, `promotional`, `offer_code`, `introductory`, `unknown:N` or `none`.
    public func kind(strings: StringTable) -> String { Return.kind(offerType, strings: strings) }

    /// The kind of a return whose row has raw offerType `offerType` (0 = none).
    static func kind(_ offerType: Int64, strings: StringTable) -> String {
        offerType == 0 ? "none" : OfferType.label(offerType, strings: strings)
    }

    /// The offer id the report shows: empty for `introductory` and `none`.
    public var reportedOffer: Int32 {
        offerType == 0 || offerType == OfferType.introductory.rawValue ? Transaction.none : offerIdentifier
    }
}

/// A row of a report on returns by how they began (docs/rules.md §9.3, §13.2), in
/// ``RetentionReport/kindOrder(_:_:)``.
package protocol ReturnKindRow {
    /// The returns' ``Return/kind(strings:)``, or `*` on a total row.
    var kind: String { get set }
    /// The offer id the report shows (``Return/reportedOffer``); empty for `introductory` and `none`.
    var offerId: String { get set }
}

extension ReturnKindRow {
    /// Names a tally row after its returns' raw offer type and reported offer (a string id,
    /// negative when none).
    mutating func name(offerType: Int64, offer: Int32, strings: StringTable) {
        kind = Return.kind(offerType, strings: strings)
        offerId = offer >= 0 ? strings.string(offer) : ""
    }
}

/// One line of `retention-after-return.csv` (docs/rules.md §9.3).
public struct RetentionRow: Sendable, Equatable, Codable, ReturnKindRow {
    public var kind: String
    public var offerId: String
    public var returns: Int
    /// Per horizon of ``RetentionReport/horizons``.
    public var observable: [Int]
    public var retained: [Int]

    public init(kind: String, offerId: String, returns: Int = 0, observable: [Int]? = nil, retained: [Int]? = nil) {
        self.kind = kind
        self.offerId = offerId
        self.returns = returns
        self.observable = observable ?? RetentionReport.horizons.map { _ in 0 }
        self.retained = retained ?? RetentionReport.horizons.map { _ in 0 }
    }

    /// retained / observable at horizon `h`, docs/rules.md §4.3 rounding.
    public func retention(_ h: Int) -> String { Rate.format(retained[h], observable[h]) }
}

extension RetentionRow: SummableRow {
    package var key: [String] { [kind, offerId] }

    package static func + (a: RetentionRow, b: RetentionRow) -> RetentionRow {
        RetentionRow(
            kind: a.kind, offerId: a.offerId, returns: a.returns + b.returns,
            observable: zip(a.observable, b.observable).map(+), retained: zip(a.retained, b.retained).map(+))
    }
}

/// Builds and prints retention after a return (docs/rules.md §9.3).
public enum RetentionReport {
    /// The horizons, in months.
    public static let horizons: [Int64] = [1, 3, 6, 12]

    public static let columns =
        ["kind", "offer_id", "returns"]
        + horizons.flatMap { ["observable_\($0)m", "retained_\($0)m", "retention_\($0)m"] }

    /// The first instant from which returns count: the first instant of the month
    /// `retentionMonths` months before T's month.
    public static func since(asOf t: Int64, months: Int) -> Int64 { MonthMath.monthStart(t, offset: -Int64(months)) }

    /// The customer's returns at `t` that start at or after `since`, in order, into `out`
    /// (cleared first); `periods` is scratch.
    public static func returns<C: RandomAccessCollection>(
        rows: C, asOf t: Int64, since: Int64, periods: inout [Period], into out: inout [Return]
    ) where C.Element == Transaction, C.Index == Int {
        CustomerTimeline.collectPeriods(rows: rows, at: t, into: &periods)
        returns(rows: rows, asOf: t, since: since, periods: periods, into: &out)
    }

    /// The same, of a customer whose periods at `t` are known (``CustomerTimeline/build(rows:asOf:gapDays:renewal:periods:)``
    /// left them).
    static func returns<C: RandomAccessCollection>(
        rows: C, asOf t: Int64, since: Int64, periods: [Period], into out: inout [Return]
    ) where C.Element == Transaction, C.Index == Int {
        out.removeAll(keepingCapacity: true)
        guard periods.count > 1 else { return }
        var reach = periods[0].end
        for k in 1..<periods.count {
            let p = periods[k]
            // wholeMonths(reach, start) ≥ 1 is addMonths(reach, 1) ≤ start; a month is at
            // least 28 days, so most periods are settled by the first test.
            if p.start >= since && p.start - reach >= 28 * MonthMath.day && MonthMath.addMonths(reach, 1) <= p.start {
                let row = rows[rows.startIndex + Int(p.row)]
                var observable: [Bool] = []
                var retained: [Bool] = []
                for h in horizons {
                    let x = MonthMath.addMonths(p.start, h)
                    observable.append(x < t)
                    retained.append(periods[k...].contains { $0.start <= x && x < $0.end })
                }
                out.append(
                    Return(
                        start: p.start, reach: reach, offerType: row.offerType, offerIdentifier: row.offerIdentifier,
                        observable: observable, retained: retained, row: Int(p.row)))
            }
            reach = max(reach, p.end)
        }
    }

    /// Tally key: a return's raw offer type and the offer id the report shows.
    struct Key: Hashable {
        var offerType: Int64
        var offerId: Int32
    }

    /// Counts one customer's returns into `tally`.
    static func count(_ returns: [Return], into tally: inout [Key: RetentionRow]) {
        for r in returns {
            let key = Key(offerType: r.offerType, offerId: r.reportedOffer)
            var row = tally[key] ?? RetentionRow(kind: "", offerId: "")
            row.returns += 1
            for h in horizons.indices {
                if r.observable[h] {
                    row.observable[h] += 1
                    if r.retained[h] { row.retained[h] += 1 }
                }
            }
            tally[key] = row
        }
    }

    /// The tally's rows, named and in report order.
    static func rows(_ tally: [Key: RetentionRow], strings: StringTable) -> [RetentionRow] {
        sorted(tally.named { key, row in row.name(offerType: key.offerType, offer: key.offerId, strings: strings) })
    }

    /// The report order of kinds: win_back, promotional, offer_code, introductory, unknown ones
    /// bytewise, none; then offer ids bytewise.
    package static func sorted(_ rows: [RetentionRow]) -> [RetentionRow] {
        rows.sorted { kindOrder($0, $1) ?? false }
    }

    /// Whether `a` comes before `b` in the report order of kinds, then offer ids bytewise; nil
    /// when both have the same kind and offer.
    static func kindOrder<Row: ReturnKindRow>(_ a: Row, _ b: Row) -> Bool? {
        let (ra, rb) = (kindRank(a.kind), kindRank(b.kind))
        if ra != rb { return ra < rb }
        if a.kind != b.kind { return bytewiseLess(a.kind, b.kind) }
        if a.offerId != b.offerId { return bytewiseLess(a.offerId, b.offerId) }
        return nil
    }

    /// A kind's place in the report order: win_back 0, promotional 1, offer_code 2,
    /// introductory 3, unknown ones 4, none 5.
    static func kindRank(_ kind: String) -> Int { kindRanks[kind] ?? 4 }

    private static let kindRanks = ["win_back": 0, "promotional": 1, "offer_code": 2, "introductory": 3, "none": 5]

    /// Every line: the rows, then `*` summing them all.
    public static func table(_ rows: [RetentionRow]) -> [RetentionRow] {
        rows + [rows.reduce(RetentionRow(kind: "*", offerId: "")) { $0 + $1 }]
    }

    public static func csv(_ rows: [RetentionRow]) -> [UInt8] {
        CSVRecord.table(columns, table(rows)) { r, row in
            r.field(row.kind)
            r.field(row.offerId)
            r.field(row.returns)
            for h in horizons.indices {
                r.field(row.observable[h])
                r.field(row.retained[h])
                r.field(row.retention(h))
            }
        }
    }
}
