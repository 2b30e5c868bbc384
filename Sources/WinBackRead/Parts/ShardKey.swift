import WinBackModel

/// The shard of a customer (docs/rules.md §8.1): FNV-1a (64 bits) over the bytes of its
/// subscriptionGroupIdentifier, a 0x1F separator and its originalTransactionId, modulo the
/// shard count. The same on every machine and process (Swift's `Hasher` is seeded per process).
public enum ShardKey {
    /// The shard of (group, originalTransactionId), both given as bytes.
    @inlinable @inline(__always)
    public static func shard(group: some Collection<UInt8>, original: some Collection<UInt8>, shards: Int) -> Int {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        @inline(__always) func mix(_ b: UInt8) {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        for b in group { mix(b) }
        mix(0x1F)
        for b in original { mix(b) }
        return Int(h % UInt64(max(1, shards)))
    }

    /// The shard of `(group, original)` given as strings (tests, messages).
    public static func shard(group: String, original: String, shards: Int) -> Int {
        shard(group: group.utf8, original: original.utf8, shards: shards)
    }

    /// The shard of `(group, original)` given as byte arrays (a segment row's).
    package static func shard(group: [UInt8], original: [UInt8], shards: Int) -> Int {
        shard(group: group[...], original: original[...], shards: shards)
    }

    /// The shard of a compact row of `columns`, whose ids are in `table`.
    @inline(__always)
    package static func shard(of r: CompactRow, columns: RowColumns, table: StringTable, shards: Int) -> Int {
        table.withBytes(columns.group(r)) { g in
            r.originalTransactionId.withBytes(in: table) { o in shard(group: g, original: o, shards: shards) }
        }
    }

    /// The shard of a row, whose ids are in `table`.
    @inline(__always)
    package static func shard(of r: Transaction, table: StringTable, shards: Int) -> Int {
        table.withBytes(r.subscriptionGroupId) { g in
            r.originalTransactionId.withBytes(in: table) { o in shard(group: g, original: o, shards: shards) }
        }
    }
}
