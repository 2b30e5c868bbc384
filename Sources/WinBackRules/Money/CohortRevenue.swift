import WinBackModel

/// What a cohort's customers earned (docs/rules.md §13.3): how many were counted, and the exact
/// sums of their revenue x and of x² in milliunits, from which the means and the variances come
/// after any summing (threads, shards).
public struct CohortRevenue: Sendable, Equatable, Codable {
    public var customers = 0
    public var sum = Milliunits.zero
    /// Σx² as 256 bits: a customer's x is below 2¹⁰⁰ milliunits (docs/rules.md §13.1's bound on
    /// rates), so x² needs more than 128.
    public var squaresHigh: UInt128 = 0
    public var squaresLow: UInt128 = 0

    public init() {}

    /// Counts one customer whose revenue is `x` (≥ 0).
    @inline(__always)
    mutating func add(_ x: Int128) {
        customers += 1
        sum.value += x
        let (h, l) = x.magnitude.multipliedFullWidth(by: x.magnitude)
        addSquares(high: h, low: l)
    }

    private mutating func addSquares(high: UInt128, low: UInt128) {
        let (l, carry) = squaresLow.addingReportingOverflow(low)
        squaresLow = l
        squaresHigh += high + (carry ? 1 : 0)
    }

    public static func + (a: CohortRevenue, b: CohortRevenue) -> CohortRevenue {
        var s = a
        s.customers += b.customers
        s.sum = a.sum + b.sum
        s.addSquares(high: b.squaresHigh, low: b.squaresLow)
        return s
    }

    enum CodingKeys: String, CodingKey { case customers, sum, squaresHigh, squaresLow }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        customers = try c.decode(Int.self, forKey: .customers)
        sum = try c.decode(Milliunits.self, forKey: .sum)
        func wide(_ k: CodingKeys) throws -> UInt128 {
            guard let v = UInt128(try c.decode(String.self, forKey: k)) else {
                throw DecodingError.dataCorruptedError(forKey: k, in: c, debugDescription: "not an amount")
            }
            return v
        }
        squaresHigh = try wide(.squaresHigh)
        squaresLow = try wide(.squaresLow)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(customers, forKey: .customers)
        try c.encode(sum, forKey: .sum)
        try c.encode(String(squaresHigh), forKey: .squaresHigh)
        try c.encode(String(squaresLow), forKey: .squaresLow)
    }

    /// The sample variance of x (n − 1), in milliunits²; nil unless two or more customers.
    /// Exact integers while n·Σx² − (Σx)² fits in 128 bits, else in doubles.
    public var variance: Double? {
        guard customers >= 2 else { return nil }
        let n = Int128(customers)
        if squaresHigh == 0, squaresLow <= UInt128(Int128.max) {
            let (nq, o1) = n.multipliedReportingOverflow(by: Int128(squaresLow))
            let (s2, o2) = sum.value.multipliedReportingOverflow(by: sum.value)
            if !o1 && !o2 { return Double(nq - s2) / (Double(n) * Double(n - 1)) }
        }
        let squares = Double(squaresHigh) * 0x1p128 + Double(squaresLow)
        let mean = Double(sum.value) / Double(n)
        return max(0, (squares - Double(n) * mean * mean) / Double(n - 1))
    }
}

/// How the uplift counts a cohort customer's revenue (docs/rules.md §13.3): their rows' net
/// amounts, converted, bought from the cohort month's first instant for `horizonMonths`.
public struct CohortMoney: Sendable {
    let converter: AmountConverter
    let horizonMonths: Int64

    package init(converter: AmountConverter, horizonMonths: Int64) {
        self.converter = converter
        self.horizonMonths = horizonMonths
    }

    /// The customer's cohort revenue from `from`, nil while its horizon has not passed at `t`.
    @inline(__always)
    package func revenue<C: RandomAccessCollection>(rows: C, from: Int64, asOf t: Int64) -> Int128?
    where C.Element == Transaction {
        let end = MonthMath.addMonths(from, horizonMonths)
        guard end <= t else { return nil }
        var x: Int128 = 0
        for r in rows where r.isKnownPurchase(at: t) && r.purchaseDate >= from && r.purchaseDate < end {
            if let a = converter.amounts(r, at: t) { x += a.net }
        }
        return x
    }
}
