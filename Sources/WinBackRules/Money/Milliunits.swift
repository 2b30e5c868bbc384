/// An exact sum of amounts in milliunits (docs/rules.md §13.1): 128 bits, so that no run's sums
/// overflow and every way of summing them (threads, shards, nights) gives the same value.
/// Kept in JSON (a shard's reports) as its decimal string.
public struct Milliunits: Sendable, Equatable, Hashable, Codable, AdditiveArithmetic {
    public var value: Int128

    public init(_ value: Int128) { self.value = value }
    public init(_ value: Int64) { self.value = Int128(value) }

    public static let zero = Milliunits(Int128(0))

    public static func + (a: Milliunits, b: Milliunits) -> Milliunits { Milliunits(a.value + b.value) }
    public static func - (a: Milliunits, b: Milliunits) -> Milliunits { Milliunits(a.value - b.value) }

    public init(from decoder: Decoder) throws {
        let s = try decoder.singleValueContainer().decode(String.self)
        guard let v = Int128(s) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an amount"))
        }
        value = v
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(String(value))
    }

    /// In units with three decimals (`12.990`, `-0.500`).
    public var units: String { Milliunits.units(value) }

    /// `v` milliunits in units with three decimals.
    public static func units(_ v: Int128) -> String {
        let magnitude = v.magnitude
        let whole = magnitude / 1000
        let fraction = String(magnitude % 1000)
        return (v < 0 ? "-" : "") + "\(whole)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// `numerator / denominator` milliunits in units with three decimals, rounded half away
    /// from zero (`-0.000` as `0.000`); empty when `denominator` is 0.
    public static func quotient(_ numerator: Int128, _ denominator: Int) -> String {
        guard denominator > 0 else { return "" }
        let d = UInt128(denominator)
        let n = numerator.magnitude
        // round(n / d) half up on magnitudes = (2n + d) / 2d; n stays far below 2¹²⁷.
        let q = (2 * n + d) / (2 * d)
        return units(numerator < 0 && q > 0 ? -Int128(q) : Int128(q))
    }

    /// `x` milliunits (any real) in units with three decimals, half away from zero, `-0.000`
    /// as `0.000`: intervals, which are not exact.
    public static func units(double x: Double) -> String {
        let r = (abs(x)).rounded(.toNearestOrAwayFromZero)
        guard r.isFinite, r < 1e36 else { return x < 0 ? "-inf" : "inf" }
        let m = Int128(r)
        return units(x < 0 && m > 0 ? -m : m)
    }

    /// The decimals a currency is written with (ISO 4217's minor unit): 0 for the yen, the won
    /// and the others without a minor unit, 3 for the dinars of Bahrain, Iraq, Jordan, Kuwait,
    /// Libya and Tunisia and Oman's rial, else 2.
    public static func decimals(_ currency: String) -> Int {
        switch currency {
        case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF",
            "XOF", "XPF":
            return 0
        case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND": return 3
        default: return 2
        }
    }

    /// `x` milliunits as a person reads an amount of `currency`: its usual decimals (docs/rules.md
    /// §10.10), rounded half away from zero; the CSV files keep three.
    public static func display(double x: Double, currency: String) -> String {
        let d = decimals(currency)
        let step = [1000.0, 100.0, 10.0, 1.0][d]
        let r = (abs(x) / step).rounded(.toNearestOrAwayFromZero)
        guard r.isFinite, r < 1e33 else { return x < 0 ? "-inf" : "inf" }
        let m = Int128(r)
        let digits = String(m)
        let padded = String(repeating: "0", count: max(0, d + 1 - digits.count)) + digits
        let whole = padded.dropLast(d)
        let text = d == 0 ? String(whole) : whole + "." + padded.suffix(d)
        return (x < 0 && m > 0 ? "-" : "") + text
    }

    /// A three-decimal amount as the CSV files write it (`12.345`), as ``display(double:currency:)``
    /// shows it; the text itself when it is not a number.
    public static func display(_ text: String, currency: String) -> String {
        // Exactly: "1.005" is 1005 milliunits, not a double just below them.
        let negative = text.hasPrefix("-")
        let digits = negative ? text.dropFirst() : Substring(text)
        let parts = digits.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 30, whole.allSatisfy(\.isASCII),
            let w = Int128(whole),
            parts.count == 1 || (parts[1].count <= 3 && parts[1].allSatisfy { $0.isASCII && $0.isNumber })
        else { return text }
        let fraction = parts.count > 1 ? String(parts[1]) + String(repeating: "0", count: 3 - parts[1].count) : "000"
        guard let f = Int128(fraction) else { return text }
        let milli = w * 1000 + f
        return display(milliunits: negative ? -milli : milli, currency: currency)
    }

    /// `m` milliunits in `currency`'s usual decimals, rounded half away from zero.
    public static func display(milliunits m: Int128, currency: String) -> String {
        let d = decimals(currency)
        let step = Int128([1000, 100, 10, 1][d])
        let magnitude = m.magnitude
        let q = (magnitude + UInt128(step) / 2) / UInt128(step)
        let digits = String(q)
        let padded = String(repeating: "0", count: max(0, d + 1 - digits.count)) + digits
        let whole = padded.dropLast(d)
        let text = d == 0 ? String(whole) : whole + "." + padded.suffix(d)
        return (m < 0 && q > 0 ? "-" : "") + text
    }
}
