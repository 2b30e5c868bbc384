import CWinBackShims

/// An open-addressing map from Int64 keys to UInt32 values (row or customer numbers), for
/// millions of entries in 12 bytes a slot, without a node or a hash object per entry.
/// `Int64.min` is reserved (the empty slot).
///
/// A slot keeps its key and value side by side, so a lookup touches one cache line: the map
/// is far larger than the caches, and most lookups miss them.
@usableFromInline package struct Int64Map: Sendable {
    @usableFromInline struct Slot: Sendable {
        @usableFromInline var keyLow: UInt32
        @usableFromInline var keyHigh: UInt32
        @usableFromInline var value: UInt32

        static let empty = Slot(key: .min, value: 0)

        @inlinable init(key: Int64, value: UInt32) {
            keyLow = UInt32(truncatingIfNeeded: key)
            keyHigh = UInt32(truncatingIfNeeded: key >> 32)
            self.value = value
        }

        @inlinable var key: Int64 { Int64(keyHigh) << 32 | Int64(keyLow) }
    }

    @usableFromInline var slots: [Slot]
    @usableFromInline var mask: Int
    @usableFromInline var count = 0

    package init(capacity: Int) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        slots = Array(repeating: .empty, count: n)
        mask = n - 1
    }

    @inlinable
    static func slot(_ key: Int64, _ mask: Int) -> Int {
        var h = UInt64(bitPattern: key) &* 0x9E37_79B9_7F4A_7C15
        h ^= h >> 31
        return Int(truncatingIfNeeded: h) & mask
    }

    /// The value of `key`, or nil.
    @inline(__always)
    package func find(_ key: Int64) -> UInt32? {
        withLookup { $0.find(key) }
    }

    /// The map for lookups only, from any number of threads, while `body` runs: a lookup then
    /// takes no reference to the slots.
    @inlinable
    package func withLookup<R>(_ body: (Lookup) throws -> R) rethrows -> R {
        try slots.withUnsafeBufferPointer { try body(Lookup(slots: $0, mask: mask)) }
    }

    /// A map's slots, read only (``withLookup(_:)``).
    // Valid only inside `withLookup`, during which nothing writes the map.
    @usableFromInline package struct Lookup: @unchecked Sendable {
        @usableFromInline let slots: UnsafeBufferPointer<Slot>
        @usableFromInline let mask: Int

        @inlinable init(slots: UnsafeBufferPointer<Slot>, mask: Int) {
            self.slots = slots
            self.mask = mask
        }

        /// A hint to fetch the slot of `key` before it is looked up.
        @inlinable @inline(__always)
        package func prefetch(_ key: Int64) {
            winback_prefetch(slots.baseAddress! + Int64Map.slot(key, mask))
        }

        /// The value of `key`, or nil.
        @inlinable @inline(__always)
        package func find(_ key: Int64) -> UInt32? {
            var i = Int64Map.slot(key, mask)
            while true {
                let k = slots[i].key
                if k == key { return slots[i].value }
                if k == .min { return nil }
                i = (i + 1) & mask
            }
        }
    }

    /// A hint to fetch the slot of `key` before it is looked up: the map is far larger than
    /// the caches, and a batch of keys known ahead then waits on memory once, not per key.
    /// Mutating (it changes nothing) so that the slots are reached in place: read from a map
    /// held by a loop's closure, a non-mutating call took and dropped a reference to them per
    /// key, as many atomic operations as rows.
    @inlinable
    package mutating func prefetch(_ key: Int64) {
        let i = Int64Map.slot(key, mask)
        slots.withUnsafeMutableBufferPointer { winback_prefetch($0.baseAddress! + i) }
    }

    /// Inserts `value` for a new `key` and returns it; for a known key, returns its value and
    /// changes nothing. Always inlined: the loops of other modules that call it once per row
    /// otherwise paid a call for each (growing stays a call of its own).
    @inlinable @inline(__always)
    package mutating func insert(_ key: Int64, _ value: UInt32) -> UInt32 {
        precondition(key != .min)
        let mask = self.mask
        let (found, i) = slots.withUnsafeBufferPointer { s -> (UInt32?, Int) in
            var i = Int64Map.slot(key, mask)
            while true {
                let k = s[i].key
                if k == key { return (s[i].value, i) }
                if k == .min { return (nil, i) }
                i = (i + 1) & mask
            }
        }
        if let found { return found }
        slots[i] = Slot(key: key, value: value)
        count += 1
        if count * 2 > slots.count { grow() }
        return value
    }

    /// Replaces the value of a known key.
    @inlinable
    package mutating func update(_ key: Int64, _ value: UInt32) {
        var i = Int64Map.slot(key, mask)
        while slots[i].key != key { i = (i + 1) & mask }
        slots[i].value = value
    }

    /// Makes room for `count` keys at once, rather than doubling step by step as they come.
    package mutating func reserve(_ count: Int) {
        var n = slots.count
        while count * 2 > n { n <<= 1 }
        if n > slots.count { grow(to: n) }
    }

    @usableFromInline mutating func grow() { grow(to: slots.count * 2) }

    private mutating func grow(to n: Int) {
        let old = slots
        slots = Array(repeating: .empty, count: n)
        mask = n - 1
        for s in old where s.key != .min {
            var i = Int64Map.slot(s.key, mask)
            while slots[i].key != .min { i = (i + 1) & mask }
            slots[i] = s
        }
    }
}
