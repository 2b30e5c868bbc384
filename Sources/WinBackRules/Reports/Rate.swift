/// Report rates (docs/rules.md §4.3): four decimals rounded half up, empty when the denominator is 0.
///
/// Computed on integers so that 1/32 is exactly 0.03125 and rounds to 0.0313 on every machine.
public enum Rate {
    /// `numerator / denominator` with four decimals, rounded half up; "" when the denominator is 0.
    public static func format(_ numerator: Int, _ denominator: Int) -> String {
        guard denominator > 0 else { return "" }
        // round(n / d × 10⁴) half up = floor((2n × 10⁴ + d) / 2d), for n, d ≥ 0.
        let scaled = (Int64(numerator) * 20_000 + Int64(denominator)) / (2 * Int64(denominator))
        let whole = scaled / 10_000
        let fraction = String(scaled % 10_000)
        return "\(whole)." + String(repeating: "0", count: 4 - fraction.count) + fraction
    }
}
