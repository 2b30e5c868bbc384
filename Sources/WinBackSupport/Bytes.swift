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
}
