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
    public func kind(strings: StringTable) -> String {
        offerType == 0 ? "none" : OfferType.label(offerType, strings: strings)
    }

    /// The offer id the report shows: empty for `introductory` and `none`.
    public var reportedOffer: Int32 {
        offerType == 0 || offerType == OfferType.introductory.rawValue ? Transaction.none : offerIdentifier
    }
}

/// One line of `retention-after-return.csv` (docs/rules.md §9.3).
public struct RetentionRow: Sendable, Equatable, Codable {
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
    package struct Key: Hashable {
        var kind: String
        var offerId: String
    }

    package var key: Key { Key(kind: kind, offerId: offerId) }

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
        out.removeAll(keepingCapacity: true)
        CustomerTimeline.collectPeriods(rows: rows, at: t, into: &periods)
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
        sorted(
            tally.map { key, row in
                var row = row
                row.kind = key.offerType == 0 ? "none" : OfferType.label(key.offerType, strings: strings)
                row.offerId = key.offerId >= 0 ? strings.string(key.offerId) : ""
                return row
            })
    }

    /// The report order of kinds: win_back, promotional, offer_code, introductory, unknown ones
    /// bytewise, none; then offer ids bytewise.
    package static func sorted(_ rows: [RetentionRow]) -> [RetentionRow] {
        let rank = ["win_back": 0, "promotional": 1, "offer_code": 2, "introductory": 3, "none": 5]
        return rows.sorted { a, b in
            let (ra, rb) = (rank[a.kind] ?? 4, rank[b.kind] ?? 4)
            if ra != rb { return ra < rb }
            if a.kind != b.kind { return bytewiseLess(a.kind, b.kind) }
            return bytewiseLess(a.offerId, b.offerId)
        }
    }

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
