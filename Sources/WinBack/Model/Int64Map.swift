/// An open-addressing map from Int64 keys to UInt32 values (row or customer numbers), for
/// millions of entries in 12 bytes a slot, without a node or a hash object per entry.
/// `Int64.min` is reserved (the empty slot).
struct Int64Map {
    private var keys: [Int64]
    private var values: [UInt32]
    private var mask: Int
    private(set) var count = 0

    init(capacity: Int) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        keys = Array(repeating: .min, count: n)
        values = Array(repeating: 0, count: n)
        mask = n - 1
    }

    @inline(__always)
    private static func slot(_ key: Int64, _ mask: Int) -> Int {
        var h = UInt64(bitPattern: key) &* 0x9E37_79B9_7F4A_7C15
        h ^= h >> 31
        return Int(truncatingIfNeeded: h) & mask
    }

    /// The value of `key`, or nil.
    @inline(__always)
    func find(_ key: Int64) -> UInt32? {
        var i = Int64Map.slot(key, mask)
        while true {
            let k = keys[i]
            if k == key { return values[i] }
            if k == .min { return nil }
            i = (i + 1) & mask
        }
    }

    /// Inserts `value` for a new `key` and returns it; for a known key, returns its value and
    /// changes nothing.
    @inline(__always)
    mutating func insert(_ key: Int64, _ value: UInt32) -> UInt32 {
        precondition(key != .min)
        var i = Int64Map.slot(key, mask)
        while true {
            let k = keys[i]
            if k == key { return values[i] }
            if k == .min { break }
            i = (i + 1) & mask
        }
        keys[i] = key
        values[i] = value
        count += 1
        if count * 2 > keys.count { grow() }
        return value
    }

    /// Replaces the value of a known key.
    @inline(__always)
    mutating func update(_ key: Int64, _ value: UInt32) {
        var i = Int64Map.slot(key, mask)
        while keys[i] != key { i = (i + 1) & mask }
        values[i] = value
    }

    private mutating func grow() {
        let oldKeys = keys, oldValues = values
        let n = keys.count * 2
        keys = Array(repeating: .min, count: n)
        values = Array(repeating: 0, count: n)
        mask = n - 1
        for (j, k) in oldKeys.enumerated() where k != .min {
            var i = Int64Map.slot(k, mask)
            while keys[i] != .min { i = (i + 1) & mask }
            keys[i] = k
            values[i] = oldValues[j]
        }
    }
}
