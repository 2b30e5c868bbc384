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
    /// The rows' shared columns, read once here: every thread then reads the same tables
    /// without taking a reference to them per customer.
    public let columns: RowColumns
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
    private struct SortKey: Sendable {
        var group: Int32
        var index: Int32
        var hi: UInt64
        var lo: UInt64
    }

    /// Customer k's rows, as the transactions they are (the evaluation's pass reuses one array:
    /// ``rows(of:into:)``).
    public func rows(of k: Int) -> [Transaction] {
        var out: [Transaction] = []
        rows(of: k, into: &out)
        return out
    }

    /// Customer k's rows, as the transactions they are, into `out` (emptied first).
    @inline(__always)
    public func rows(of k: Int, into out: inout [Transaction]) {
        out.removeAll(keepingCapacity: true)
        for r in UnsafeBufferPointer(rebasing: rows.buffer[starts[k]..<starts[k + 1]]) {
            out.append(columns.transaction(r))
        }
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
        var numbering = numberCustomers(store.buffer, columns: store.columns, threads: threads)
        let keys = sortKeys(numbering.groups, numbering.originals, strings: strings, threads: threads)
        let order = outputOrder(keys, originals: numbering.originals, strings: strings, threads: threads)
        let starts = rankRows(&numbering, order: order, threads: threads)
        placeRows(store.buffer, ranks: &numbering.customerOfRow, starts: starts, strings: strings, threads: threads)
        numbering.customerOfRow = []
        return CustomerRows(
            strings: strings, rows: store, columns: store.columns, starts: starts,
            groups: order.map { numbering.groups[$0] },
            originalTransactionIds: order.map { numbering.originals[$0] })
    }

    /// Every row's customer, numbered part by part (``numberCustomers(_:threads:)``).
    private struct Numbering {
        /// Row i's customer, numbered within its part: part p's customer c is `ofPart[p - 1][c]`
        /// among all of them (part 0's numbers are the run's); ``rankRows`` then turns it into
        /// the customer's rank in output order.
        var customerOfRow: [Int32]
        /// The parts of the rows, each numbered on its own thread.
        var parts: [Range<Int>]
        /// Per part after the first, its customers' numbers among all of them.
        var ofPart: [[Int32]]
        /// Per part, how many of its rows each of its customers has (numbered within the part).
        var rowCounts: [[Int32]]
        /// Customer c's group and originalTransactionId.
        var groups: [Int32]
        var originals: [TransactionKey]
    }

    /// The customers one part of the rows meets, numbered in order of first appearance.
    private struct PartCustomers: Sendable {
        var index: Int64Map
        var groups: [Int32] = []
        var originals: [TransactionKey] = []
        /// Customers whose folded key (``folded(group:original:)``) another one of the part has.
        var collided: [Customer: Int] = [:]

        init(capacity: Int) { index = Int64Map(capacity: capacity) }

        /// The number of customer (group, original), whose folded key is `k`: the next one if new.
        @inline(__always)
        mutating func number(_ k: Int64, group: Int32, original: TransactionKey) -> Int {
            var c = Int(index.insert(k, UInt32(groups.count)))
            if c < groups.count && (groups[c] != group || originals[c] != original) {
                c = collided[Customer(group: group, original: original), default: groups.count]
                collided[Customer(group: group, original: original)] = c
            }
            if c == groups.count {
                groups.append(group)
                originals.append(original)
            }
            return c
        }

        @inline(__always)
        mutating func prefetch(_ k: Int64) { index.prefetch(k) }

        /// A hint to fetch the group and id of the customer whose folded key is `k`, if numbered
        /// (its slot fetched some rows before, ``prefetch(_:)``): most rows are of a customer
        /// met before, whose group and id are then compared.
        @inline(__always)
        mutating func prefetchCustomer(_ k: Int64) {
            guard let c = index.find(k) else { return }
            groups.withUnsafeBufferPointer { winback_prefetch($0.baseAddress! + Int(c)) }
            originals.withUnsafeBufferPointer { winback_prefetch($0.baseAddress! + Int(c)) }
        }

        /// The number of customer (group, original), whose folded key is `k`, if already
        /// numbered; read only, through `lookup` (this part's index's).
        @inline(__always)
        func known(_ k: Int64, group: Int32, original: TransactionKey, _ lookup: Int64Map.Lookup) -> Int? {
            guard let found = lookup.find(k) else { return nil }
            let c = Int(found)
            if groups[c] == group && originals[c] == original { return c }
            return collided[Customer(group: group, original: original)]
        }
    }

    /// Customer ids: the rows are cut into one part per thread, each thread numbers the
    /// customers of its part in row order, then the parts' customers are numbered among all in
    /// part order, which is the numbering one pass over every row gives. Each thread reads only
    /// its part's rows (with hash shards, every thread read every row to keep its own).
    private static func numberCustomers(
        _ input: UnsafeMutableBufferPointer<CompactRow>, columns: RowColumns, threads: Int
    ) -> Numbering {
        let total = input.count
        let parts = chunks(total, pieces: max(1, min(threads, 64)))
        @Sendable @inline(__always) func key(_ r: CompactRow) -> Int64 {
            folded(group: columns.group(r), original: r.originalTransactionId)
        }
        // Left unfilled here: every row is numbered by its part's thread (and the pages are
        // first touched by the threads, not zeroed on this one).
        var of = [Int32](unsafeUninitializedCapacity: total) { _, n in n = total }
        let found = ResultSlots<PartCustomers>(count: parts.count)
        // How many of its part's rows each of the part's customers has.
        let counted = ResultSlots<[Int32]>(count: parts.count)
        let r = UnsafeBufferPointer(input)
        of.withUnsafeMutableBufferPointer { o in
            nonisolated(unsafe) let rows = r
            nonisolated(unsafe) let local = o
            try? parallelFor(count: parts.count, threads: threads) { p in
                let part = parts[p]
                // A part of a run's rows meets about one customer per four of them.
                var customers = PartCustomers(capacity: part.count / 4)
                var counts: [Int32] = []
                for i in part {
                    if i + 8 < part.upperBound { customers.prefetch(key(rows[i + 8])) }
                    if i + 4 < part.upperBound { customers.prefetchCustomer(key(rows[i + 4])) }
                    let c = customers.number(
                        key(rows[i]), group: columns.group(rows[i]), original: rows[i].originalTransactionId)
                    local[i] = Int32(c)
                    if c == counts.count { counts.append(1) } else { counts[c] &+= 1 }
                }
                found[p] = customers
                counted[p] = counts
            }
        }
        // Moved out of their slots: numbering the later parts' customers into the first part's
        // index must not copy it.
        var later = found.takeAll()
        guard !later.isEmpty else {
            return Numbering(customerOfRow: [], parts: [], ofPart: [], rowCounts: [], groups: [], originals: [])
        }
        let rowCounts = counted.takeAll()
        var all = later.removeFirst()
        // In part order: a customer met in an earlier part keeps the number it has there (looked
        // up on every thread), one met for the first time gets the next (in order, on this one).
        // The last part's new customers only take the next numbers: no later part looks them up,
        // so they do not enter the index (on two threads, no customer does).
        var ofPart: [[Int32]] = []
        for (j, part) in later.enumerated() {
            var numbers = known(part, among: all, threads: threads)
            let looked = j < later.count - 1
            for c in numbers.indices where numbers[c] < 0 {
                let (group, original) = (part.groups[c], part.originals[c])
                if looked {
                    numbers[c] = Int32(
                        all.number(folded(group: group, original: original), group: group, original: original))
                } else {
                    numbers[c] = Int32(all.groups.count)
                    all.groups.append(group)
                    all.originals.append(original)
                }
            }
            ofPart.append(numbers)
        }
        return Numbering(
            customerOfRow: of, parts: parts, ofPart: ofPart, rowCounts: rowCounts, groups: all.groups,
            originals: all.originals)
    }

    /// The numbers `all` has for `part`'s customers, -1 for those it has not; looked up on
    /// `threads` threads.
    private static func known(_ part: PartCustomers, among all: PartCustomers, threads: Int) -> [Int32] {
        let n = part.groups.count
        var numbers = [Int32](unsafeUninitializedCapacity: n) { _, count in count = n }  // all written below
        numbers.withUnsafeMutableBufferPointer { out in
            nonisolated(unsafe) let out = out
            all.index.withLookup { lookup in
                let pieces = chunks(n, pieces: max(1, threads) * 4)
                try? parallelFor(count: pieces.count, threads: threads) { k in
                    for c in pieces[k] {
                        let (group, original) = (part.groups[c], part.originals[c])
                        let key = folded(group: group, original: original)
                        out[c] = Int32(all.known(key, group: group, original: original, lookup) ?? -1)
                    }
                }
            }
        }
        return numbers
    }

    /// Each customer's place in output order as integer keys: bytewise by (group,
    /// originalTransactionId) through the group's rank among the few groups, then the id's first
    /// 16 bytes big-endian (ids hold no NUL, so zero padding orders a prefix first); only ids
    /// equal in those bytes compare in full (``before(_:_:originals:strings:)``).
    private static func sortKeys(
        _ groups: [Int32], _ originals: [TransactionKey], strings: StringTable, threads: Int
    ) -> [SortKey] {
        let n = groups.count
        let groupIds = distinct(groups).sorted { strings.less($0, $1) }
        var groupRank: [Int32: Int32] = [:]
        for (r, g) in groupIds.enumerated() { groupRank[g] = Int32(r) }
        var keys = [SortKey](unsafeUninitializedCapacity: n) { _, count in count = n }  // all written below
        keys.withUnsafeMutableBufferPointer { out in
            nonisolated(unsafe) let out = out
            let ranks = groupRank
            let pieces = chunks(n, pieces: threads * 4)
            try? parallelFor(count: pieces.count, threads: threads) { p in
                for k in pieces[p] {
                    let (hi, lo) = originals[k].withBytes(in: strings) { CustomerRows.prefixKey($0) }
                    out[k] = SortKey(group: ranks[groups[k]]!, index: Int32(k), hi: hi, lo: lo)
                }
            }
        }
        return keys
    }

    /// The distinct values of `groups`, in no particular order. A run has a handful of
    /// subscription groups: each customer's is looked for among those found so far (a set of
    /// every customer's, on one thread, cost as much as sorting the keys on two); past
    /// sixteen, a set of them all.
    static func distinct(_ groups: [Int32]) -> [Int32] {
        var found: [Int32] = []
        var last: Int32?
        for g in groups where g != last {
            last = g
            if found.contains(g) { continue }
            if found.count == 16 { return Array(Set(groups)) }
            found.append(g)
        }
        return found
    }

    /// Output order of two customers' keys.
    @inline(__always)
    private static func before(
        _ a: SortKey, _ b: SortKey, originals: [TransactionKey], strings: StringTable
    ) -> Bool {
        if a.group != b.group { return a.group < b.group }
        if a.hi != b.hi { return a.hi < b.hi }
        if a.lo != b.lo { return a.lo < b.lo }
        return strings.less(originals[Int(a.index)], originals[Int(b.index)])
    }

    /// The customers in output order: each thread's share of the keys sorted on its own, then
    /// the shares merged. Customers differ in (group, id), so the order is total and any sort
    /// gives the same. The keys are sorted themselves, not indices to them, so that
    /// comparisons read no other array.
    private static func outputOrder(
        _ keys: [SortKey], originals: [TransactionKey], strings: StringTable, threads: Int
    ) -> [Int] {
        let shares = chunks(keys.count, pieces: threads)
        let sortedShares = ResultSlots<[SortKey]>(count: shares.count)
        try? parallelFor(count: shares.count, threads: threads) { p in
            sortedShares[p] = keys[shares[p]].sorted { before($0, $1, originals: originals, strings: strings) }
        }
        let sorted = sortedShares.all
        var merged: [SortKey] = sorted.first ?? []
        // Each share merged in on every thread (customers are distinct: no two keys tie).
        for share in sorted.dropFirst() {
            merged = parallelMerge(merged, share, threads: threads) {
                before($0, $1, originals: originals, strings: strings)
            }
        }
        return merged.map { Int($0.index) }
    }

    /// Each row's customer number becomes that customer's rank in output order (`order[rank]`
    /// is the customer); returns where each customer's rows start, once placed.
    private static func rankRows(_ numbering: inout Numbering, order: [Int], threads: Int) -> [Int] {
        let n = order.count
        var rank = [Int32](repeating: 0, count: n)
        for (r, k) in order.enumerated() { rank[k] = Int32(r) }
        // Each part in pieces, so that every thread ranks rows of every part.
        let pieces = numbering.parts.enumerated().flatMap { p, part in
            chunks(part.count, pieces: max(1, threads) * 4).map {
                (p, $0.lowerBound + part.lowerBound..<$0.upperBound + part.lowerBound)
            }
        }
        let ofPart = numbering.ofPart
        numbering.customerOfRow.withUnsafeMutableBufferPointer { o in
            nonisolated(unsafe) let ranks = o
            let rankOf = rank
            try? parallelFor(count: pieces.count, threads: threads) { k in
                let (p, piece) = pieces[k]
                if p == 0 {
                    for i in piece { ranks[i] = rankOf[Int(ranks[i])] }
                } else {
                    let of = ofPart[p - 1]
                    for i in piece { ranks[i] = rankOf[Int(of[Int(ranks[i])])] }
                }
            }
        }
        // Each customer's rows, from the parts' counts: a pass over the customers of each part,
        // not over every row on one thread.
        var starts = [Int](repeating: 0, count: n + 1)
        for (p, counts) in numbering.rowCounts.enumerated() {
            if p == 0 {
                for (c, rows) in counts.enumerated() { starts[Int(rank[c]) + 1] += Int(rows) }
            } else {
                let of = ofPart[p - 1]
                for (c, rows) in counts.enumerated() { starts[Int(rank[Int(of[c])]) + 1] += Int(rows) }
            }
        }
        numbering.ofPart = []
        numbering.rowCounts = []
        for k in 0..<n { starts[k + 1] += starts[k] }
        return starts
    }

    /// Rows to their customers' places, in place: first into one contiguous region per thread
    /// (whole customers, about equal rows), then each region on its own thread by following the
    /// cycles of its permutation (every move puts one row where it belongs). No second copy of
    /// the rows is ever made. Each customer's rows are sorted by (purchaseDate, transactionId)
    /// as their bucket is placed.
    private static func placeRows(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, ranks of: inout [Int32], starts: [Int],
        strings: StringTable, threads: Int
    ) {
        let total = rows.count
        let n = starts.count - 1
        let parts = max(1, min(threads, n))
        var bounds = [0]  // customer ranks where regions start
        for p in 1..<parts {
            var c = bounds[p - 1]
            while c < n && starts[c] < total * p / parts { c += 1 }
            bounds.append(c)
        }
        bounds.append(n)
        of.withUnsafeMutableBufferPointer { ranks in
            toRegions(rows, ranks, starts: starts, bounds: bounds, threads: threads)
            nonisolated(unsafe) let rowsAll = rows
            nonisolated(unsafe) let ranksAll = ranks
            let regionBounds = bounds
            try? parallelFor(count: parts, threads: threads) { p in
                placeRegion(
                    rowsAll, ranksAll, customers: regionBounds[p]..<regionBounds[p + 1], starts: starts,
                    strings: strings)
            }
        }
    }

    /// Each row to its region (customer ranks `bounds[p]..<bounds[p + 1]`): with two, by
    /// swapping strays in pairs; otherwise by ``distribute``, regions for buckets.
    private static func toRegions(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, _ ranks: UnsafeMutableBufferPointer<Int32>, starts: [Int],
        bounds: [Int], threads: Int
    ) {
        let parts = bounds.count - 1
        // One region holds every row already (one thread): nothing to look at.
        guard parts > 1 else { return }
        let total = rows.count
        nonisolated(unsafe) let rowsAll = rows
        nonisolated(unsafe) let ranksAll = ranks
        if parts == 2 {
            // Two regions hold as many rows of the other as the other holds of them: each
            // thread finds its region's strays, then the pairs are swapped, also on both threads.
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
            @inline(__always) func region(_ c: Int32) -> Int {
                var p = 0
                while Int(c) >= bounds[p + 1] { p += 1 }
                return p
            }
            var next = (0..<parts).map { starts[bounds[$0]] }
            distribute(
                rows, ranks, next: &next, end: (0..<parts).map { starts[bounds[$0 + 1]] },
                bucket: { region($0) }, done: { _ in })
        }
    }

    /// Places one region's rows (those of `customers`, already in the region): first to buckets
    /// of at most 512 consecutive customers, each bucket then placed and its customers sorted
    /// while its rows are still in the caches (a bucket of the 200k world's, about 5,000 rows,
    /// and its copy fit in a core's second-level cache): following single rows through the
    /// whole region would miss the caches on nearly every row.
    private static func placeRegion(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, _ ranks: UnsafeMutableBufferPointer<Int32>,
        customers: Range<Int>, starts: [Int], strings: StringTable
    ) {
        let first = customers.lowerBound
        let hi = starts[customers.upperBound]
        var fill = Array(starts[customers])
        var shift = 0
        while customers.count >> shift > 512 { shift += 1 }
        let buckets = customers.isEmpty ? 0 : (customers.count - 1) >> shift + 1
        var next = (0..<buckets).map { starts[first + $0 << shift] }
        let end = (0..<buckets).map { $0 + 1 < buckets ? starts[first + ($0 + 1) << shift] : hi }
        // Room for a bucket's rows and their order, so that each row is copied out, its
        // customer's rows sorted as indexes, and each row written once to its sorted place
        // (stores that do not wait on each other), rather than carried along its cycle (a load
        // that waits on the one before) and then sorted where it lands (56 bytes a swap); a
        // bucket larger than `copyLimit` rows is carried.
        let room = min((0..<buckets).reduce(0) { max($0, end[$1] - next[$1]) }, copyLimit)
        let ids = strings.reader  // no reference taken per customer sorted
        let copy = UnsafeMutableBufferPointer<CompactRow>.allocate(capacity: room)
        let order = UnsafeMutableBufferPointer<Int32>.allocate(capacity: room)
        defer {
            copy.deallocate()
            order.deallocate()
        }
        distribute(
            rows, ranks, next: &next, end: end, bucket: { (Int($0) - first) >> shift },
            done: { b in
                let those = (first + b << shift)..<min(first + (b + 1) << shift, customers.upperBound)
                let range = starts[those.lowerBound]..<end[b]
                if range.count <= room {
                    placeSorted(
                        rows, ranks, customers: those, first: first, fill: &fill, starts: starts, strings: ids,
                        copy: copy, order: order)
                } else {
                    carry(rows, ranks, range: range, first: first, fill: &fill)
                    sortByDate(rows, customers: those, starts: starts, strings: ids)
                }
            })
    }

    /// The most rows of a bucket ``placeRegion`` copies out to place (3.5 MB).
    static let copyLimit = 1 << 16

    /// The rows of `customers` (consecutive customers of a region whose first is `first`, their
    /// rows among `starts[customers]`), each written to its place: copied out to `copy`, their
    /// indexes there gathered by customer in `order` (at the offsets `fill`, the next free
    /// place of each of the region's customers, gives) and sorted by (purchaseDate,
    /// transactionId), then each row written from the copy in that order.
    @inline(__always)
    private static func placeSorted(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, _ ranks: UnsafeMutableBufferPointer<Int32>,
        customers: Range<Int>, first: Int, fill: inout [Int], starts: [Int], strings: StringTable.Reader,
        copy: UnsafeMutableBufferPointer<CompactRow>, order: UnsafeMutableBufferPointer<Int32>
    ) {
        let lo = starts[customers.lowerBound]
        let n = starts[customers.upperBound] - lo
        let base = rows.baseAddress!
        let from = copy.baseAddress!
        from.initialize(from: base + lo, count: n)  // rows are trivial: written over bucket after bucket
        // Customer k's rows go to starts[k]...: their indexes in the copy, at the same offsets
        // in `order`.
        for i in 0..<n {
            let c = Int(ranks[lo + i]) - first
            order[fill[c] - lo] = Int32(i)
            fill[c] += 1
        }
        for k in customers {
            let a = starts[k] - lo
            let z = starts[k + 1] - lo
            if z - a > 1 {
                var mine = UnsafeMutableBufferPointer(rebasing: order[a..<z])
                mine.sort { i, j in
                    let (x, y) = (from[Int(i)], from[Int(j)])
                    return x.purchaseDate != y.purchaseDate
                        ? x.purchaseDate < y.purchaseDate : strings.less(x.transactionId, y.transactionId)
                }
            }
            for j in a..<z { base[lo + j] = from[Int(order[j])] }
        }
    }

    /// The rows of `range` (whole customers of a region whose first customer is `first`), each
    /// moved to its place, the next free one of its customer (in `fill`), by following the
    /// cycles of that permutation, each row's destination kept in `ranks` (the rank is no
    /// longer needed once read).
    @inline(__always)
    private static func carry(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, _ ranks: UnsafeMutableBufferPointer<Int32>,
        range: Range<Int>, first: Int, fill: inout [Int]
    ) {
        for i in range {
            let c = Int(ranks[i]) - first
            ranks[i] = Int32(fill[c])
            fill[c] += 1
        }
        for i in range where ranks[i] != Int32(i) {
            var carry = rows[i]
            var j = Int(ranks[i])
            ranks[i] = Int32(i)
            while j != i {
                let next = Int(ranks[j])
                swap(&carry, &rows[j])
                ranks[j] = Int32(j)
                j = next
            }
            rows[i] = carry
        }
    }

    /// Each of `customers`' rows, once placed, by (purchaseDate, transactionId).
    @inline(__always)
    private static func sortByDate(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, customers: Range<Int>, starts: [Int],
        strings: StringTable.Reader
    ) {
        for k in customers {
            let lo = starts[k]
            let hi = starts[k + 1]
            if hi - lo < 2 { continue }
            var customer = UnsafeMutableBufferPointer(rebasing: rows[lo..<hi])
            customer.sort { a, b in
                a.purchaseDate != b.purchaseDate
                    ? a.purchaseDate < b.purchaseDate : strings.less(a.transactionId, b.transactionId)
            }
        }
    }

    /// The American-flag method on rows and their ranks: bucket b (of `bucket(rank)`) ends in
    /// next[b]..<end[b], the buckets being consecutive. A row not in its bucket is carried to
    /// its bucket's next free place, and the row found there on in turn; the place after is
    /// fetched ahead, so that the next visit to that bucket finds it in the caches. `done(b)`
    /// is called as soon as bucket b holds all its rows.
    @inline(__always)
    private static func distribute(
        _ rows: UnsafeMutableBufferPointer<CompactRow>, _ ranks: UnsafeMutableBufferPointer<Int32>,
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
