import WinBackModel

/// What the manifest says of amounts (docs/rules.md §13.1): PURCHASED rows known at T without an
/// amount, rows whose currency had no rate (per currency), and rows under a return in another
/// currency than the return's (without `money`). Sums over customers.
public struct MoneyCounts: Sendable, Equatable, Codable {
    public var unpriced = 0
    /// Currency code → rows.
    public var unconverted: [String: Int] = [:]
    public var otherCurrency = 0
    /// The currencies of the priced PURCHASED rows known at T.
    public var currencies: Set<String> = []

    public init() {}

    public static func + (a: MoneyCounts, b: MoneyCounts) -> MoneyCounts {
        var s = a
        s.unpriced += b.unpriced
        s.unconverted.merge(b.unconverted, uniquingKeysWith: +)
        s.otherCurrency += b.otherCurrency
        s.currencies.formUnion(b.currencies)
        return s
    }
}

/// ``MoneyCounts`` while counting, by string id.
package struct MoneyTally {
    package var unpriced = 0
    package var unconverted: [Int32: Int] = [:]
    var otherCurrency = 0
    var currencies: Set<Int32> = []
    package init() {}

    /// The last currency inserted: most customers pay in one.
    var lastCurrency: Int32 = -2

    mutating func add(_ o: MoneyTally) {
        unpriced += o.unpriced
        unconverted.merge(o.unconverted, uniquingKeysWith: +)
        otherCurrency += o.otherCurrency
        currencies.formUnion(o.currencies)
    }

    /// Counts one customer's PURCHASED rows known at `t`.
    @inline(__always)
    mutating func count<C: RandomAccessCollection>(rows: C, asOf t: Int64, converter: AmountConverter)
    where C.Element == Transaction {
        for r in rows where r.isKnownPurchase(at: t) {
            guard r.isPriced else {
                unpriced += 1
                continue
            }
            if r.currency != lastCurrency {
                currencies.insert(r.currency)
                lastCurrency = r.currency
            }
            if converter.converts && converter.amounts(r, at: t) == nil { unconverted[r.currency, default: 0] += 1 }
        }
    }

    func counts(strings: StringTable) -> MoneyCounts {
        var c = MoneyCounts()
        c.unpriced = unpriced
        c.otherCurrency = otherCurrency
        for (k, n) in unconverted { c.unconverted[strings.string(k)] = n }
        c.currencies = Set(currencies.map { strings.string($0) })
        return c
    }
}
