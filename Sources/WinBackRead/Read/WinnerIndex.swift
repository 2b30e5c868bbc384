import CWinBackShims
import WinBackModel

/// Deduplication's index (``Merger``): a transaction's version key (``VersionKey``) → the row
/// number of its current winner, in 8 bytes a slot — the row's number and 32 bits of its key's
/// hash, not the key.
///
/// The key is the row's own ids, so the index does not keep it: a slot whose hash
/// bits match is confirmed by comparing the row's key (`same`), which is a row read only for
/// a duplicate or, once in four billion probes, two ids whose hash bits agree. A slot's place
/// comes from its hash bits alone (Lemire's multiply-shift), so the index grows without the
/// keys. At most three slots in four are used: the index takes about 12 bytes a row, where a
/// map holding the keys took 24.
///
/// An index may hold one part of the keys only, those whose hashes share their top `shift` bits
/// (``Merger`` deduplicates each part on a thread of its own): a slot's place then comes from the
/// bits below them.
struct WinnerIndex {
    /// Hash bits in the high half, row number in the low half; all ones: empty (no row has
    /// number `UInt32.max`: ``Merger`` stops before four billion rows).
    private var slots: [UInt64]
    private(set) var count = 0
    /// Top bits of the hash that every key of this index shares: not used to place it.
    private let shift: Int

    private static let empty = UInt64.max

    init(capacity: Int, shift: Int = 0) {
        precondition(shift >= 0 && shift < 32, "fewer than 32 bits shared")
        slots = Array(repeating: WinnerIndex.empty, count: WinnerIndex.slotsFor(capacity))
        self.shift = shift
    }

    /// Slots for `count` rows: half as many again (two in three used; an index grows past three in four).
    private static func slotsFor(_ count: Int) -> Int { Swift.max(16, count + count / 2) }

    /// 32 bits of `key`'s hash: the high half of its product with 2⁶⁴/φ (Fibonacci hashing),
    /// whose high bits spread even consecutive ids over the slots.
    @inline(__always)
    static func hash(_ key: Int64) -> UInt32 {
        UInt32(truncatingIfNeeded: (UInt64(bitPattern: key) &* 0x9E37_79B9_7F4A_7C15) >> 32)
    }

    /// The first slot a hash is looked for in, among `n`: from its bits below the `shift` shared ones.
    @inline(__always)
    private static func home(_ h: UInt32, _ n: Int, shift: Int) -> Int {
        Int((UInt64(h &<< UInt32(shift)) &* UInt64(n)) >> 32)
    }

    @inline(__always)
    private func home(_ h: UInt32, _ n: Int) -> Int { WinnerIndex.home(h, n, shift: shift) }

    /// A hint to fetch the slot of a key whose hash is `h` before it is looked up: a batch of
    /// keys known ahead then waits on memory once, not per key.
    @inline(__always)
    mutating func prefetch(hash h: UInt32) {
        let i = home(h, slots.count)
        slots.withUnsafeMutableBufferPointer { winback_prefetch($0.baseAddress! + i) }
    }

    /// The row already in the index of the key whose hash is `h` (`same(row)` says whether a
    /// row's key is that key), with its slot; nil if there is none.
    @inline(__always)
    func find(hash h: UInt32, same: (UInt32) -> Bool) -> (row: UInt32, slot: Int)? { probe(h, same).found }

    /// Enters `row` for the key whose hash is `h` and returns nil when no row of that key is in
    /// the index; otherwise changes nothing and returns the row there, with its slot.
    @inline(__always)
    mutating func insert(hash h: UInt32, _ row: UInt32, same: (UInt32) -> Bool) -> (row: UInt32, slot: Int)? {
        precondition(row != UInt32.max, "a row number below four billion")
        let (found, at) = probe(h, same)
        if let found { return found }
        slots[at] = UInt64(h) << 32 | UInt64(row)
        count += 1
        if count * 4 > slots.count * 3 { grow(to: slots.count * 2) }
        return nil
    }

    /// Looks for hash `h` from its first slot on: the row `same` confirms, with its slot, or
    /// nil and the empty slot where the probe ended.
    @inline(__always)
    private func probe(_ h: UInt32, _ same: (UInt32) -> Bool) -> (found: (row: UInt32, slot: Int)?, at: Int) {
        slots.withUnsafeBufferPointer { s in
            let n = s.count
            var i = home(h, n)
            while true {
                let v = s[i]
                if v == WinnerIndex.empty { return (nil, i) }
                if UInt32(truncatingIfNeeded: v >> 32) == h && same(UInt32(truncatingIfNeeded: v)) {
                    return ((UInt32(truncatingIfNeeded: v), i), i)
                }
                i += 1
                if i == n { i = 0 }
            }
        }
    }

    /// Makes `row` the winner in `slot` (as ``find(hash:same:)`` or ``insert(hash:_:same:)``
    /// gave it, nothing entered since).
    mutating func replace(at slot: Int, with row: UInt32) {
        precondition(slots[slot] != WinnerIndex.empty && row != UInt32.max, "a used slot, a row number")
        slots[slot] = slots[slot] & 0xFFFF_FFFF_0000_0000 | UInt64(row)
    }

    /// Moves every entry into `n` slots: each slot's place follows from its hash bits.
    private mutating func grow(to n: Int) {
        let old = slots
        slots = Array(repeating: WinnerIndex.empty, count: n)
        let shift = shift
        slots.withUnsafeMutableBufferPointer { s in
            for v in old where v != WinnerIndex.empty {
                var i = WinnerIndex.home(UInt32(truncatingIfNeeded: v >> 32), n, shift: shift)
                while s[i] != WinnerIndex.empty {
                    i += 1
                    if i == n { i = 0 }
                }
                s[i] = v
            }
        }
    }
}
