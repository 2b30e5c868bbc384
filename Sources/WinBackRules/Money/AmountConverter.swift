import WinBackModel

/// A row's amounts as the revenue reports add them (docs/rules.md §13.1): in the reporting
/// currency through the rates when the pipeline has `money`, else in the row's own currency.
/// Built once per run against its string table, so a row's currency is looked up by its id.
public struct AmountConverter: Sendable {
    /// A currency's rate for a month: the currency's string id and the month (``Rates/month(_:)``).
    struct MonthKey: Hashable {
        var currency: Int32
        var month: Int64
    }

    /// The pipeline's rates; nil = amounts stay per currency.
    public let rates: Rates?
    /// Rates × 10⁹ by currency string id and month, and undated by currency string id: looked
    /// up as they are, with no per-currency value copied on every row.
    let monthly: [MonthKey: Int64]
    let undated: [Int32: Int64]
    /// The reporting currency's id; nil when no row names it.
    let reportingId: Int32?

    public init(rates: Rates?, strings: StringTable) {
        self.rates = rates
        converts = rates != nil
        var monthly: [MonthKey: Int64] = [:]
        var undated: [Int32: Int64] = [:]
        if let rates {
            for code in Set(rates.undated.keys).union(rates.monthly.keys) {
                guard let id = strings.lookup(code) else { continue }
                undated[id] = rates.undated[code]
                for (month, rate) in rates.monthly[code] ?? [:] { monthly[MonthKey(currency: id, month: month)] = rate }
            }
            reportingId = strings.lookup(rates.currency)
        } else {
            reportingId = nil
        }
        self.monthly = monthly
        self.undated = undated
    }

    /// Whether amounts are converted to one currency: kept, since asking `rates != nil` of
    /// every row copies the rates (their strings and tables) and lets the copy go.
    public let converts: Bool

    /// The row's gross and net at `t` in milliunits of the reporting currency (or of its own
    /// without `money`); nil when it has no amount or its currency no rate for its month.
    @inline(__always)
    public func amounts(_ r: Transaction, at t: Int64) -> (gross: Int128, net: Int128)? {
        guard r.isPriced else { return nil }
        let net = r.net(at: t)
        guard converts, r.currency != reportingId else { return (Int128(r.price), Int128(net)) }
        // The month's rate, else the currency's undated one (docs/rules.md §13.1).
        let rate: Int64
        if !monthly.isEmpty, let m = monthly[MonthKey(currency: r.currency, month: Rates.month(r.purchaseDate))] {
            rate = m
        } else if let u = undated[r.currency] {
            rate = u
        } else {
            return nil
        }
        return (Rates.convert(r.price, rate: rate), Rates.convert(net, rate: rate))
    }
}
