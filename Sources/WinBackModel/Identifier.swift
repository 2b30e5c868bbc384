import WinBackSupport

/// The identifier patterns of docs/rules.md §2.1 and §2.4, checked on bytes.
public enum Identifier {
    @inlinable @inline(__always)
    package static func isAlnum(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
    }

    /// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
    @inlinable @inline(__always)
    public static func isValid(_ b: RawSpan) -> Bool {
        let count = b.byteCount
        guard count >= 1, count <= 128, isAlnum(Bytes.byte(b, 0)) else { return false }
        var i = 1
        while i + 8 <= count {
            guard idBytes8(Bytes.word64(b, i)) else { return false }
            i += 8
        }
        while i < count {
            guard isIdByte(Bytes.byte(b, i)) else { return false }
            i += 1
        }
        return true
    }

    /// Whether all eight bytes of `w` are `[A-Za-z0-9._:-]`. Bytes below 0x80 plus a constant
    /// below 0x80 never carry into the next byte, so each range test is exact per byte.
    @inlinable @inline(__always)
    package static func idBytes8(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        guard w & high == 0 else { return false }
        @inline(__always) func atLeast(_ c: UInt64) -> UInt64 { (w &+ ones &* (0x80 - c)) & high }
        let dashDot = atLeast(0x2D) & ~atLeast(0x2F)  // - .
        let digitColon = atLeast(0x30) & ~atLeast(0x3B)  // 0-9 :
        let upper = atLeast(0x41) & ~atLeast(0x5B)  // A-Z
        let underscore = atLeast(0x5F) & ~atLeast(0x60)  // _
        let lower = atLeast(0x61) & ~atLeast(0x7B)  // a-z
        return dashDot | digitColon | upper | underscore | lower == high
    }

    /// `[A-Za-z0-9._:-]`, as two 64-bit masks over ASCII (no table, no lazy global).
    @inlinable @inline(__always)
    package static func isIdByte(_ c: UInt8) -> Bool {
        let low: UInt64 = 0x07FF_6000_0000_0000  // - . 0-9 :
        let high: UInt64 = 0x07FF_FFFE_87FF_FFFE  // A-Z _ a-z
        if c < 64 { return low & (1 << UInt64(c)) != 0 }
        if c < 128 { return high & (1 << UInt64(c - 64)) != 0 }
        return false
    }

    public static func isValid(_ s: String) -> Bool {
        isValid(s.utf8.span.bytes)
    }

    /// `^[A-Za-z0-9_][A-Za-z0-9._]{0,99}$`: offer ids name files.
    public static func isOfferId(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count >= 1, b.count <= 100, isAlnum(b[0]) || b[0] == 95 else { return false }
        return b.dropFirst().allSatisfy { isAlnum($0) || $0 == 46 || $0 == 95 }
    }

    /// `^[A-Z]{3}$`
    @inlinable @inline(__always)
    public static func isStorefront(_ b: RawSpan) -> Bool {
        guard b.byteCount == 3 else { return false }
        for i in 0..<3 where !(65...90).contains(Bytes.byte(b, i)) { return false }
        return true
    }

    /// A UUID, any case: 8-4-4-4-12 hex digits.
    @inlinable @inline(__always)
    public static func isUUID(_ b: RawSpan) -> Bool {
        guard b.byteCount == 36, Bytes.byte(b, 8) == 45, Bytes.byte(b, 13) == 45, Bytes.byte(b, 18) == 45,
            Bytes.byte(b, 23) == 45
        else { return false }
        // Eight (or four) bytes at a time: 0–7, 9–12, 14–17, 19–22, 24–31, 28–35.
        return hex8(Bytes.word64(b, 0))
            && hex8(UInt64(Bytes.word32(b, 9)) | 0x3030_3030_0000_0000)
            && hex8(UInt64(Bytes.word32(b, 14)) | 0x3030_3030_0000_0000)
            && hex8(UInt64(Bytes.word32(b, 19)) | 0x3030_3030_0000_0000)
            && hex8(Bytes.word64(b, 24))
            && hex8(Bytes.word64(b, 28))
    }

    /// Whether all eight bytes of `w` are ASCII hex digits (either case). Bytes below 0x80 plus
    /// a constant below 0x80 never carry into the next byte, so each byte is tested alone.
    @inlinable @inline(__always)
    package static func hex8(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        guard w & high == 0 else { return false }
        @inline(__always) func atLeast(_ x: UInt64, _ c: UInt64) -> UInt64 { (x &+ ones &* (0x80 - c)) & high }
        let digit = atLeast(w, 0x30) & ~atLeast(w, 0x3A)
        let lower = w | ones &* 0x20
        let letter = atLeast(lower, 0x61) & ~atLeast(lower, 0x67)
        return digit | letter == high
    }
}
