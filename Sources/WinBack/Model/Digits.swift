/// Decimal digits read eight at a time: export lines are full of 13-digit timestamps and
/// 16-digit ids, and a byte-at-a-time loop spends a branch on every digit.
enum Digits {
    /// The value of eight ASCII digits (the first in the lowest byte of `w`, as loaded from
    /// memory on a little-endian machine), or nil when one of the bytes is not a digit.
    @inline(__always)
    static func eight(_ w: UInt64) -> UInt64? {
        // Every byte 0x30...0x39: its high nibble is 3, and still 3 once 6 is added.
        let high: UInt64 = 0xF0F0_F0F0_F0F0_F0F0
        let threes: UInt64 = 0x3030_3030_3030_3030
        guard w & high == threes, (w &+ 0x0606_0606_0606_0606) & high == threes else { return nil }
        var x = w &- threes
        x = x &* 10 &+ x >> 8  // each even byte: two digits
        x = ((x & 0x0000_00FF_0000_00FF) &* (100 &+ 1_000_000 << 32)
            &+ ((x >> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ 10_000 << 32)) >> 32
        return x
    }
}
