import WinBackModel
import WinBackSupport

/// A rates file (docs/rules.md §13.1): units of the reporting currency per unit of another, as
/// exact decimals of at most nine places, undated or per month of a row's purchaseDate (a
/// month's rate wins over the undated one). The reporting currency's own rate is 1.
public struct Rates: Sendable, Equatable {
    /// Rates are kept × 10⁹: integers, so converting is exact.
    public static let scale: Int64 = 1_000_000_000

    public let currency: String
    /// Per currency: the undated rate × 10⁹.
    public private(set) var undated: [String: Int64] = [:]
    /// Per currency: month (``MonthMath/monthIndex``-style: year × 12 + month − 1) → rate × 10⁹.
    public private(set) var monthly: [String: [Int64: Int64]] = [:]

    public init(currency: String) { self.currency = currency }

    /// `currency`'s rate × 10⁹ for a row bought in `month`, nil when the file gives none.
    public func rate(_ code: String, month: Int64) -> Int64? {
        if code == currency { return Rates.scale }
        return monthly[code]?[month] ?? undated[code]
    }

    /// Whether the file names `code` at all (or it is the reporting currency).
    public func knows(_ code: String) -> Bool { code == currency || undated[code] != nil || monthly[code] != nil }

    /// The month of an instant, as the monthly rates are keyed.
    @inline(__always)
    public static func month(_ t: Int64) -> Int64 {
        let (y, m, _) = MonthMath.civilFromDays(MonthMath.dayNumber(t))
        return y * 12 + m - 1
    }

    /// Round half to even of `amount × rate / 10⁹`: an amount in milliunits of a row's currency
    /// in milliunits of the reporting currency.
    @inline(__always)
    public static func convert(_ amount: Int64, rate: Int64) -> Int128 {
        if rate == scale { return Int128(amount) }
        let p = Int128(amount) * Int128(rate)
        let s = Int128(scale)
        var q = p / s
        let r = p - q * s
        // Truncated toward zero; the remainder against half of 10⁹ decides.
        let twice = 2 * r.magnitude
        if twice > UInt128(scale) || (twice == UInt128(scale) && q & 1 != 0) { q += p < 0 ? -1 : 1 }
        return q
    }

    /// Reads a rates file's bytes: header `currency,rate` or `month,currency,rate`; throws a
    /// configuration error (exit 78) naming the line of the first problem.
    public static func parse(_ bytes: [UInt8], currency: String, path: String) throws -> Rates {
        var reader = Reader(currency: currency, path: path)
        var lines = bytes.split(separator: 10, omittingEmptySubsequences: false)
        while lines.last?.isEmpty == true { lines.removeLast() }
        for line in lines { try reader.take(line) }
        return try reader.finish()
    }

    /// The most rates a file gives (docs/rules.md §6.3): every currency for every month of 25
    /// years is under a tenth of it.
    public static let maxRates = 100_000
    /// The longest line of a rates file read: a rate line is under 40 bytes.
    public static let maxLineBytes = 1024
    /// The largest rates object fetched from S3 (whole): ``maxRates`` lines of the longest form.
    public static let maxObjectBytes = 4 << 20

    /// Reads a rates file one line at a time, so that a file of any size is read in bounded
    /// memory (docs/rules.md §6.3): a line longer than ``maxLineBytes``, or more rates than
    /// ``maxRates``, is a configuration error (78) at once. A leading byte-order mark is skipped,
    /// as in every other CSV; `\r\n` line ends are read as `\n`.
    public struct Reader {
        private var rates: Rates
        private let path: String
        private var number = 0
        private var dated: Bool?
        private var count = 0
        /// Empty lines seen since the last line with content: allowed at the end only.
        private var emptyRun = 0

        public init(currency: String, path: String) {
            rates = Rates(currency: currency)
            self.path = path
        }

        private func fail(_ line: Int, _ why: String) -> WinBackError {
            WinBackError(.configuration, "rates file line \(line): \(why)", path: path)
        }

        /// Line `line` (from 1) longer than ``maxLineBytes``, seen as it is read.
        public func tooLong(line: Int) -> WinBackError {
            fail(line, "longer than \(maxLineBytes) bytes: not a rates file")
        }

        /// One line's bytes, without its `\n`.
        public mutating func take<C: Collection>(_ bytes: C) throws where C.Element == UInt8 {
            number += 1
            var line = Array(bytes)
            if line.last == 13 { line.removeLast() }
            if number == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
            guard line.count <= maxLineBytes else { throw tooLong(line: number) }
            if line.isEmpty {
                emptyRun += 1
                return
            }
            if emptyRun > 0 {
                guard let dated else { throw fail(1, "expected the header currency,rate or month,currency,rate") }
                throw fail(number - emptyRun, "expected \(dated ? 3 : 2) fields")
            }
            guard let dated else {
                guard line.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
                    throw fail(1, "expected the header currency,rate or month,currency,rate")
                }
                switch String(decoding: line, as: UTF8.self) {
                case "currency,rate": self.dated = false
                case "month,currency,rate": self.dated = true
                default: throw fail(1, "expected the header currency,rate or month,currency,rate")
                }
                return
            }
            let n = number
            count += 1
            guard count <= maxRates else { throw fail(n, "more than \(maxRates) rates: not a rates file") }
            let cells = String(decoding: line, as: UTF8.self).split(separator: ",", omittingEmptySubsequences: false)
                .map(String.init)
            guard cells.count == (dated ? 3 : 2) else { throw fail(n, "expected \(dated ? 3 : 2) fields") }
            let code = cells[dated ? 1 : 0]
            guard MoneySettings.isCurrency(code) else {
                throw fail(n, "'\(ControlEscape.escaped(code.prefix(20)))' is not a currency (three capital letters)")
            }
            guard let rate = Rates.decimal(cells[dated ? 2 : 1]) else {
                throw fail(
                    n,
                    "'\(ControlEscape.escaped(cells[dated ? 2 : 1].prefix(40)))' is not a rate"
                        + " (a decimal of at most 9 places, from 0 to below 10000000)")
            }
            if dated && !cells[0].isEmpty {
                guard let month = Rates.month(cells[0]) else {
                    throw fail(n, "'\(ControlEscape.escaped(cells[0].prefix(20)))' is not a month YYYY-MM")
                }
                guard rates.monthly[code]?[month] == nil else {
                    throw fail(n, "a second rate for \(code) in \(cells[0])")
                }
                rates.monthly[code, default: [:]][month] = rate
            } else {
                guard rates.undated[code] == nil else { throw fail(n, "a second undated rate for \(code)") }
                rates.undated[code] = rate
            }
        }

        /// The rates read; a file without a header is a configuration error (78).
        public func finish() throws -> Rates {
            guard dated != nil else { throw fail(1, "empty; expected a header currency,rate") }
            return rates
        }
    }

    /// A decimal of at most nine places, 0 ≤ rate < 10⁷, × 10⁹; nil when it is not one. The bound
    /// keeps a converted price below 2⁹⁰ milliunits, so sums of any run fit in 128 bits.
    static func decimal(_ s: String) -> Int64? {
        let parts = s.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 7,
            whole.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 })
        else { return nil }
        let fraction = parts.count > 1 ? parts[1] : ""
        guard parts.count == 1 || !fraction.isEmpty, fraction.count <= 9,
            fraction.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 })
        else { return nil }
        guard let w = Int64(whole), let f = Int64(fraction + String(repeating: "0", count: 9 - fraction.count)) else {
            return nil
        }
        let (m, o1) = w.multipliedReportingOverflow(by: scale)
        let (v, o2) = m.addingReportingOverflow(f)
        return o1 || o2 ? nil : v
    }

    /// `YYYY-MM` as year × 12 + month − 1.
    static func month(_ s: String) -> Int64? {
        let u = Array(s.utf8)
        guard u.count == 7, u[4] == 45,
            u.enumerated().allSatisfy({ $0.offset == 4 || ($0.element >= 48 && $0.element <= 57) })
        else { return nil }
        let y = Int64(String(decoding: u[0..<4], as: UTF8.self))!
        let m = Int64(String(decoding: u[5..<7], as: UTF8.self))!
        guard y >= 1970, (1...12).contains(m) else { return nil }
        return y * 12 + m - 1
    }
}
