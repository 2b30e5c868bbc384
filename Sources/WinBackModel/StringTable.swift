import CWinBackShims
import Foundation
import WinBackSupport

/// Interns byte strings to dense `Int32` ids, without allocating per lookup.
///
/// The hot representation of a transaction holds ids, not Strings. Each reader has its own
/// table (no locks); tables are merged into one after reading, and the merged ids compare by
/// their bytes where the rules ask for a bytewise order.
// Written by one thread at a time (its reader, or the merger under its lock); shared only to be read.
public final class StringTable: @unchecked Sendable {
    /// The strings' bytes one after another, `arenaCount` of `arenaCapacity` in use; string
    /// `id` is `arena[starts[id]..<starts[id + 1]]`, and `hashes[id]` its ``hash(_:)``. Plain
    /// pointers rather than arrays: reading one takes no reference, so the threads that read a
    /// table at once (evaluation, writing) never contend on a reference count, and the readers
    /// can be inlined into other modules.
    @usableFromInline @exclusivity(unchecked) var arena: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var arenaCount = 0
    @exclusivity(unchecked) private var arenaCapacity: Int
    @usableFromInline @exclusivity(unchecked) var starts: UnsafeMutablePointer<Int32>
    @exclusivity(unchecked) private var hashes: UnsafeMutablePointer<UInt32>
    /// Room in `starts` (one more than in `hashes`).
    @exclusivity(unchecked) private var idCapacity: Int
    /// Number of distinct strings.
    @exclusivity(unchecked) public private(set) var count = 0
    /// Open addressing: each slot holds a string's hash (high half) and id (low half), so a
    /// probe compares hashes without touching `hashes`; ``empty`` when free. `mask + 1` slots.
    @exclusivity(unchecked) private var slots: UnsafeMutablePointer<UInt64>
    private static let empty = UInt64.max
    @exclusivity(unchecked) private var mask: Int

    public init(capacity: Int = 1024) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        slots = .allocate(capacity: n)
        slots.initialize(repeating: StringTable.empty, count: n)
        mask = n - 1
        arenaCapacity = max(16, capacity * 12)
        arena = .allocate(capacity: arenaCapacity)
        idCapacity = max(16, capacity)
        starts = .allocate(capacity: idCapacity + 1)
        starts.initialize(to: 0)
        hashes = .allocate(capacity: idCapacity)
    }

    deinit {
        arena.deallocate()
        starts.deallocate()
        hashes.deallocate()
        slots.deallocate()
    }

    /// Room for `bytes` bytes of strings in all, made at once.
    private func reserve(bytes: Int) {
        guard bytes > arenaCapacity else { return }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes)
        grown.update(from: arena, count: arenaCount)
        arena.deallocate()
        arena = grown
        arenaCapacity = bytes
    }

    /// Adds string `bytes`, of hash `h`, as the next id.
    private func append(_ bytes: UnsafeRawBufferPointer, hash h: UInt32) {
        if arenaCount + bytes.count > arenaCapacity {
            var n = arenaCapacity * 2
            while arenaCount + bytes.count > n { n *= 2 }
            precondition(n <= Int(Int32.max), "a string table holds at most 2 GB of strings")
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: n)
            grown.update(from: arena, count: arenaCount)
            arena.deallocate()
            arena = grown
            arenaCapacity = n
        }
        if count == idCapacity {
            let n = idCapacity * 2
            let grownStarts = UnsafeMutablePointer<Int32>.allocate(capacity: n + 1)
            grownStarts.initialize(from: starts, count: count + 1)
            starts.deallocate()
            starts = grownStarts
            let grownHashes = UnsafeMutablePointer<UInt32>.allocate(capacity: n)
            grownHashes.initialize(from: hashes, count: count)
            hashes.deallocate()
            hashes = grownHashes
            idCapacity = n
        }
        if let b = bytes.baseAddress {
            UnsafeMutableRawPointer(arena + arenaCount).copyMemory(from: b, byteCount: bytes.count)
        }
        arenaCount += bytes.count
        hashes[count] = h
        count += 1
        starts[count] = Int32(arenaCount)
    }

    /// The bytes of `id`, valid while the table lives and adds nothing. An id the table does
    /// not hold stops the program, as an array's index out of range would.
    @inlinable @inline(__always)
    func bytes(_ id: Int32) -> UnsafeRawBufferPointer { reader.bytes(id) }

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
        append(bytes, hash: h)
        slots[i] = StringTable.slot(h, id)
        if count * 2 > mask + 1 { grow() }
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
        let mine = self.bytes(id)
        guard mine.count == bytes.count else { return false }
        return StringTable.same(mine.baseAddress!, bytes.baseAddress, bytes.count)
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
        let n = (mask + 1) * 2
        slots.deallocate()
        slots = .allocate(capacity: n)
        slots.initialize(repeating: StringTable.empty, count: n)
        mask = n - 1
        for id in 0..<count {
            var i = Int(hashes[id]) & mask
            while slots[i] != StringTable.empty { i = (i + 1) & mask }
            slots[i] = StringTable.slot(hashes[id], Int32(id))
        }
    }

    /// Calls `body` with the bytes of `id`.
    @inlinable @inline(__always)
    public func withBytes<R>(_ id: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(bytes(id))
    }

    /// The string of `id`; for the edges (output, messages), not the hot path.
    public func string(_ id: Int32) -> String {
        withBytes(id) { String(decoding: $0, as: UTF8.self) }
    }

    /// Appends the bytes of `id` to `out`.
    @inlinable @inline(__always)
    public func append(_ id: Int32, to out: inout [UInt8]) {
        out.append(contentsOf: bytes(id))
    }

    /// The table read through plain pointers: valid while the table lives and adds nothing.
    @inlinable
    public var reader: Reader { Reader(arena: arena, starts: starts, count: count) }

    /// A table's strings, read without a reference to the table: a loop that several threads
    /// run at once over one table then never writes the table's reference count, a cache line
    /// the cores would otherwise pass back and forth (grouping sorts each customer's rows by
    /// their transaction ids). Valid while its table lives and adds nothing.
    @frozen
    public struct Reader: @unchecked Sendable {
        @usableFromInline let arena: UnsafeMutablePointer<UInt8>
        @usableFromInline let starts: UnsafeMutablePointer<Int32>
        @usableFromInline let count: Int

        @usableFromInline
        init(arena: UnsafeMutablePointer<UInt8>, starts: UnsafeMutablePointer<Int32>, count: Int) {
            self.arena = arena
            self.starts = starts
            self.count = count
        }

        /// The bytes of `id`. An id the table does not hold stops the program, as an array's
        /// index out of range would.
        @inlinable @inline(__always)
        public func bytes(_ id: Int32) -> UnsafeRawBufferPointer {
            precondition(UInt32(bitPattern: id) < UInt32(truncatingIfNeeded: count), "string id out of range")
            let s = Int(starts[Int(id)])
            let e = Int(starts[Int(id) + 1])
            return UnsafeRawBufferPointer(start: arena + s, count: e - s)
        }
    }

    /// Bytewise comparison of two ids' strings.
    @inlinable @inline(__always)
    public func less(_ a: Int32, _ b: Int32) -> Bool {
        if a == b { return false }
        return compare(a, b) < 0
    }

    @inlinable @inline(__always)
    public func compare(_ a: Int32, _ b: Int32) -> Int {
        Bytes.compare(bytes(a), bytes(b))
    }

    /// A new table holding this table's strings with new ids: string `order[k]` of this table
    /// becomes id k. `order` lists every id once. The strings are known to be distinct, so
    /// each is placed by its stored hash without comparing bytes.
    package func reordered(_ order: [Int32]) -> StringTable {
        precondition(order.count == count, "a reordering lists every id once")
        let out = StringTable(capacity: count)
        out.reserve(bytes: arenaCount)
        let mask = out.mask
        for (k, old) in order.enumerated() {
            let h = hashes[Int(old)]
            out.append(bytes(old), hash: h)
            var i = Int(h) & mask
            while out.slots[i] != StringTable.empty { i = (i + 1) & mask }
            out.slots[i] = StringTable.slot(h, Int32(k))
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
        for id in 0..<other.count {
            if id + ahead < other.count { winback_prefetch(slots + (Int(other.hashes[id + ahead]) & mask)) }
            map[id] = intern(other.bytes(Int32(id)), hash: other.hashes[id])
        }
        return map
    }
}
