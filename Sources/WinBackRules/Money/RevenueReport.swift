import WinBackModel

/// One line of `revenue-after-return.csv` (docs/rules.md §13.2): the returns of a kind and offer
/// in a currency, and per horizon how many are observable and what their rows earned.
public struct RevenueRow: Sendable, Equatable, Codable, ReturnKindRow {
    public var kind: String
    public var offerId: String
    public var currency: String
    public var returns: Int
    /// Per horizon of ``RetentionReport/horizons``.
    public var observable: [Int]
    public var gross: [Milliunits]
    public var net: [Milliunits]

    public init(kind: String, offerId: String, currency: String, returns: Int = 0) {
        self.kind = kind
        self.offerId = offerId
        self.currency = currency
        self.returns = returns
        observable = RetentionReport.horizons.map { _ in 0 }
        gross = RetentionReport.horizons.map { _ in .zero }
        net = RetentionReport.horizons.map { _ in .zero }
    }

    /// gross − net at horizon `h`.
    public func refunded(_ h: Int) -> Milliunits { gross[h] - net[h] }

    /// net / observable at horizon `h`, in units, three decimals half away from zero; empty
    /// when nothing is observable.
    public func netPerReturn(_ h: Int) -> String { Milliunits.quotient(net[h].value, observable[h]) }
}

extension RevenueRow: SummableRow {
    package var key: [String] { [kind, offerId, currency] }

    package static func + (a: RevenueRow, b: RevenueRow) -> RevenueRow {
        var s = a
        s.returns += b.returns
        s.observable = zip(a.observable, b.observable).map(+)
        s.gross = zip(a.gross, b.gross).map(+)
        s.net = zip(a.net, b.net).map(+)
        return s
    }
}

/// Builds and prints revenue after a return (docs/rules.md §13.2).
public enum RevenueReport {
    public static let columns =
        ["kind", "offer_id", "currency", "returns"]
        + RetentionReport.horizons.flatMap {
            ["observable_\($0)m", "gross_\($0)m", "refunded_\($0)m", "net_\($0)m", "net_per_return_\($0)m"]
        }

    /// Tally key: the return's raw offer type, the offer id the report shows, and the currency
    /// (a string id; -1 for the reporting currency).
    package struct Key: Hashable {
        package var offerType: Int64
        package var offerId: Int32
        package var currency: Int32
    }

    /// The revenue of return `r` at each horizon: its customer's rows (PURCHASED, known at `t`)
    /// bought from its start until the horizon, counted when the horizon has passed. Without
    /// `money` only rows in the currency of the return's first row count (others are counted in
    /// `money`), and a return whose first row has no amount counts nowhere.
    package static func count<C: RandomAccessCollection>(
        _ returns: [Return], rows: C, asOf t: Int64, converter: AmountConverter, into tally: inout [Key: RevenueRow],
        money: inout MoneyTally
    ) where C.Element == Transaction, C.Index == Int {
        let hs = RetentionReport.horizons
        var ends: [Int64] = []
        ends.reserveCapacity(hs.count)
        for ret in returns {
            var currency: Int32 = -1
            if !converter.converts {
                let first = rows[rows.startIndex + ret.row]
                guard first.isPriced else { continue }
                currency = first.currency
            }
            let key = Key(offerType: ret.offerType, offerId: ret.reportedOffer, currency: currency)
            // Changed in place: a row taken out of the tally and put back would copy its arrays.
            add(
                ret, rows: rows, asOf: t, currency: currency, converter: converter, ends: &ends,
                to: &tally[key, default: RevenueRow(kind: "", offerId: "", currency: "")], money: &money)
        }
    }

    @inline(__always)
    private static func add<C: RandomAccessCollection>(
        _ ret: Return, rows: C, asOf t: Int64, currency: Int32, converter: AmountConverter, ends: inout [Int64],
        to row: inout RevenueRow, money: inout MoneyTally
    ) where C.Element == Transaction, C.Index == Int {
        let hs = RetentionReport.horizons
        row.returns += 1
        guard let last = hs.indices.last(where: { ret.observable[$0] }) else { return }
        ends.removeAll(keepingCapacity: true)
        for h in hs { ends.append(MonthMath.addMonths(ret.start, h)) }
        for h in 0...last { row.observable[h] += 1 }
        for r in rows where r.isKnownPurchase(at: t) && r.purchaseDate >= ret.start && r.purchaseDate < ends[last] {
            if !converter.converts && r.isPriced && r.currency != currency {
                money.otherCurrency += 1
                continue
            }
            guard let a = converter.amounts(r, at: t) else { continue }
            for h in 0...last where r.purchaseDate < ends[h] {
                row.gross[h].value += a.gross
                row.net[h].value += a.net
            }
        }
    }

    /// The tally's rows, named and in report order.
    static func rows(_ tally: [Key: RevenueRow], strings: StringTable, reporting: String?) -> [RevenueRow] {
        sorted(
            tally.named { key, row in
                row.name(offerType: key.offerType, offer: key.offerId, strings: strings)
                row.currency = key.currency >= 0 ? strings.string(key.currency) : (reporting ?? "")
            })
    }

    /// Retention's order (docs/rules.md §9.3), then currency bytewise.
    package static func sorted(_ rows: [RevenueRow]) -> [RevenueRow] {
        rows.sorted { a, b in RetentionReport.kindOrder(a, b) ?? bytewiseLess(a.currency, b.currency) }
    }

    /// Every line: the rows, then a `*` row per currency (bytewise) summing that currency's;
    /// with `money` the reporting currency's `*` row is written even without returns.
    public static func table(_ rows: [RevenueRow], reporting: String?) -> [RevenueRow] {
        var totals: [String: RevenueRow] = [:]
        if let reporting { totals[reporting] = RevenueRow(kind: "*", offerId: "", currency: reporting) }
        for r in rows {
            var total = totals[r.currency] ?? RevenueRow(kind: "*", offerId: "", currency: r.currency)
            total = total + r
            totals[r.currency] = total
        }
        return rows + totals.keys.sorted(by: bytewiseLess).map { totals[$0]! }
    }

    public static func csv(_ rows: [RevenueRow], reporting: String?) -> [UInt8] {
        CSVRecord.table(columns, table(rows, reporting: reporting)) { r, row in
            r.field(row.kind)
            r.field(row.offerId)
            r.field(row.currency)
            r.field(row.returns)
            for h in RetentionReport.horizons.indices {
                r.field(row.observable[h])
                // Signed numbers, written as they are (not guarded as text that could start a formula).
                r.field(escaped: Array(row.gross[h].units.utf8))
                r.field(escaped: Array(row.refunded(h).units.utf8))
                r.field(escaped: Array(row.net[h].units.utf8))
                r.field(escaped: Array(row.netPerReturn(h).utf8))
            }
        }
    }
}
