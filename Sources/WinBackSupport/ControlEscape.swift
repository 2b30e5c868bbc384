/// Control characters in text quoted from input, made visible (docs/rules.md §6): every C0
/// control (U+0000–U+001F, tab, CR and LF included) and DEL (U+007F) becomes `\xHH`, two
/// upper-case hex digits. A byte of a file name that is not UTF-8 (a ``FileName`` marker)
/// becomes `\xHH` too, so a message quoting a name shows its bytes (§6.2). Everything else,
/// backslashes too, is left as it is, so text without controls is unchanged and escaping
/// twice changes nothing.
///
/// Applied to the excerpt and reason of a reject, so that each reject is one line of
/// `rejects.csv`, and to every error message, which quotes paths, identifiers and values.
/// File names and object keys written as data use ``name(_:)``.
public enum ControlEscape {
    /// Whether `s` is a C0 control or DEL.
    @inline(__always)
    static func isControl(_ s: Unicode.Scalar) -> Bool { s.value < 0x20 || s.value == 0x7F }

    static let hex = Array("0123456789ABCDEF".unicodeScalars)

    /// Appends `\xHH`.
    @inline(__always)
    static func appendEscape(_ b: UInt8, to out: inout String.UnicodeScalarView) {
        out.append(contentsOf: ["\\", "x", hex[Int(b >> 4)], hex[Int(b & 15)]])
    }

    /// `s` with its controls (and name markers) written as `\xHH`.
    public static func escaped<S: StringProtocol>(_ s: S) -> String { escaped(s, markers: true) }

    /// Text read from an input's contents (a reject's excerpt), with only its controls written
    /// as `\xHH`: there a private-use character is text, not a byte of a name.
    public static func escapedText<S: StringProtocol>(_ s: S) -> String { escaped(s, markers: false) }

    static func escaped<S: StringProtocol>(_ s: S, markers: Bool) -> String {
        func escapes(_ c: Unicode.Scalar) -> Bool { isControl(c) || (markers && FileName.isMarker(c)) }
        guard s.unicodeScalars.contains(where: escapes) else { return String(s) }
        var out = String.UnicodeScalarView()
        for c in s.unicodeScalars {
            if isControl(c) {
                appendEscape(UInt8(c.value), to: &out)
            } else if markers && FileName.isMarker(c) {
                appendEscape(FileName.byte(ofMarker: c), to: &out)
            } else {
                out.append(c)
            }
        }
        return String(out)
    }

    /// A file name or object key as it is shown and written (docs/rules.md §6.2): the bytes it
    /// stands for (``FileName``), valid UTF-8 kept as its characters, and as `\xHH` each
    /// control byte, DEL, byte that is not UTF-8 and byte of a ``FileName`` marker scalar. A
    /// backslash that would read as the start of an escape (`\` then `x` and two hex digits)
    /// is written `\x5C`, so the text names one name: ``nameBytes(_:)`` gives its bytes back.
    ///
    /// The result holds no control and no marker, so ``escaped(_:)`` leaves it as it is; it is
    /// not idempotent itself (an escape's backslash would be escaped again): apply it once, to
    /// the name.
    public static func name(_ name: String) -> String {
        let bytes = FileName.bytes(name)
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) { return name }
        var out = String.UnicodeScalarView()
        var i = 0
        while i < bytes.count {
            if let (s, length) = FileName.scalar(in: bytes, at: i), !isControl(s), !FileName.isMarker(s) {
                if s == "\\" && startsEscape(bytes, at: i) {
                    appendEscape(bytes[i], to: &out)
                } else {
                    out.append(s)
                }
                i += length
            } else {
                appendEscape(bytes[i], to: &out)
                i += 1
            }
        }
        return String(out)
    }

    /// The bytes of the name that ``name(_:)`` wrote as `shown`: each `\xHH` (either case) is
    /// its byte, everything else its UTF-8.
    public static func nameBytes(_ shown: String) -> [UInt8] {
        let u = Array(shown.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        var i = 0
        while i < u.count {
            if startsEscape(u, at: i), let h = hexValue(u[i + 2]), let l = hexValue(u[i + 3]) {
                out.append(h << 4 | l)
                i += 4
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return out
    }

    /// Whether `bytes` holds `\x` and two hex digits at `i`.
    static func startsEscape(_ bytes: [UInt8], at i: Int) -> Bool {
        i + 3 < bytes.count && bytes[i] == UInt8(ascii: "\\") && bytes[i + 1] == UInt8(ascii: "x")
            && hexValue(bytes[i + 2]) != nil && hexValue(bytes[i + 3]) != nil
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}
