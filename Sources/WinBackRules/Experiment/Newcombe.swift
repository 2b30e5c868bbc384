import Foundation

/// The 95 % intervals that measure a holdout experiment: Wilson's score interval for one
/// proportion, and Newcombe's hybrid score interval (his method 10) for the difference of two
/// independent proportions, the treatment's less the holdout's.
///
/// For x of n, with z = 1.959963984540054: a = n + z², c = (x + z²/2) / a,
/// h = z × sqrt(x × (n − x) / n + z²/4) / a, and the interval is [c − h, c + h]. For the
/// difference d = p1 − p0 of x1 of n1 and x0 of n0, with (l1, u1) and (l0, u0) their Wilson
/// intervals: low = d − sqrt((p1 − l1)² + (u0 − p0)²), high = d + sqrt((u1 − p1)² + (p0 − l0)²).
package enum Newcombe {
    /// The normal quantile of a two-sided 95 % interval.
    package static let z = 1.959963984540054

    /// Wilson's interval for `x` of `n`; nil when `n` is 0 (or the counts are impossible).
    package static func wilson(_ x: Int, of n: Int) -> (low: Double, high: Double)? {
        guard n > 0, x >= 0, x <= n else { return nil }
        let (x, n) = (Double(x), Double(n))
        let a = n + z * z
        let c = (x + z * z / 2) / a
        let h = z * (x * (n - x) / n + z * z / 4).squareRoot() / a
        return (c - h, c + h)
    }

    /// The difference of `x1` of `n1` (treatment) and `x0` of `n0` (holdout), with its
    /// interval; nil unless both arms have someone.
    package static func difference(
        _ x1: Int, of n1: Int, less x0: Int, of n0: Int
    ) -> (lift: Double, low: Double, high: Double)? {
        guard let (l1, u1) = wilson(x1, of: n1), let (l0, u0) = wilson(x0, of: n0) else { return nil }
        let p1 = Double(x1) / Double(n1)
        let p0 = Double(x0) / Double(n0)
        let d = p1 - p0
        let low = d - ((p1 - l1) * (p1 - l1) + (u0 - p0) * (u0 - p0)).squareRoot()
        let high = d + ((u1 - p1) * (u1 - p1) + (p0 - l0) * (p0 - l0)).squareRoot()
        return (d, low, high)
    }
}
