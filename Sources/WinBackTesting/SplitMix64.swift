/// A small seeded generator (SplitMix64): the same seed gives the same numbers on every
/// platform, which `SystemRandomNumberGenerator` does not.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// A generator for item `index` of a world seeded with `seed`, independent of the others.
    public init(seed: UInt64, index: UInt64) {
        var g = SplitMix64(seed: seed ^ (index &* 0x9E37_79B9_7F4A_7C15))
        state = g.next() ^ index
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// An integer in `range`.
    public mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }

    /// An element chosen by weight.
    public mutating func weighted<T>(_ items: [(T, Int)]) -> T {
        let total = items.reduce(0) { $0 + $1.1 }
        var r = Int.random(in: 0..<total, using: &self)
        for (item, w) in items {
            if r < w { return item }
            r -= w
        }
        return items[items.count - 1].0
    }
}
