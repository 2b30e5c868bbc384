import CWinBackShims
import WinBackModel
import WinBackSupport

/// The rows of a run grouped by customer (subscription group, originalTransactionId), with
/// customers in output order (bytewise by group, then originalTransactionId) and each
/// customer's rows ordered by (purchaseDate, transactionId).
// Built once, then only read: its rows and string table are never written after `build`.
public struct CustomerRows: @unchecked Sendable {
    public let strings: StringTable
    /// Every row, customer after customer.
    public let rows: TransactionRows
    /// Customer k's rows are `rows[starts[k]..<starts[k + 1]]`.
    public let starts: [Int]
    public let groups: [Int32]
    public let originalTransactionIds: [TransactionKey]

    public var count: Int { groups.count }

    /// A customer's identity, for the rare keys that collide in ``build(rows:strings:threads:)``.
    private struct Customer: Hashable {
        var group: Int32
        var original: TransactionKey
    }

    /// A customer's place in output order: its group's rank, then its id's first 16 bytes.
    private struct SortKey {
        var group: Int32
        var index: Int32
        var hi: UInt64
        var lo: UInt64
    }

    /// Customer k's rows, valid while `self` is alive.
    public func rows(of k: Int) -> UnsafeBufferPointer<Transaction> {
        UnsafeBufferPointer(rebasing: rows.buffer[starts[k]..<starts[k + 1]])
    }

    /// The first 16 bytes of `s`, big-endian and zero-padded, as two integers that order like
    /// the bytes.
    @inline(__always)
    static func prefixKey(_ s: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
        var hi: UInt64 = 0
        var lo: UInt64 = 0
        for i in 0..<8 { hi = hi << 8 | UInt64(i < s.count ? s[i] : 0) }
        for i in 8..<16 { lo = lo << 8 | UInt64(i < s.count ? s[i] : 0) }
        return (hi, lo)
    }

    /// A customer's (group, originalTransactionId) folded into a 64-bit map key (never
    /// `Int64.min`): distinct for distinct ids of one group. Keys of two groups can collide;
    /// ``build(rows:strings:threads:)`` checks every match and keeps such customers apart.
    @inline(__always)
    static func folded(group: Int32, original: TransactionKey) -> Int64 {
        let k = original.raw &+ Int64(group) &* -0x61C8_8646_80B5_83EB
        return k == .min ? .max : k
    }

    /// Groups a copy of `rows` by customer (for callers that keep their rows, e.g. tests).
    public static func build(rows: [Transaction], strings: StringTable, threads: Int) -> CustomerRows {
        build(rows: TransactionRows(rows), strings: strings, threads: threads)
    }

    /// Groups `rows` (whose ids are in `strings`) by customer, taking them over: they are
    /// reordered in place, so that only one copy of the rows is ever held.
    public static func build(rows store: TransactionRows, strings: StringTable, threads: Int) -> CustomerRows {
        let input = store.buffer
        let total = input.count
        let shards = max(1, min(threads, 64))
        @Sendable @inline(__always) func key(_ r: Transaction) -> Int64 {
            folded(group: r.subscriptionGroupId, original: r.originalTransactionId)
        }
        @Sendable @inline(__always) func shard(_ key: Int64) -> Int {
            Int(truncatingIfNeeded: (UInt64(bitPattern: key) &* 0x9E37_79B9_7F4A_7C15) >> 40) % shards
        }
        // Customer ids: each shard (a hash class of the customer key) numbers its own customers
        // in row order, on its own thread; customer c of shard s is offsets[s] + c.
        // Left unfilled here: every row is numbered by exactly one shard, which writes both
        // (and the pages are first touched by the threads, not zeroed on this one).
        var of = [Int32](unsafeUninitializedCapacity: total) { _, n in n = total }
        // Each row's shard, so that later passes need not read the rows again.
        var shardOf = [UInt8](unsafeUninitializedCapacity: total) { _, n in n = total }
        let found = ResultSlots<(groups: [Int32], originals: [TransactionKey])>(count: shards)
        do {
            let r = UnsafeBufferPointer(input)
            of.withUnsafeMutableBufferPointer { o in
                shardOf.withUnsafeMutableBufferPointer { sh in
                    nonisolated(unsafe) let rows = r
                    nonisolated(unsafe) let local = o
                    nonisolated(unsafe) let shardOfRow = sh
                    try? parallelFor(count: shards, threads: threads) { s in
                        var index = Int64Map(capacity: total / (8 * shards))
                        var groups: [Int32] = []
                        var originals: [TransactionKey] = []
                        var collided: [Customer: Int] = [:]
                        for i in 0..<rows.count {
                            if i + 8 < rows.count, case let ahead = key(rows[i + 8]), shard(ahead) == s {
                                index.prefetch(ahead)
                            }
                            let k = key(rows[i])
                            guard shard(k) == s else { continue }
                            let group = rows[i].subscriptionGroupId
                            let original = rows[i].originalTransactionId
                            var c = Int(index.insert(k, UInt32(groups.count)))
                            if c < groups.count && (groups[c] != group || originals[c] != original) {
                                c = collided[Customer(group: group, original: original), default: groups.count]
                                collided[Customer(group: group, original: original)] = c
                            }
                            if c == groups.count {
                                groups.append(group)
                                originals.append(original)
                            }
                            local[i] = Int32(c)
                            shardOfRow[i] = UInt8(s)
                        }
                        found[s] = (groups, originals)
                    }
                }
            }
        }
        var offsets = [0]
        var firstGroup: [Int32] = []
        var firstOrig: [TransactionKey] = []
        for f in found.all {
            firstGroup += f.groups
            firstOrig += f.originals
            offsets.append(firstGroup.count)
        }
        let n = firstGroup.count
        // Bytewise by (group, originalTransactionId) through integer keys: the group's rank
        // among the few groups, then the id's first 16 bytes big-endian (ids hold no NUL, so
        // zero padding orders a prefix first); only ids equal in those bytes compare in full.
        let groupIds = Array(Set(firstGroup)).sorted { strings.less($0, $1) }
        var groupRank: [Int32: Int32] = [:]
        for (r, g) in groupIds.enumerated() { groupRank[g] = Int32(r) }
        // Keys, then each thread's share sorted on its own and the shares merged: customers
        // differ in (group, id), so the order is total and any sort gives the same. The keys
        // are sorted themselves, not indices to them, so that comparisons read no other array.
        var keys = [SortKey](unsafeUninitializedCapacity: n) { _, count in count = n }  // all written below
        keys.withUnsafeMutableBufferPointer { out in
            nonisolated(unsafe) let out = out
            let ranks = groupRank
            let groupOf = firstGroup
            let origOf = firstOrig
            let pieces = chunks(n, pieces: threads * 4)
            try? parallelFor(count: pieces.count, threads: threads) { p in
                for k in pieces[p] {
                    let (hi, lo) = origOf[k].withBytes(in: strings) { CustomerRows.prefixKey($0) }
                    out[k] = SortKey(group: ranks[groupOf[k]]!, index: Int32(k), hi: hi, lo: lo)
                }
            }
        }
        let sortOrig = firstOrig
        @Sendable func before(_ a: SortKey, _ b: SortKey) -> Bool {
            if a.group != b.group { return a.group < b.group }
            if a.hi != b.hi { return a.hi < b.hi }
            if a.lo != b.lo { return a.lo < b.lo }
            return strings.less(sortOrig[Int(a.index)], sortOrig[Int(b.index)])
        }
        let shares = chunks(n, pieces: threads)
        let sortedShares = ResultSlots<[SortKey]>(count: shares.count)
        let unsorted = keys
        try? parallelFor(count: shares.count, threads: threads) { p in
            sortedShares[p] = unsorted[shares[p]].sorted(by: before)
        }
        let sorted = sortedShares.all
        var merged: [SortKey] = sorted.first ?? []
        for share in sorted.dropFirst() {
            var next: [SortKey] = []
            next.reserveCapacity(merged.count + share.count)
            var i = 0
            var j = 0
            while i < merged.count && j < share.count {
                if before(share[j], merged[i]) {
                    next.append(share[j])
                    j += 1
                } else {
                    next.append(merged[i])
                    i += 1
                }
            }
            next += merged[i...]
            next += share[j...]
            merged = next
        }
        let order = merged.map { Int($0.index) }
        merged = []
        var rank = [Int32](repeating: 0, count: n)
        for (r, k) in order.enumerated() { rank[k] = Int32(r) }

        // Each row's customer rank, then where each customer's rows start.
        let pieces = chunks(total, pieces: max(1, threads) * 4)
        of.withUnsafeMutableBufferPointer { o in
            nonisolated(unsafe) let ranks = o
            let shardStart = offsets
            let rankOf = rank
            let shardOfRow = shardOf
            try? parallelFor(count: pieces.count, threads: threads) { p in
                for i in pieces[p] {
                    ranks[i] = rankOf[shardStart[Int(shardOfRow[i])] + Int(ranks[i])]
                }
            }
        }
        shardOf = []
        var starts = [Int](repeating: 0, count: n + 1)
        for c in of { starts[Int(c) + 1] += 1 }
        for k in 0..<n { starts[k + 1] += starts[k] }

        // Rows to their customers' places, in place: first into one contiguous region per
        // thread (whole customers, about equal rows), then each region on its own thread by
        // following the cycles of its permutation (every move puts one row where it belongs).
        // No second copy of the rows is ever made. Rows of a customer end in any order; they
        // are sorted as each bucket is placed.
        let parts = max(1, min(threads, n))
        var bounds = [0]  // customer ranks where regions start
        for p in 1..<parts {
            var c = bounds[p - 1]
            while c < n && starts[c] < total * p / parts { c += 1 }
            bounds.append(c)
        }
        bounds.append(n)
        do {
            let rows = input
            of.withUnsafeMutableBufferPointer { ranks in
                // Each row to its region: with two, by swapping strays in pairs; otherwise by
                // ``distribute``, regions for buckets.
                @inline(__always) func region(_ c: Int32) -> Int {
                    var p = 0
                    while Int(c) >= bounds[p + 1] { p += 1 }
                    return p
                }
                nonisolated(unsafe) let rowsAll = rows
                nonisolated(unsafe) let ranksAll = ranks
                if parts == 2 {
                    // Two regions hold as many rows of the other as the other holds of them:
                    // each thread finds its region's strays, then the pairs are swapped, also
                    // on both threads.
                    let mid = starts[bounds[1]]
                    let firstOfSecond = Int32(bounds[1])
                    let strays = ResultSlots<[Int32]>(count: 2)
                    try? parallelFor(count: 2, threads: threads) { p in
                        var found: [Int32] = []
                        for i in (p == 0 ? 0..<mid : mid..<total) where (ranksAll[i] >= firstOfSecond) == (p == 0) {
                            found.append(Int32(i))
                        }
                        strays[p] = found
                    }
                    let (a, b) = (strays[0]!, strays[1]!)
                    precondition(a.count == b.count, "two regions hold as many strays of each other")
                    let pairs = chunks(a.count, pieces: threads * 4)
                    try? parallelFor(count: pairs.count, threads: threads) { k in
                        for j in pairs[k] {
                            let x = Int(a[j])
                            let y = Int(b[j])
                            swap(&rowsAll[x], &rowsAll[y])
                            swap(&ranksAll[x], &ranksAll[y])
                        }
                    }
                } else {
                    var next = (0..<parts).map { starts[bounds[$0]] }
                    CustomerRows.distribute(
                        rows, ranks, next: &next, end: (0..<parts).map { starts[bounds[$0 + 1]] },
                        bucket: { region($0) }, done: { _ in })
                }
                let customerStarts = starts
                let regionBounds = bounds
                try? parallelFor(count: parts, threads: threads) { p in
                    let hi = customerStarts[regionBounds[p + 1]]
                    let first = regionBounds[p]
                    let customersHere = regionBounds[p + 1] - first
                    var fill = Array(customerStarts[first..<regionBounds[p + 1]])
                    // Rows from..<to (whole customers), each moved to its place: its
                    // destination kept in `ranksAll` (the rank is no longer needed once read),
                    // then the cycles of that permutation followed.
                    func place(rows from: Int, _ to: Int) {
                        for i in from..<to {
                            let c = Int(ranksAll[i]) - first
                            ranksAll[i] = Int32(fill[c])
                            fill[c] += 1
                        }
                        for i in from..<to where ranksAll[i] != Int32(i) {
                            var carry = rowsAll[i]
                            var j = Int(ranksAll[i])
                            ranksAll[i] = Int32(i)
                            while j != i {
                                let next = Int(ranksAll[j])
                                swap(&carry, &rowsAll[j])
                                ranksAll[j] = Int32(j)
                                j = next
                            }
                            rowsAll[i] = carry
                        }
                    }
                    // First to buckets of about a thousand consecutive customers, each bucket
                    // then placed while its rows are still in the caches: following single
                    // rows through the whole region would miss the caches on nearly every row.
                    var shift = 0
                    while customersHere >> shift > 1024 { shift += 1 }
                    let buckets = customersHere > 0 ? (customersHere - 1) >> shift + 1 : 0
                    var next = (0..<buckets).map { customerStarts[first + $0 << shift] }
                    let end = (0..<buckets).map { $0 + 1 < buckets ? customerStarts[first + ($0 + 1) << shift] : hi }
                    // Each bucket's customers are also sorted as soon as it is placed, while
                    // its rows are still in the caches.
                    CustomerRows.distribute(
                        rowsAll, ranksAll, next: &next, end: end, bucket: { (Int($0) - first) >> shift },
                        done: { b in
                            place(rows: customerStarts[first + b << shift], end[b])
                            for k in (first + b << shift)..<min(first + (b + 1) << shift, regionBounds[p + 1]) {
                                let lo = customerStarts[k]
                                let hi = customerStarts[k + 1]
                                if hi - lo < 2 { continue }
                                var customer = UnsafeMutableBufferPointer(rebasing: rowsAll[lo..<hi])
                                customer.sort { a, b in
                                    a.purchaseDate != b.purchaseDate
                                        ? a.purchaseDate < b.purchaseDate
                                        : strings.less(a.transactionId, b.transactionId)
                                }
                            }
                        })
                }
            }
        }
        of = []
        return CustomerRows(
            strings: strings, rows: store, starts: starts, groups: order.map { firstGroup[$0] },
            originalTransactionIds: order.map { firstOrig[$0] })
    }

    /// The American-flag method on rows and their ranks: bucket b (of `bucket(rank)`) ends in
    /// next[b]..<end[b], the buckets being consecutive. A row not in its bucket is carried to
    /// its bucket's next free place, and the row found there on in turn; the place after is
    /// fetched ahead, so that the next visit to that bucket finds it in the caches. `done(b)`
    /// is called as soon as bucket b holds all its rows.
    @inline(__always)
    private static func distribute(
        _ rows: UnsafeMutableBufferPointer<Transaction>, _ ranks: UnsafeMutableBufferPointer<Int32>,
        next: inout [Int], end: [Int], bucket: (Int32) -> Int, done: (Int) -> Void
    ) {
        for b in next.indices {
            while next[b] < end[b] {
                let i = next[b]
                var d = bucket(ranks[i])
                if d == b {
                    next[b] += 1
                    continue
                }
                var carry = rows[i]
                var carryRank = ranks[i]
                repeat {
                    let j = next[d]
                    next[d] += 1
                    winback_prefetch(rows.baseAddress! + j + 2)
                    winback_prefetch(UnsafeRawPointer(rows.baseAddress! + j + 2) + 64)
                    swap(&carry, &rows[j])
                    swap(&carryRank, &ranks[j])
                    d = bucket(carryRank)
                } while d != b
                rows[i] = carry
                ranks[i] = carryRank
                next[b] += 1
            }
            done(b)
        }
    }
}
