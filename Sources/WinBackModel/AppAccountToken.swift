/// An `appAccountToken` as 128 bits, without a string table entry in the common case.
///
/// Nearly every customer has a token of their own, so interning them would fill the string
/// table with a string per customer. A token is a UUID, written back as it was read (docs/rules.md
/// §2.1: any case). One whose hex digits are all lowercase or all uppercase is kept as its
/// value and that case; a token of mixed case is interned. Each token string has exactly one
/// representation, so tokens compare equal exactly when the strings do.
public struct AppAccountToken: Hashable, Sendable {
    @usableFromInline package enum Kind: UInt8, Sendable {
        case none, lowercase, uppercase
        /// `low` holds the string id.
        case interned
    }

    /// Hex digits 1–16 and 17–32, most significant first.
    @usableFromInline package var high: UInt64
    @usableFromInline package var low: UInt64
    @usableFromInline package var kind: Kind

    /// No token.
    public static let none = AppAccountToken(high: 0, low: 0, kind: .none)

    public var isNone: Bool { kind == .none }

    @inlinable package init(high: UInt64, low: UInt64, kind: Kind) {
        self.high = high
        self.low = low
        self.kind = kind
    }

    /// The token of `bytes`, which ``Identifier/isUUID(_:)`` accepts; interned in `table` only
    /// when its letters mix cases.
    @inline(__always)
    public init(uuid bytes: UnsafeRawBufferPointer, table: borrowing StringTable) {
        precondition(bytes.count == 36, "a token is a UUID")
        // The 32 digits as four words of eight: 0–7, 9–12 + 14–17, 19–22 + 24–27, 28–35.
        @inline(__always) func word(_ at: Int) -> UInt64 { bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self) }
        @inline(__always) func half(_ at: Int) -> UInt64 {
            UInt64(bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))
        }
        let words = (word(0), half(9) | half(14) << 32, half(19) | half(24) << 32, word(28))
        // Hex letters have bit 0x40 (digits do not); lowercase ones also have 0x20.
        @inline(__always) func letters(_ w: UInt64, lowercase: Bool) -> UInt64 {
            (w >> 6) & (lowercase ? w >> 5 : ~(w >> 5)) & 0x0101_0101_0101_0101
        }
        let lower =
            letters(words.0, lowercase: true) | letters(words.1, lowercase: true)
            | letters(words.2, lowercase: true) | letters(words.3, lowercase: true) != 0
        let upper =
            letters(words.0, lowercase: false) | letters(words.1, lowercase: false)
            | letters(words.2, lowercase: false) | letters(words.3, lowercase: false) != 0
        let high = AppAccountToken.hexValue(words.0) << 32 | AppAccountToken.hexValue(words.1)
        let low = AppAccountToken.hexValue(words.2) << 32 | AppAccountToken.hexValue(words.3)
        if lower && upper {
            self.init(high: 0, low: UInt64(UInt32(bitPattern: table.intern(bytes))), kind: .interned)
        } else {
            self.init(high: high, low: low, kind: upper ? .uppercase : .lowercase)
        }
    }

    /// The value of eight ASCII hex digits (either case), the first in the lowest byte.
    @inline(__always)
    static func hexValue(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        // A digit's low nibble is its value; a letter's is its value - 9.
        var v = ((w & (ones &* 0x0F)) &+ ((w >> 6) & ones) &* 9).byteSwapped
        v = (v | v >> 4) & 0x00FF_00FF_00FF_00FF
        v = (v | v >> 8) & 0x0000_FFFF_0000_FFFF
        return (v | v >> 16) & 0xFFFF_FFFF
    }

    /// The token of `s` if it is a UUID (interned in `table` when of mixed case), else nil.
    public static func parse(_ s: String, table: StringTable) -> AppAccountToken? {
        var s = s
        return s.withUTF8 { p in
            let b = UnsafeRawBufferPointer(p)
            return Identifier.isUUID(b.bytes) ? AppAccountToken(uuid: b, table: table) : nil
        }
    }

    /// Rewrites an interned token's id through `map` (after a table merge).
    @inline(__always)
    mutating func remap(_ map: Span<Int32>) {
        if kind == .interned { low = UInt64(UInt32(bitPattern: map[Int(low)])) }
    }

    /// The token's bytes, in a buffer valid during `body`; empty for no token.
    @inline(__always)
    public func withBytes<R>(in table: StringTable, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch kind {
        case .none: return body(UnsafeRawBufferPointer(start: nil, count: 0))
        case .interned: return table.withBytes(Int32(bitPattern: UInt32(truncatingIfNeeded: low)), body)
        case .lowercase, .uppercase:
            // The letters' offset past '0' + 10: 'A' or 'a'.
            let letters: UInt64 = kind == .uppercase ? 7 : 39
            return withUnsafeTemporaryAllocation(byteCount: 36, alignment: 8) { buf in
                let raw = UnsafeMutableRawBufferPointer(buf)
                let d = (
                    AppAccountToken.hexDigits(high >> 32, letters), AppAccountToken.hexDigits(high, letters),
                    AppAccountToken.hexDigits(low >> 32, letters), AppAccountToken.hexDigits(low, letters)
                )
                // 8-4-4-4-12: digits 1–8, 9–12, 13–16, 17–20, 21–32.
                raw.storeBytes(of: d.0, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: d.1), toByteOffset: 9, as: UInt32.self)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: d.1 >> 32), toByteOffset: 14, as: UInt32.self)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: d.2), toByteOffset: 19, as: UInt32.self)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: d.2 >> 32), toByteOffset: 24, as: UInt32.self)
                raw.storeBytes(of: d.3, toByteOffset: 28, as: UInt64.self)
                for i in [8, 13, 18, 23] { raw[i] = UInt8(ascii: "-") }
                return body(UnsafeRawBufferPointer(raw))
            }
        }
    }

    /// The eight hex digits of the low 32 bits of `v`, most significant first, as ASCII bytes
    /// (the first in the lowest byte): ``hexValue(_:)`` backwards; `letters` is 7 for
    /// uppercase, 39 for lowercase.
    @inline(__always)
    static func hexDigits(_ v: UInt64, _ letters: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        // A nibble a byte, the lowest nibble in the lowest byte; then the most significant first.
        var x = v & 0xFFFF_FFFF
        x = (x | x << 16) & 0x0000_FFFF_0000_FFFF
        x = (x | x << 8) & 0x00FF_00FF_00FF_00FF
        x = ((x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F).byteSwapped
        // 1 in each byte whose nibble is 10 or more: a letter.
        let letter = ((x &+ ones &* 6) >> 4) & ones
        return x &+ ones &* 0x30 &+ letter &* letters
    }

    /// Appends the token's bytes (none for no token) to `out`.
    @inline(__always)
    public func append(in table: StringTable, to out: inout [UInt8]) {
        withBytes(in: table) { out.append(contentsOf: $0) }
    }

    /// The token string, nil for no token; for the edges (output, messages).
    public func string(in table: StringTable) -> String? {
        isNone ? nil : withBytes(in: table) { String(decoding: $0, as: UTF8.self) }
    }
}
