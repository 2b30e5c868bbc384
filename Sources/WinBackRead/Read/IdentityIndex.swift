#if canImport(Glibc)
    import Glibc
#endif

/// Identity rows kept compactly (docs/rules.md §10.1, §6.2): each row as one record of bytes in
/// an arena — its key, then the values of the columns a run uses — found through an
/// open-addressing table of offsets. A million rows cost their bytes plus 16 bytes of table
/// each, not a dictionary of strings; the same record layout is what a memory-bounded run
/// writes to disk and reads back (``IdentityIndex/append(record:)``).
///
/// Record: `u16 keyLength, key, then per column u16 length, value`, little-endian lengths.
/// Keys and values are at most ``IdentityValues/maxBytes`` bytes, checked before they come here.
package final class IdentityIndex {
    /// Values per record (the key aside).
    package let columns: Int
    private(set) var arena: [UInt8] = []
    /// Offset + 1 of each record, 0 for an empty slot; a power of two long.
    private var slots: [Int]
    /// Distinct keys.
    package private(set) var count = 0
    /// Records whose key an earlier record had (the later one wins).
    package private(set) var replaced = 0

    package init(columns: Int, reservingBytes: Int = 0, rows: Int = 0) {
        self.columns = columns
        arena.reserveCapacity(reservingBytes)
        var n = 1024
        while n < rows * 2 { n <<= 1 }
        slots = Array(repeating: 0, count: n)
    }

    /// The bytes held (arena and table), for memory budgets.
    package var heldBytes: Int { arena.capacity + slots.count * MemoryLayout<Int>.stride }

    /// The hash of a key: Swift's Hasher, seeded afresh by every process, so that nobody can
    /// choose keys that collide (in this table, or in the buckets of a join on disk). Only
    /// where a key is kept depends on it, never what a run writes.
    @inline(__always)
    package static func hash(_ key: UnsafeRawBufferPointer) -> UInt64 {
        var h = Hasher()
        h.combine(bytes: key)
        return UInt64(bitPattern: Int64(h.finalize()))
    }

    /// Bytes of records a later record of the same key replaced.
    package private(set) var deadBytes = 0

    /// The bytes of live records.
    package var liveBytes: Int { arena.count - deadBytes }

    /// Appends one record made of `key` and `values` (``columns`` of them); the last record of
    /// a key wins. Once replaced records hold more bytes than live ones (a key repeated
    /// over and over), the arena is compacted: it never holds much more than the live rows.
    package func insert(key: UnsafeRawBufferPointer, values: [UnsafeRawBufferPointer]) {
        precondition(values.count == columns)
        let at = arena.count
        IdentityIndex.appendRecord(key: key, values: values, to: &arena)
        place(at, key: key)
        if deadBytes > 1 << 20 && deadBytes > liveBytes { compact() }
    }

    /// Keeps only the live records, in the order they were written.
    private func compact() {
        var live = slots.filter { $0 != 0 }.map { $0 - 1 }
        live.sort()
        var fresh: [UInt8] = []
        fresh.reserveCapacity(liveBytes)
        var moved: [Int: Int] = [:]
        moved.reserveCapacity(live.count)
        for at in live {
            moved[at] = fresh.count
            fresh.append(contentsOf: arena[at..<recordEnd(at)])
        }
        for i in slots.indices where slots[i] != 0 { slots[i] = moved[slots[i] - 1]! + 1 }
        arena = fresh
        deadBytes = 0
    }

    /// Appends every record of `bytes` (a run of whole records, as ``appendRecord(key:values:to:)``
    /// writes them).
    package func append(records bytes: UnsafeRawBufferPointer) {
        var at = arena.count
        arena.append(contentsOf: bytes)
        let end = arena.count
        while at < end {
            let next = recordEnd(at)
            let keyLength = length(at)
            arena.withUnsafeBytes { a in
                place(at, key: UnsafeRawBufferPointer(rebasing: a[(at + 2)..<(at + 2 + keyLength)]))
            }
            at = next
        }
    }

    /// Writes one record to `out`.
    package static func appendRecord(
        key: UnsafeRawBufferPointer, values: [UnsafeRawBufferPointer], to out: inout [UInt8]
    ) {
        appendLength(key.count, &out)
        out.append(contentsOf: key)
        for v in values {
            appendLength(v.count, &out)
            out.append(contentsOf: v)
        }
    }

    @inline(__always)
    private static func appendLength(_ n: Int, _ out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: n))
        out.append(UInt8(truncatingIfNeeded: n >> 8))
    }

    @inline(__always)
    private func length(_ at: Int) -> Int { Int(arena[at]) | Int(arena[at + 1]) << 8 }

    /// The offset just past the record at `at`.
    private func recordEnd(_ at: Int) -> Int {
        var p = at + 2 + length(at)
        for _ in 0..<columns { p += 2 + length(p) }
        return p
    }

    private func place(_ at: Int, key: UnsafeRawBufferPointer) {
        if count * 2 >= slots.count { grow() }
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: IdentityIndex.hash(key)) & mask
        while slots[i] != 0 {
            if keyMatches(slots[i] - 1, key) {
                deadBytes += recordEnd(slots[i] - 1) - (slots[i] - 1)
                slots[i] = at + 1
                replaced += 1
                return
            }
            i = (i + 1) & mask
        }
        slots[i] = at + 1
        count += 1
    }

    private func grow() {
        let old = slots
        slots = Array(repeating: 0, count: old.count * 2)
        let mask = slots.count - 1
        for s in old where s != 0 {
            let at = s - 1
            let keyLength = length(at)
            let h = arena.withUnsafeBytes { a in
                IdentityIndex.hash(UnsafeRawBufferPointer(rebasing: a[(at + 2)..<(at + 2 + keyLength)]))
            }
            var i = Int(truncatingIfNeeded: h) & mask
            while slots[i] != 0 { i = (i + 1) & mask }
            slots[i] = s
        }
    }

    private func keyMatches(_ at: Int, _ key: UnsafeRawBufferPointer) -> Bool {
        let n = length(at)
        guard n == key.count else { return false }
        return arena.withUnsafeBytes { a in
            n == 0 || memcmp(a.baseAddress! + at + 2, key.baseAddress!, n) == 0
        }
    }

    /// The record of `key`, if any.
    package func find(_ key: UnsafeRawBufferPointer) -> Int? {
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: IdentityIndex.hash(key)) & mask
        while slots[i] != 0 {
            if keyMatches(slots[i] - 1, key) { return slots[i] - 1 }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The record of `key`, if any.
    package func find(_ key: String) -> Int? {
        var k = key
        return k.withUTF8 { find(UnsafeRawBufferPointer($0)) }
    }

    /// Value `column` of the record at `record`, as it was written.
    package func value(_ record: Int, _ column: Int) -> String {
        var p = record + 2 + length(record)
        for _ in 0..<column { p += 2 + length(p) }
        let n = length(p)
        return String(decoding: arena[(p + 2)..<(p + 2 + n)], as: UTF8.self)
    }

    /// Every value of the record at `record`.
    package func values(_ record: Int) -> [String] { (0..<columns).map { value(record, $0) } }
}
