/// Decimal digits read eight at a time: export lines are full of 13-digit timestamps and
/// 16-digit ids, and a byte-at-a-time loop spends a branch on every digit.
@usableFromInline package enum Digits {
    /// The value of eight ASCII digits (the first in the lowest byte of `w`, as loaded from
    /// memory on a little-endian machine), or nil when one of the bytes is not a digit.
    @inlinable @inline(__always)
    package static func eight(_ w: UInt64) -> UInt64? {
        // Every byte 0x30...0x39: its high nibble is 3, and still 3 once 6 is added.
        let high: UInt64 = 0xF0F0_F0F0_F0F0_F0F0
        let threes: UInt64 = 0x3030_3030_3030_3030
        guard w & high == threes, (w &+ 0x0606_0606_0606_0606) & high == threes else { return nil }
        return value(ofDigitValues: w &- threes)
    }

    /// The eight-digit number whose digit values (0–9) are the bytes of `x`, the most
    /// significant in the lowest byte.
    @inlinable @inline(__always)
    static func value(ofDigitValues x: UInt64) -> UInt64 {
        let pairs = x &* 10 &+ x >> 8  // each even byte: two digits
        return
            ((pairs & 0x0000_00FF_0000_00FF) &* (100 &+ 1_000_000 << 32)
            &+ ((pairs >> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ 10_000 << 32)) >> 32
    }

    /// The leading ASCII digits of `w` (the first byte lowest, as in ``eight(_:)``): how many
    /// there are (0 to 8) and their value, in a few operations and no branch per digit.
    @inlinable @inline(__always)
    package static func leading(_ w: UInt64) -> (count: Int, value: UInt64) {
        let high: UInt64 = 0xF0F0_F0F0_F0F0_F0F0
        let threes: UInt64 = 0x3030_3030_3030_3030
        // Nonzero in a byte's high nibble where that byte is not a digit. A carry out of a byte
        // of 0xFA or more, or a borrow below, only reaches the bytes after it, which do not count.
        let notDigit = ((w & high) ^ threes) | (((w &+ 0x0606_0606_0606_0606) & high) ^ threes)
        let count = notDigit == 0 ? 8 : notDigit.trailingZeroBitCount >> 3
        if count == 0 { return (0, 0) }
        // The digits' values moved to the top bytes; the bytes below are zeros, leading zeros
        // of an eight-digit number.
        let digits = ((w &- threes) & (count == 8 ? ~0 : (1 &<< UInt64(8 * count)) &- 1)) &<< UInt64(8 * (8 - count))
        return (count, value(ofDigitValues: digits))
    }

    /// 10 to the power `k`, for k in 0...8.
    @inlinable @inline(__always)
    package static func power(_ k: Int) -> UInt64 {
        switch k {
        case 0: return 1
        case 1: return 10
        case 2: return 100
        case 3: return 1000
        case 4: return 10_000
        case 5: return 100_000
        case 6: return 1_000_000
        case 7: return 10_000_000
        default: return 100_000_000
        }
    }
}
