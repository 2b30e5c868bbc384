import WinBackModel

/// The pipeline's `money:` block (docs/rules.md §13.1): the reporting currency, where the rates
/// are, and the horizon of the revenue uplift.
public struct MoneySettings: Sendable, Equatable {
    /// ISO 4217, three capital letters.
    public var currency: String
    /// The rates file, as written in the pipeline file (relative to its folder, or an object's URI).
    public var ratesPath: String
    /// `horizonMonths`: months of revenue counted per cohort (docs/rules.md §13.3); 1–36.
    public var horizonMonths: Int

    public init(currency: String, ratesPath: String, horizonMonths: Int = 3) {
        self.currency = currency
        self.ratesPath = ratesPath
        self.horizonMonths = horizonMonths
    }

    /// Whether `s` is a currency code: three capital letters.
    public static func isCurrency(_ s: String) -> Bool {
        s.utf8.count == 3 && s.utf8.allSatisfy { $0 >= 65 && $0 <= 90 }
    }
}
