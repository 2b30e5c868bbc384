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
            let k = Int32(index.insert(key, Int64(firstGroup.count)))
            if k == firstGroup.count {
                firstGroup.append(r.subscriptionGroupId)
                firstOrig.append(r.originalTransactionId)
            }
            of[i] = k
        }
        let n = firstGroup.count
        let order = (0..<n).sorted { a, b in
            let g = strings.compare(firstGroup[a], firstGroup[b])
            return g != 0 ? g < 0 : strings.less(firstOrig[a], firstOrig[b])
        }
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
