import CWinBackShims
import Foundation

/// Interns byte strings to dense `Int32` ids, without allocating per lookup.
///
/// The hot representation of a transaction holds ids, not Strings. Each reader has its own
/// table (no locks); tables are merged into one after reading, and the merged ids compare by
/// their bytes where the rules ask for a bytewise order.
// Written by one thread at a time (its reader, or the merger under its lock); shared only to be read.
public final class StringTable: @unchecked Sendable {
    @exclusivity(unchecked) private(set) var arena: [UInt8] = []
    @exclusivity(unchecked) private(set) var starts: [Int32] = [0]
    /// Open addressing: each slot holds a string's hash (high half) and id (low half), so a
    /// probe compares hashes without touching `hashes`; ``empty`` when free.
    @exclusivity(unchecked) private var slots: [UInt64]
    @exclusivity(unchecked) private var hashes: [UInt32] = []
    private static let empty = UInt64.max
    @exclusivity(unchecked) private var mask: Int

    public init(capacity: Int = 1024) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        slots = Array(repeating: StringTable.empty, count: n)
        mask = n - 1
        arena.reserveCapacity(capacity * 12)
    }

    /// Number of distinct strings.
    public var count: Int { starts.count - 1 }

    /// The stored ``hash(_:)`` of `id`'s bytes.

    @inline(__always)
    static func hash(_ p: UnsafeRawBufferPointer) -> UInt32 {
        // Eight bytes at a time, multiply-and-fold: ids are 10–40 bytes, so a handful of rounds.
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(p.count)
        var i = 0
        while i + 8 <= p.count {
            h = (h ^ p.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xBF58_476D_1CE4_E5B9
            h ^= h >> 29
            i += 8
        }
        var tail: UInt64 = 0
        if i < p.count {
            if p.count >= 8 {
                // The last eight bytes, overlapping the word before: no loop over the rest.
                tail = p.loadUnaligned(fromByteOffset: p.count - 8, as: UInt64.self)
            } else {
                var shift: UInt64 = 0
                while i < p.count {
                    tail |= UInt64(p[i]) << shift
                    shift += 8
                    i += 1
                }
            }
        }
        h = (h ^ tail) &* 0x94D0_49BB_1331_11EB
        h ^= h >> 32
        return UInt32(truncatingIfNeeded: h)
    }

    /// The id of `bytes`, adding it when new.
    @inline(__always)
    public func intern(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        intern(bytes, hash: StringTable.hash(bytes))
    }

    /// The id of `bytes`, whose ``hash(_:)`` is `h`, adding it when new.
    @inline(__always)
    func intern(_ bytes: UnsafeRawBufferPointer, hash h: UInt32) -> Int32 {
        var i = Int(h) & mask
        while true {
            let slot = slots[i]
            if slot == StringTable.empty { break }
            if UInt32(truncatingIfNeeded: slot >> 32) == h, case let id = Int32(truncatingIfNeeded: slot),
                equals(id, bytes)
            {
                return id
            }
            i = (i + 1) & mask
        }
        let id = Int32(count)
        arena.append(contentsOf: bytes)
        starts.append(Int32(arena.count))
        hashes.append(h)
        slots[i] = StringTable.slot(h, id)
        if count * 2 > slots.count { grow() }
        return id
    }

    public func intern(_ s: String) -> Int32 {
        var s = s
        return s.withUTF8 { intern(UnsafeRawBufferPointer($0)) }
    }

    /// The id of `s` when present.
    public func lookup(_ s: String) -> Int32? {
        var s = s
        return s.withUTF8 { find(UnsafeRawBufferPointer($0)) }
    }

    /// The id of `bytes` when present; adds nothing.
    @inline(__always)
    public func find(_ bytes: UnsafeRawBufferPointer) -> Int32? {
        let h = StringTable.hash(bytes)
        var i = Int(h) & mask
        while true {
            let slot = slots[i]
            if slot == StringTable.empty { return nil }
            if UInt32(truncatingIfNeeded: slot >> 32) == h, case let id = Int32(truncatingIfNeeded: slot),
                equals(id, bytes)
            {
                return id
            }
            i = (i + 1) & mask
        }
    }

    @inline(__always)
    private static func slot(_ h: UInt32, _ id: Int32) -> UInt64 { UInt64(h) << 32 | UInt64(UInt32(bitPattern: id)) }

    /// Whether string `id` is exactly `bytes`.
    @inline(__always)
    package func equals(_ id: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        let s = Int(starts[Int(id)])
        let e = Int(starts[Int(id) + 1])
        guard e - s == bytes.count else { return false }
        return arena.withUnsafeBytes { a in StringTable.same(a.baseAddress! + s, bytes.baseAddress, bytes.count) }
    }

    /// Bytewise equality of two buffers of `n` bytes, eight at a time: ids are short, and a
    /// call into memcmp costs more than comparing them. From eight bytes on, the last word
    /// overlaps the one before rather than ending in a byte loop.
    @inline(__always)
    package static func same(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer?, _ n: Int) -> Bool {
        guard n > 0, let b else { return true }
        @inline(__always) func word(_ p: UnsafeRawPointer, _ i: Int) -> UInt64 {
            p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        }
        if n >= 8 {
            var i = 0
            while i + 8 < n {
                if word(a, i) != word(b, i) { return false }
                i += 8
            }
            return word(a, n - 8) == word(b, n - 8)
        }
        var i = 0
        while i < n {
            if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
            i += 1
        }
        return true
    }

    private func grow() {
        let n = slots.count * 2
        slots = Array(repeating: StringTable.empty, count: n)
        mask = n - 1
        for id in 0..<count {
            var i = Int(hashes[id]) & mask
            while slots[i] != StringTable.empty { i = (i + 1) & mask }
            slots[i] = StringTable.slot(hashes[id], Int32(id))
        }
    }

    /// Calls `body` with the bytes of `id`.
    @inline(__always)
    public func withBytes<R>(_ id: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let s = Int(starts[Int(id)])
        let e = Int(starts[Int(id) + 1])
        return arena.withUnsafeBytes { a in body(UnsafeRawBufferPointer(rebasing: a[s..<e])) }
    }

    /// The string of `id`; for the edges (output, messages), not the hot path.
    public func string(_ id: Int32) -> String {
        withBytes(id) { String(decoding: $0, as: UTF8.self) }
    }

    /// Appends the bytes of `id` to `out`.
    @inline(__always)
    public func append(_ id: Int32, to out: inout [UInt8]) {
        let s = Int(starts[Int(id)])
        let e = Int(starts[Int(id) + 1])
        out.append(contentsOf: arena[s..<e])
    }

    /// Bytewise comparison of two ids' strings.
    @inline(__always)
    public func less(_ a: Int32, _ b: Int32) -> Bool {
        if a == b { return false }
        return compare(a, b) < 0
    }

    @inline(__always)
    public func compare(_ a: Int32, _ b: Int32) -> Int {
        let sa = Int(starts[Int(a)])
        let ea = Int(starts[Int(a) + 1])
        let sb = Int(starts[Int(b)])
        let eb = Int(starts[Int(b) + 1])
        let la = ea - sa
        let lb = eb - sb
        let r = arena.withUnsafeBytes { p -> Int32 in
            let n = min(la, lb)
            return n == 0 ? 0 : memcmp(p.baseAddress! + sa, p.baseAddress! + sb, n)
        }
        if r != 0 { return Int(r) }
        return la - lb
    }

    /// A new table holding this table's strings with new ids: string `order[k]` of this table
    /// becomes id k. `order` lists every id once. The strings are known to be distinct, so
    /// each is placed by its stored hash without comparing bytes.
    package func reordered(_ order: [Int32]) -> StringTable {
        precondition(order.count == count, "a reordering lists every id once")
        let out = StringTable(capacity: count)
        out.arena.reserveCapacity(arena.count)
        out.starts.reserveCapacity(count + 1)
        out.hashes.reserveCapacity(count)
        let mask = out.mask
        arena.withUnsafeBytes { a in
            out.slots.withUnsafeMutableBufferPointer { slots in
                for (k, old) in order.enumerated() {
                    let s = Int(starts[Int(old)])
                    let e = Int(starts[Int(old) + 1])
                    out.arena.append(contentsOf: UnsafeRawBufferPointer(rebasing: a[s..<e]))
                    out.starts.append(Int32(out.arena.count))
                    let h = hashes[Int(old)]
                    out.hashes.append(h)
                    var i = Int(h) & mask
                    while slots[i] != StringTable.empty { i = (i + 1) & mask }
                    slots[i] = StringTable.slot(h, Int32(k))
                }
            }
        }
        return out
    }

    /// Interns every string of `other`, returning the map from its ids to this table's ids.
    ///
    /// The strings are known in advance, so the slot of each is fetched a few strings ahead:
    /// the probes of a large table then overlap instead of waiting on memory one by one.
    public func merge(_ other: StringTable) -> [Int32] {
        var map = [Int32](repeating: 0, count: other.count)
        let ahead = 8
        other.arena.withUnsafeBytes { a in
            for id in 0..<other.count {
                if id + ahead < other.count {
                    let h = Int(other.hashes[id + ahead]) & mask
                    slots.withUnsafeBufferPointer { winback_prefetch($0.baseAddress! + h) }
                }
                let s = Int(other.starts[id])
                let e = Int(other.starts[id + 1])
                map[id] = intern(UnsafeRawBufferPointer(rebasing: a[s..<e]), hash: other.hashes[id])
            }
        }
        return map
    }
}
