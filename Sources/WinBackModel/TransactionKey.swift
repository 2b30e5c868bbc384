import Foundation
import WinBackSupport

/// A `transactionId` or `originalTransactionId` as a 64-bit key, without a string table entry
/// in the common case.
///
/// Every transaction (and nearly every customer) has its own id, so interning them would fill
/// the string table with millions of strings that are only ever compared. App Store ids are
/// decimal numbers: a canonical decimal (1–18 digits, no leading zero) is kept as its value
/// (≥ 0); any other id is interned and kept as -(string id + 1). Each id string has exactly
/// one key, so keys compare equal exactly when the strings do.
public struct TransactionKey: Hashable, Sendable {
    public var raw: Int64

    @inlinable package init(raw: Int64) { self.raw = raw }

    /// The key of an id string, interning it in `table` only when it is not a canonical decimal.
    @inlinable @inline(__always)
    public init(_ bytes: UnsafeRawBufferPointer, table: StringTable) {
        if let v = TransactionKey.decimal(bytes) {
            raw = v
        } else {
            raw = -(Int64(table.intern(bytes)) + 1)
        }
    }

    public init(_ s: String, table: StringTable) {
        var s = s
        self = s.withUTF8 { TransactionKey(UnsafeRawBufferPointer($0), table: table) }
    }

    /// The key of `s` if it is already known (a canonical decimal always is).
    public static func lookup(_ s: String, in table: StringTable) -> TransactionKey? {
        var s = s
        return s.withUTF8 { p -> TransactionKey? in
            let bytes = UnsafeRawBufferPointer(p)
            if let v = decimal(bytes) { return TransactionKey(raw: v) }
            return table.find(bytes).map { TransactionKey(raw: -(Int64($0) + 1)) }
        }
    }

    /// The value of a canonical decimal of at most 18 digits, or nil.
    @inlinable @inline(__always)
    package static func decimal(_ p: UnsafeRawBufferPointer) -> Int64? {
        let n = p.count
        guard n > 0, n <= 18 else { return nil }
        let first = p[0]
        if first == UInt8(ascii: "0") { return n == 1 ? 0 : nil }
        var v: Int64 = 0
        var i = 0
        while i + 8 <= n {
            guard let e = Digits.eight(p.loadUnaligned(fromByteOffset: i, as: UInt64.self)) else { return nil }
            v = v &* 100_000_000 &+ Int64(e)
            i += 8
        }
        while i < n {
            let d = p[i] &- 48
            guard d < 10 else { return nil }
            v = v &* 10 &+ Int64(d)
            i += 1
        }
        return v
    }

    /// Rewrites an interned id through `map` (after a table merge).
    @inlinable @inline(__always)
    package mutating func remap(_ map: UnsafeBufferPointer<Int32>) {
        if raw < 0 { raw = -(Int64(map[Int(-raw - 1)]) + 1) }
    }

    /// ``remap(_:)`` through a span of the map.
    @inline(__always)
    package mutating func remap(_ map: Span<Int32>) {
        if raw < 0 { raw = -(Int64(map[Int(-raw - 1)]) + 1) }
    }

    /// The id as bytes, in a buffer valid during `body`. Inlinable, so that each caller gets
    /// it specialized for its `body`: a generic call of it costs more than the bytes it gives.
    @inlinable @inline(__always)
    public func withBytes<R>(in table: StringTable, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withBytes(in: table.reader, body)
    }

    /// ``withBytes(in:_:)`` through a table's reader (no reference to the table taken).
    @inlinable @inline(__always)
    public func withBytes<R>(in strings: StringTable.Reader, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if raw < 0 { return body(strings.bytes(Int32(-raw - 1))) }
        return withUnsafeTemporaryAllocation(byteCount: 20, alignment: 1) { buf in
            var v = raw
            var i = 20
            repeat {
                i -= 1
                buf[i] = UInt8(48 + v % 10)
                v /= 10
            } while v > 0
            return body(UnsafeRawBufferPointer(rebasing: buf[i..<20]))
        }
    }

    /// Appends the id's bytes to `out`.
    @inlinable @inline(__always)
    public func append(in table: StringTable, to out: inout [UInt8]) {
        withBytes(in: table) { out.append(contentsOf: $0) }
    }

    /// The id string; for the edges (output, messages), not the hot path.
    public func string(in table: StringTable) -> String {
        withBytes(in: table) { String(decoding: $0, as: UTF8.self) }
    }

    /// Bytewise order of the id strings (docs/rules.md §3 orders a customer's rows by it on a tie).
    @inlinable @inline(__always)
    public static func compare(_ a: TransactionKey, _ b: TransactionKey, in table: StringTable) -> Int {
        compare(a, b, in: table.reader)
    }

    /// ``compare(_:_:in:)`` through a table's reader.
    @inlinable @inline(__always)
    public static func compare(_ a: TransactionKey, _ b: TransactionKey, in strings: StringTable.Reader) -> Int {
        if a.raw == b.raw { return 0 }
        if a.raw >= 0 && b.raw >= 0 {
            // Two decimals without leading zeros: of equal length they order as numbers.
            let la = digits(a.raw)
            let lb = digits(b.raw)
            if la == lb { return a.raw < b.raw ? -1 : 1 }
        }
        return a.withBytes(in: strings) { pa in b.withBytes(in: strings) { pb in Bytes.compare(pa, pb) } }
    }

    @inlinable @inline(__always)
    static func digits(_ v: Int64) -> Int {
        var n = 1
        var x = v
        while x >= 10 {
            x /= 10
            n += 1
        }
        return n
    }
}

extension StringTable {
    /// The string of a transaction key.
    public func string(_ key: TransactionKey) -> String { key.string(in: self) }

    /// Bytewise order of two transaction ids.
    @inlinable @inline(__always)
    public func less(_ a: TransactionKey, _ b: TransactionKey) -> Bool {
        TransactionKey.compare(a, b, in: self) < 0
    }
}

extension StringTable.Reader {
    /// Bytewise order of two transaction ids, as their table orders them.
    @inlinable @inline(__always)
    public func less(_ a: TransactionKey, _ b: TransactionKey) -> Bool {
        TransactionKey.compare(a, b, in: self) < 0
    }
}
