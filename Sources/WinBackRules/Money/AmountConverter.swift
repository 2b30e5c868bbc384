import WinBackModel

/// A row's amounts as the revenue reports add them (docs/rules.md §13.1): in the reporting
/// currency through the rates when the pipeline has `money`, else in the row's own currency.
/// Built once per run against its string table, so a row's currency is looked up by its id.
public struct AmountConverter: Sendable {
    /// A currency's rates × 10⁹: undated, and by month.
    struct CurrencyRates: Sendable {
        var undated: Int64?
        var monthly: [Int64: Int64]
    }

    /// The pipeline's rates; nil = amounts stay per currency.
    public let rates: Rates?
    /// By currency string id.
    let byId: [Int32: CurrencyRates]
    /// The reporting currency's id; nil when no row names it.
    let reportingId: Int32?

    public init(rates: Rates?, strings: StringTable) {
        self.rates = rates
        var byId: [Int32: CurrencyRates] = [:]
        if let rates {
            for code in Set(rates.undated.keys).union(rates.monthly.keys) {
                guard let id = strings.lookup(code) else { continue }
                byId[id] = CurrencyRates(undated: rates.undated[code], monthly: rates.monthly[code] ?? [:])
            }
            reportingId = strings.lookup(rates.currency)
        } else {
            reportingId = nil
        }
        self.byId = byId
    }

    /// Whether amounts are converted to one currency.
    public var converts: Bool { rates != nil }

    /// The row's gross and net at `t` in milliunits of the reporting currency (or of its own
    /// without `money`); nil when it has no amount or its currency no rate for its month.
    @inline(__always)
    public func amounts(_ r: Transaction, at t: Int64) -> (gross: Int128, net: Int128)? {
        guard r.isPriced else { return nil }
        let net = r.net(at: t)
        guard rates != nil, r.currency != reportingId else { return (Int128(r.price), Int128(net)) }
        guard let c = byId[r.currency] else { return nil }
        let rate: Int64
        if !c.monthly.isEmpty, let m = c.monthly[Rates.month(r.purchaseDate)] {
            rate = m
        } else if let u = c.undated {
            rate = u
        } else {
            return nil
        }
        return (Rates.convert(r.price, rate: rate), Rates.convert(net, rate: rate))
    }
}
