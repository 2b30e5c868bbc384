/// Control characters in text quoted from input, made visible (docs/rules.md §6): every C0
/// control (U+0000–U+001F, tab, CR and LF included) and DEL (U+007F) becomes `\xHH`, two
/// upper-case hex digits. Everything else, backslashes too, is left as it is, so text without
/// controls is unchanged and escaping twice changes nothing.
///
/// Applied to the excerpt and reason of a reject, so that each reject is one line of
/// `rejects.csv`, and to every error message, which quotes paths, identifiers and values.
public enum ControlEscape {
    /// Whether `s` is a C0 control or DEL.
    @inline(__always)
    static func isControl(_ s: Unicode.Scalar) -> Bool { s.value < 0x20 || s.value == 0x7F }

    /// `s` with its controls written as `\xHH`.
    public static func escaped<S: StringProtocol>(_ s: S) -> String {
        guard s.unicodeScalars.contains(where: isControl) else { return String(s) }
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        var out = String.UnicodeScalarView()
        for c in s.unicodeScalars {
            if isControl(c) {
                out.append(contentsOf: ["\\", "x", hex[Int(c.value >> 4)], hex[Int(c.value & 15)]])
            } else {
                out.append(c)
            }
        }
        return String(out)
    }
}
