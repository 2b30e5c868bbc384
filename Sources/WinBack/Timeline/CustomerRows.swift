/// The rows of a run grouped by customer (subscription group, originalTransactionId), with
/// customers in output order (bytewise by group, then originalTransactionId) and each
/// customer's rows ordered by (purchaseDate, transactionId).
public struct CustomerRows: @unchecked Sendable {
    public let strings: StringTable
    /// Every row, customer after customer.
    public let rows: [Transaction]
    /// Customer k's rows are `rows[starts[k]..<starts[k + 1]]`.
    public let starts: [Int]
    public let groups: [Int32]
    public let originalTransactionIds: [Int32]

    public var count: Int { groups.count }

    public func rows(of k: Int) -> ArraySlice<Transaction> { rows[starts[k]..<starts[k + 1]] }

    /// The first 16 bytes of `s`, big-endian and zero-padded, as two integers that order like
    /// the bytes.
    @inline(__always)
    static func prefixKey(_ s: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
        var hi: UInt64 = 0, lo: UInt64 = 0
        for i in 0..<8 { hi = hi << 8 | UInt64(i < s.count ? s[i] : 0) }
        for i in 8..<16 { lo = lo << 8 | UInt64(i < s.count ? s[i] : 0) }
        return (hi, lo)
    }

    /// Groups a copy of `rows` by customer (for callers that keep their rows, e.g. tests).
    public static func build(rows: [Transaction], strings: StringTable, threads: Int) -> CustomerRows {
        var copy = rows
        return build(rows: &copy, strings: strings, threads: threads)
    }

    /// Groups `rows` (whose ids are in `strings`) by customer, taking them over: `input` is
    /// emptied, so that only one copy of the rows is ever held.
    public static func build(rows input: inout [Transaction], strings: StringTable, threads: Int) -> CustomerRows {
        // Customer ids in first-seen order, then a bytewise order over them.
        var index = Int64Map(capacity: input.count / 8)
        var firstGroup: [Int32] = []
        var firstOrig: [Int32] = []
        var of = [Int32](repeating: 0, count: input.count)
        let total = input.count
        for (i, r) in input.enumerated() {
            let key = Int64(r.subscriptionGroupId) << 32 | Int64(UInt32(bitPattern: r.originalTransactionId))
            let k = Int32(index.insert(key, UInt32(firstGroup.count)))
            if k == firstGroup.count {
                firstGroup.append(r.subscriptionGroupId)
                firstOrig.append(r.originalTransactionId)
            }
            of[i] = k
        }
        let n = firstGroup.count
        // Bytewise by (group, originalTransactionId) through integer keys: the group's rank
        // among the few groups, then the id's first 16 bytes big-endian (ids hold no NUL, so
        // zero padding orders a prefix first); only ids equal in those bytes compare in full.
        let groupIds = Array(Set(firstGroup)).sorted { strings.less($0, $1) }
        var groupRank: [Int32: Int32] = [:]
        for (r, g) in groupIds.enumerated() { groupRank[g] = Int32(r) }
        var keys = [(group: Int32, hi: UInt64, lo: UInt64)](repeating: (0, 0, 0), count: n)
        for k in 0..<n {
            let (hi, lo) = strings.withBytes(firstOrig[k]) { CustomerRows.prefixKey($0) }
            keys[k] = (groupRank[firstGroup[k]]!, hi, lo)
        }
        let order = (0..<n).sorted { a, b in
            let ka = keys[a], kb = keys[b]
            if ka.group != kb.group { return ka.group < kb.group }
            if ka.hi != kb.hi { return ka.hi < kb.hi }
            if ka.lo != kb.lo { return ka.lo < kb.lo }
            return strings.less(firstOrig[a], firstOrig[b])
        }
        keys = []
        var rank = [Int32](repeating: 0, count: n)
        for (r, k) in order.enumerated() { rank[k] = Int32(r) }

        // Counting sort of rows by customer rank; stable, so file order survives within a customer.
        var starts = [Int](repeating: 0, count: n + 1)
        for k in of { starts[Int(rank[Int(k)]) + 1] += 1 }
        for k in 0..<n { starts[k + 1] += starts[k] }
        var fill = starts
        // Each row's destination, then the permutation applied in place by following its
        // cycles (every swap puts one row where it belongs): no second copy of the rows.
        var dest = [Int32](repeating: 0, count: total)
        for i in 0..<total {
            let c = Int(rank[Int(of[i])])
            dest[i] = Int32(fill[c])
            fill[c] += 1
        }
        of = []
        input.withUnsafeMutableBufferPointer { rows in
            dest.withUnsafeMutableBufferPointer { d in
                for i in 0..<total {
                    while d[i] != Int32(i) {
                        let j = Int(d[i])
                        rows.swapAt(i, j)
                        d.swapAt(i, j)
                    }
                }
            }
        }
        dest = []
        var rows = input
        input = []
        let sortStarts = starts
        rows.withUnsafeMutableBufferPointer { buf in
            nonisolated(unsafe) let base = buf
            let pieces = chunks(n, pieces: max(1, threads) * 8)
            try? parallelFor(count: pieces.count, threads: threads) { p in
                for k in pieces[p] {
                    let lo = sortStarts[k], hi = sortStarts[k + 1]
                    if hi - lo < 2 { continue }
                    var slice = UnsafeMutableBufferPointer(rebasing: base[lo..<hi])
                    slice.sort { a, b in
                        a.purchaseDate != b.purchaseDate
                            ? a.purchaseDate < b.purchaseDate : strings.less(a.transactionId, b.transactionId)
                    }
                }
            }
        }
        return CustomerRows(
            strings: strings, rows: rows, starts: starts, groups: order.map { firstGroup[$0] },
            originalTransactionIds: order.map { firstOrig[$0] })
    }
}
