import Glibc

/// The one bytewise comparison of the code base: of segment rows, string tables' entries,
/// transaction ids, shard outputs' lines (docs/rules.md §4.1's customer order).
public enum Bytes {
    /// Bytewise order of `a` and `b`, the shorter first when one begins the other: negative,
    /// zero or positive.
    @inlinable @inline(__always)
    public static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        let r = n == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, n)
        return r != 0 ? Int(r) : a.count - b.count
    }

    /// Bytewise order of two byte arrays (``compare(_:_:)-(UnsafeRawBufferPointer,_)``).
    @inlinable @inline(__always)
    public static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in compare(pa, pb) } }
    }

    /// Bytewise order of a view and an array.
    @inlinable @inline(__always)
    public static func compare(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
        b.withUnsafeBytes { compare(a, $0) }
    }

    /// Byte `i` of `bytes`, checked to be inside it.
    @inlinable @inline(__always)
    public static func byte(_ bytes: RawSpan, _ i: Int) -> UInt8 {
        bytes.unsafeLoad(fromByteOffset: i, as: UInt8.self)
    }

    /// The eight bytes of `bytes` at `i`, any alignment, checked to be inside it.
    @inlinable @inline(__always)
    public static func word64(_ bytes: RawSpan, _ i: Int) -> UInt64 {
        bytes.unsafeLoadUnaligned(fromByteOffset: i, as: UInt64.self)
    }

    /// The four bytes of `bytes` at `i`, any alignment, checked to be inside it.
    @inlinable @inline(__always)
    public static func word32(_ bytes: RawSpan, _ i: Int) -> UInt32 {
        bytes.unsafeLoadUnaligned(fromByteOffset: i, as: UInt32.self)
    }

    /// The first index at or after `from` where `bytes` holds `byte`, nil when none: `memchr`,
    /// which reads many bytes a step.
    @inlinable
    public static func firstIndex(of byte: UInt8, in bytes: Span<UInt8>, from: Int) -> Int? {
        guard from < bytes.count else { return nil }
        return bytes.withUnsafeBufferPointer { b in
            guard let base = b.baseAddress, let p = memchr(base + from, Int32(byte), b.count - from) else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(p))
        }
    }

    /// Whether `a` and `b` hold the same bytes.
    @inlinable
    public static func equal(_ a: Span<UInt8>, _ b: Span<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0 else { return true }
        return a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0 }
        }
    }

    /// `bytes` fed to `hasher`, as `Hasher.combine(bytes:)` does.
    @inlinable
    public static func combine(_ bytes: Span<UInt8>, into hasher: inout Hasher) {
        bytes.withUnsafeBufferPointer { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// A copy of `bytes`.
    @inlinable
    public static func array(_ bytes: Span<UInt8>) -> [UInt8] {
        bytes.withUnsafeBufferPointer { Array($0) }
    }
}
