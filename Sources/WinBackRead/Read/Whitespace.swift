/// White space, the one test of it in the read stage: JSON's (RFC 8259: space, tab, line feed,
/// carriage return), which is also what a blank line or CSV record holds at most.
enum Whitespace {
    /// One comparison for most bytes (those that follow a token in an export line are never
    /// white space), four for the few at or below a space.
    @inline(__always)
    static func contains(_ c: UInt8) -> Bool {
        c <= 0x20 && (c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D)
    }

    /// Bytes of only white space, or none: a blank line (or CSV record), which is skipped and
    /// not counted, though it keeps its line number.
    @inline(__always)
    static func isBlank(_ bytes: some Collection<UInt8>) -> Bool {
        for c in bytes where !contains(c) { return false }
        return true
    }
}
