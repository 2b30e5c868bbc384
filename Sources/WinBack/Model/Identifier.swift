/// The identifier patterns of SPEC §2.1 and §2.4, checked on bytes.
public enum Identifier {
    @inline(__always)
    static func isAlnum(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
    }

    /// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
    @inline(__always)
    public static func isValid(_ b: UnsafeRawBufferPointer) -> Bool {
        guard b.count >= 1, b.count <= 128, isAlnum(b[0]) else { return false }
        for c in b.dropFirst() where !(isAlnum(c) || c == 46 || c == 95 || c == 58 || c == 45) {
            return false
        }
        return true
    }

    public static func isValid(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isValid(UnsafeRawBufferPointer($0)) }
    }

    /// `^[A-Za-z0-9_][A-Za-z0-9._]{0,99}$`: offer ids name files.
    public static func isOfferId(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count >= 1, b.count <= 100, isAlnum(b[0]) || b[0] == 95 else { return false }
        return b.dropFirst().allSatisfy { isAlnum($0) || $0 == 46 || $0 == 95 }
    }

    /// `^[A-Z]{3}$`
    @inline(__always)
    public static func isStorefront(_ b: UnsafeRawBufferPointer) -> Bool {
        b.count == 3 && b.allSatisfy { $0 >= 65 && $0 <= 90 }
    }

    /// A UUID, any case: 8-4-4-4-12 hex digits.
    @inline(__always)
    public static func isUUID(_ b: UnsafeRawBufferPointer) -> Bool {
        guard b.count == 36 else { return false }
        for (i, c) in b.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != 45 { return false }
            } else if !((c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)) {
                return false
            }
        }
        return true
    }
}
