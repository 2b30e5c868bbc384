import CWinBackShims
import Foundation
import WinBackModel
import WinBackSupport

/// Merges files into the run as they finish reading, in whatever order they finish: their ids
/// into the run's string table, their terms and tokens into the run's columns. A file's own
/// tables are released as soon as it is merged, so only the files being read hold one. Only
/// that is done under the lock: each row is tagged with its part by the thread that read the file,
/// and deduplication waits for ``finish(threads:capture:)``, which cuts the keys into parts by
/// their hashes and deduplicates each part on a thread of its own.
///
/// It takes three kinds of things, each in its own slot: a file read now (``FileRows``), and
/// of an incremental run (docs/rules.md §12) a file its state absorbed (``AbsorbedFile``:
/// counts, no rows) and a piece of the state's rows (``StateRows``: rows, counting none).
///
/// The outcome does not depend on the order nor on the parts: deduplication compares
/// (signedDate, file, line) explicitly, and string ids are renumbered at the end in order of
/// first appearance by (file, local id), which is the numbering a merge in path order gives.
// A file's strings and columns are merged under `lock`, its rows then settled by the thread that
// read it (no other touches them before `finish`, which runs after every file was added).
package final class Merger: @unchecked Sendable {
    /// What a slot holds once merged: its rows (none for an absorbed file) with what the merge
    /// decides of them, and what its file counted (nil for the state's rows, which are no file).
    // Filled under the lock; in `finish`, each thread touches only its own slots.
    private final class Slot: @unchecked Sendable {
        let counts: FileCounts?
        let meeting: Meeting
        @exclusivity(unchecked) var rows: RowChunks
        /// Each row's part tag until deduplicated: the top 8 bits of its version key's hash
        /// (``WinnerIndex/hash(_:)`` of ``VersionKey/hash``), which say the part it is
        /// deduplicated in; a byte a row, the hash itself taken again there.
        @exclusivity(unchecked) var tags: [UInt8] = []
        /// Local string id → the run's string id.
        @exclusivity(unchecked) var map: [Int32]
        /// Rows that lost deduplication to another version of their transaction.
        @exclusivity(unchecked) var superseded: [UInt64]
        /// Renewal info found among the transactions (signed files), keyed with local ids.
        @exclusivity(unchecked) var renewals: [(key: TransactionKey, info: RenewalInfo)]
        /// Each row's file, as its index in sorted path order (the row's place in the order
        /// deduplication goes by), when the rows are of several files, in (file, line) order;
        /// nil for the rows of one file, whose index is the slot's.
        @exclusivity(unchecked) var ranks: [UInt32]?

        init(
            counts: FileCounts?, meeting: Meeting, rows: RowChunks, map: [Int32],
            renewals: [(key: TransactionKey, info: RenewalInfo)], ranks: [UInt32]?
        ) {
            self.counts = counts
            self.meeting = meeting
            self.rows = rows
            self.map = map
            superseded = [UInt64](repeating: 0, count: (rows.count + 63) / 64)
            self.renewals = renewals
            self.ranks = ranks
        }

        /// Rows of the state (docs/rules.md §12): deduplicated after every file, counted in none.
        var isState: Bool { counts == nil }

        @inline(__always) func supersede(_ i: Int) { superseded[i >> 6] |= 1 << UInt64(i & 63) }

        /// Row `j`'s version key with the run's string ids (as far as merged: ``map``), its
        /// terms being those of `columns` (the run's: a merged row's are rewritten to them).
        func key(_ j: Int, _ columns: RowColumns) -> VersionKey {
            map.withUnsafeBufferPointer { VersionKey(rows.stored(j), $0, columns) }
        }

        /// Outside the merger's lock, once the file's columns are the run's (`maps`): rewrites the
        /// rows' terms and tokens to the run's and tags each row with its part (its key's group
        /// through `maps.groups`, by the file's own terms, since the run's columns change meanwhile).
        func settle(_ maps: ColumnMaps) {
            let count = rows.count
            tags = [UInt8](unsafeUninitializedCapacity: count) { out, filled in
                rows.withChunks { chunks in
                    map.withUnsafeBufferPointer { map in
                        maps.groups.withUnsafeBufferPointer { groups in
                            maps.terms.withUnsafeBufferPointer { terms in
                                maps.tokens.withUnsafeBufferPointer { tokens in
                                    for i in 0..<count {
                                        let r =
                                            chunks[i >> TransactionRows.chunkShift]
                                            + (i & (TransactionRows.chunkRows - 1))
                                        let local = Int(r.pointee.terms)
                                        let key = VersionKey(r.pointee, map, group: groups[local])
                                        out[i] = UInt8(truncatingIfNeeded: WinnerIndex.hash(key.hash) >> 24)
                                        r.pointee.terms = terms[local]
                                        if r.pointee.token >= 0 { r.pointee.token = tokens[Int(r.pointee.token)] }
                                    }
                                }
                            }
                        }
                    }
                }
                filled = count
            }
        }
    }

    /// Where a file's terms and tokens are among the run's, and the run's string id of the
    /// group of each of its terms.
    private struct ColumnMaps {
        var groups: [Int32]
        var terms: [Int32]
        var tokens: [Int32]
    }

    /// How a slot's rows meet the deduplication index.
    private enum Meeting {
        /// A file read now: its rows enter the index.
        case entering
        /// The rows of an incremental run's state (docs/rules.md §12), deduplicated once every
        /// file read now entered the index: they are the winners among the absorbed files, so
        /// each meets at most the rows of the files read now, found by looking its key up. No
        /// row of the state enters the index, which stays the size of the night's files.
        case lookingUp
        /// An absorbed file: its rows are among the state's.
        case none
    }

    @exclusivity(unchecked) private var files: [Slot?]
    private let lock = NSLock()
    /// The run's strings: groups, products, offers, storefronts and the like, and only the
    /// transaction ids and tokens that are not canonical (most are kept as numbers), so a
    /// table that grows as it must (a table made for 65,536 cleared 1 MB of slots before the
    /// first file was read, on one thread).
    private let strings = StringTable()
    /// The run's shared columns of the rows (with the string ids of ``strings`` until ``finish``
    /// renumbers them): every file's are entered here as it is merged, and its rows' terms and
    /// tokens rewritten to these.
    @exclusivity(unchecked) private var columns = RowColumns()
    /// Where every file's rows are written as they are read.
    package let store: TransactionRows
    /// The first row number of each merged file, ascending, with the file's index.
    @exclusivity(unchecked) private var merged: [(first: Int, file: Int)] = []
    @exclusivity(unchecked) private var rowsMerged = 0
    /// The rejects of the files merged so far: only those that may be listed are held.
    @exclusivity(unchecked) private var rejects: RejectList

    /// Rows a part of the keys holds at most, about (``deduplicate(threads:)``).
    private let partRows: Int

    /// A merger of `count` slots. `partRows` (a power of two) bounds the rows deduplicated
    /// together, about: smaller parts only in tests.
    package init(count: Int, limits: ReadLimits = .default, partRows: Int = 1 << 18) throws {
        precondition(partRows > 0 && partRows & (partRows - 1) == 0, "parts of a power of two rows")
        rejects = RejectList(limit: limits.maxRejectsListed)
        store = try TransactionRows(reservingForRead: ())
        files = Array(repeating: nil, count: count)
        self.partRows = partRows
    }

    /// Takes over file `index` once read; merges it under the lock. With `ranks` its rows are
    /// of several files, each row's index in sorted path order given, in (file, line) order.
    package func add(_ f: FileRows, index: Int, ranks: [UInt32]? = nil) {
        precondition(ranks == nil || ranks!.count == f.rows.count, "a rank for every row")
        f.rows.settle()
        let (slot, maps) = lock.withLock {
            let slot = Slot(
                counts: f.counts, meeting: .entering, rows: f.rows, map: strings.merge(f.table), renewals: f.renewals,
                ranks: ranks)
            rejects.merge(f.rejects)
            // The file's table, rejects and rows are the merger's now: released from it.
            f.table = StringTable(capacity: 1)
            f.rejects = RejectList(limit: 0)
            f.renewals = []
            f.rows = RowChunks(store: store)
            return (slot, merge(slot, index: index))
        }
        slot.settle(maps)
    }

    /// Takes over file `index`, which an incremental run's state absorbed: its counts, rejects
    /// and renewal info; no rows.
    package func add(_ a: AbsorbedFile, index: Int) {
        lock.lock()
        defer { lock.unlock() }
        let slot = Slot(
            counts: a.counts, meeting: .none, rows: RowChunks(store: store), map: strings.merge(a.table),
            renewals: a.renewals, ranks: nil)
        rejects.merge(a.rejects)
        _ = merge(slot, index: index)
    }

    /// Takes over a piece of the state's rows at `index`, in any order with the files: its rows
    /// only look their keys up once every file's entered (``deduplicate(threads:)``).
    package func add(_ s: StateRows, index: Int) {
        precondition(s.ranks.count == s.rows.count, "a rank for every row")
        var s = s
        s.rows.settle()
        let (slot, maps) = lock.withLock {
            let slot = Slot(
                counts: nil, meeting: .lookingUp, rows: s.rows, map: strings.merge(s.table), renewals: [],
                ranks: s.ranks)
            return (slot, merge(slot, index: index))
        }
        slot.settle(maps)
    }

    /// Takes slot `index` in, under the lock: its rows numbered after those merged so far, its
    /// terms and tokens entered in the run's columns. Returns where they are there, for the rows
    /// to be rewritten outside the lock (``Slot/settle(_:)``).
    private func merge(_ f: Slot, index: Int) -> ColumnMaps {
        files[index] = f
        let first = rowsMerged
        precondition(first + f.rows.count < Int(UInt32.max), "more than 4 billion rows in one run")
        merged.append((first, index))
        rowsMerged += f.rows.count
        if case .none = f.meeting { return ColumnMaps(groups: [], terms: [], tokens: []) }
        // The file's terms and tokens into the run's: the file's own tables are let go of.
        let local = f.rows.takeColumns()
        let map = f.map
        let groups = local.terms.values.map { map[Int($0.subscriptionGroupId)] }
        let (terms, tokens) = columns.merge(local, strings: map.span)
        return ColumnMaps(groups: groups, terms: terms, tokens: tokens)
    }

    /// Deduplicates every row merged (docs/rules.md §3 rule 1), the files' superseded rows
    /// marked: the keys cut into parts by the top bits of their hashes, each part's on one thread
    /// with an index of its own, which is only the part's size. In a part, every row of a file
    /// read now enters the index, then every row of the state looks its key up.
    private func deduplicate(threads: Int) {
        let files = self.files.map { $0! }
        let merged = self.merged
        let columns = self.columns
        let entering = files.indices.filter { if case .entering = files[$0].meeting { true } else { false } }
        let lookingUp = files.indices.filter { if case .lookingUp = files[$0].meeting { true } else { false } }
        let enteringRows = entering.reduce(0) { $0 + files[$1].rows.count }
        // Parts of at most about `partRows` rows entering (256 K), so that each index stays in
        // the caches, and one for every thread when there are rows enough to share (a quarter
        // part, those of the state that look their keys up counted: a night's state holds far
        // more rows than its new files); a power of two. Every part looks at every row's tag
        // (a byte) to find its own.
        let rows = enteringRows + lookingUp.reduce(0) { $0 + files[$1].rows.count }
        var bits = 0
        while bits < 8 && (enteringRows >= partRows << bits || (rows >= partRows >> 2 && 1 << bits < threads)) {
            bits += 1
        }
        let shift = bits
        let parts = 1 << shift
        let perPart = enteringRows >> shift
        /// The file index and row of a row number.
        @Sendable func locate(_ n: Int) -> (file: Int, row: Int) {
            var lo = 0
            var hi = merged.count - 1
            while lo < hi {
                let mid = (lo + hi + 1) / 2
                if merged[mid].first <= n { lo = mid } else { hi = mid - 1 }
            }
            return (merged[lo].file, n - merged[lo].first)
        }
        var firsts = [Int](repeating: 0, count: files.count)
        for (first, file) in merged { firsts[file] = first }
        let firstRow = firsts
        let lost = ResultSlots<[(file: Int32, row: Int32)]>(count: parts)
        try? parallelFor(count: parts, threads: threads) { part in
            var winners = WinnerIndex(capacity: perPart + perPart / 8, shift: shift)
            var losers: [(file: Int32, row: Int32)] = []
            // The part's rows, each once: its hash's top `shift` bits are `part`'s.
            let top = UInt8(part)
            @inline(__always) func inPart(_ tag: UInt8) -> Bool { shift == 0 || tag >> UInt8(8 - shift) == top }
            for fi in entering + lookingUp {
                let f = files[fi]
                let lookingUp: Bool
                if case .lookingUp = f.meeting { lookingUp = true } else { lookingUp = false }
                let first = firstRow[fi]
                f.tags.withUnsafeBufferPointer { tags in
                    f.rows.withChunks { chunks in
                        f.map.withUnsafeBufferPointer { map in
                            @inline(__always) func row(_ i: Int) -> UnsafeMutablePointer<CompactRow> {
                                chunks[i >> TransactionRows.chunkShift] + (i & (TransactionRows.chunkRows - 1))
                            }
                            let count = tags.count
                            // The part's next rows in two queues: sixteen whose ids are being
                            // fetched (a part's rows are scattered among the others', so each
                            // would wait on memory), then eight whose hashes are taken and whose
                            // slots are being fetched.
                            let idsOffset = MemoryLayout<CompactRow>.offset(of: \.transactionId)!
                            var fetching = InlineArray<16, Int>(repeating: 0)
                            var fetched = 0
                            var hashing = 0
                            var queue = InlineArray<8, Int>(repeating: 0)
                            var queuedHashes = InlineArray<8, UInt32>(repeating: 0)
                            var next = 0  // the next row to look at for the queues
                            var queued = 0
                            var taken = 0
                            while true {
                                while fetched - hashing < 16 && next < count {
                                    if inPart(tags[next]) {
                                        // The ids and terms: bytes 32 to 55 of the row.
                                        let ids = UnsafeRawPointer(row(next)) + idsOffset
                                        winback_prefetch(ids)
                                        winback_prefetch(ids + 23)
                                        fetching[fetched & 15] = next
                                        fetched += 1
                                    }
                                    next += 1
                                }
                                while queued - taken < 8 && hashing < fetched {
                                    let n = fetching[hashing & 15]
                                    hashing += 1
                                    let h = WinnerIndex.hash(VersionKey(row(n).pointee, map, columns).hash)
                                    winners.prefetch(hash: h)
                                    queue[queued & 7] = n
                                    queuedHashes[queued & 7] = h
                                    queued += 1
                                }
                                guard taken < queued else { break }
                                let i = queue[taken & 7]
                                let h = queuedHashes[taken & 7]
                                taken += 1
                                let here = UInt32(first + i)
                                // Asked only when a row's hash bits match: the key is made then.
                                let same = { (n: UInt32) -> Bool in
                                    let (fo, j) = locate(Int(n))
                                    return files[fo].key(j, columns) == VersionKey(row(i).pointee, map, columns)
                                }
                                let found =
                                    lookingUp
                                    ? winners.find(hash: h, same: same) : winners.insert(hash: h, here, same: same)
                                guard let found else { continue }
                                let (there, slot) = found
                                // Newest signedDate wins; on a tie the later file, then the later line.
                                let (fo, j) = locate(Int(there))
                                let other = files[fo]
                                let a = row(i).pointee.signedDate
                                let b = other.rows.stored(j).signedDate
                                if a > b
                                    || (a == b && (Merger.rank(f, fi, i), i) > (Merger.rank(other, fo, j), j))
                                {
                                    losers.append((Int32(fo), Int32(j)))
                                    winners.replace(at: slot, with: here)
                                } else {
                                    losers.append((Int32(fi), Int32(i)))
                                }
                            }
                        }
                    }
                }
            }
            lost[part] = losers
        }
        for part in 0..<parts {
            for (file, row) in lost[part]! { files[Int(file)].supersede(Int(row)) }
        }
        for f in files { f.tags = [] }
    }

    /// Whether slot `index` holds a file.
    package func filled(_ index: Int) -> Bool { lock.withLock { files[index] != nil } }

    /// The place in the order deduplication goes by of row `j` of `f`, merged as file `slot`:
    /// the file's index in sorted path order (for a state's rows, that of the file each came from).
    @inline(__always)
    private static func rank(_ f: Slot, _ slot: Int, _ j: Int) -> Int {
        if let ranks = f.ranks { return Int(ranks[j]) }
        return slot
    }

    /// Renumbers ids, then gathers the winning Production rows of every file, in no defined
    /// order (``TransactionRows/compact(threads:tally:used:keep:)``): what follows groups them.
    /// With `capture` (an incremental run), every winner, of any environment, and every renewal
    /// info found among the transactions is handed to it first, by file, with the run's ids.
    package func finish(threads: Int, capture: WinnerCapture? = nil) -> TransactionSet {
        deduplicate(threads: threads)
        let files = self.files.map { $0! }
        // Run ids in order of first appearance by (file, local id).
        var canonical = [Int32](repeating: -1, count: strings.count)
        var order: [Int32] = []
        order.reserveCapacity(strings.count)
        for f in files {
            for temp in f.map where canonical[Int(temp)] < 0 {
                canonical[Int(temp)] = Int32(order.count)
                order.append(temp)
            }
        }
        let run = strings.reordered(order)
        let runIds = canonical
        try? parallelFor(count: files.count, threads: threads) { fi in
            let f = files[fi]
            for k in f.map.indices { f.map[k] = runIds[Int(f.map[k])] }
        }
        columns.renumber(runIds)
        store.columns = columns
        if let capture { self.capture(files, strings: run, into: capture, threads: threads) }
        // Each chunk's file and place in it, then the winning Production rows packed where
        // they were read. The files' superseded bits and id maps are laid end to end in two
        // buffers, so that deciding a row's fate takes no reference to its file.
        let bitStarts = files.reduce(into: [0]) { $0.append($0.last! + $1.superseded.count) }
        let mapStarts = files.reduce(into: [0]) { $0.append($0.last! + $1.map.count) }
        let bits = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: Swift.max(1, bitStarts.last!))
        let maps = UnsafeMutableBufferPointer<Int32>.allocate(capacity: Swift.max(1, mapStarts.last!))
        defer {
            bits.deallocate()
            maps.deallocate()
        }
        for (fi, f) in files.enumerated() {
            _ = UnsafeMutableBufferPointer(rebasing: bits[bitStarts[fi]...]).initialize(from: f.superseded)
            _ = UnsafeMutableBufferPointer(rebasing: maps[mapStarts[fi]...]).initialize(from: f.map)
        }
        var owners = [(file: Int32, seq: Int32)](repeating: (0, 0), count: store.chunkCount)
        for (fi, f) in files.enumerated() {
            for (seq, c) in f.rows.numbers.enumerated() { owners[c] = (Int32(fi), Int32(seq)) }
        }
        let chunkOwners = owners
        let rowCounts = files.map(\.rows.count)
        nonisolated(unsafe) let supersededBits = UnsafeBufferPointer(bits)
        nonisolated(unsafe) let idMaps = UnsafeBufferPointer(maps)
        let terms = columns.terms
        // Winners (rows no other version superseded), the Production ones among them, and the
        // family-shared ones of those, counted as the rows are packed.
        let tallies = store.compact(
            threads: threads, tally: (winners: 0, kept: 0, family: 0),
            used: { c in
                let o = chunkOwners[c]
                return min(TransactionRows.chunkRows, rowCounts[Int(o.file)] - Int(o.seq) << TransactionRows.chunkShift)
            },
            keep: { t, c, k, r in
                let o = chunkOwners[c]
                let file = Int(o.file)
                let i = Int(o.seq) << TransactionRows.chunkShift + k
                guard supersededBits[bitStarts[file] + i >> 6] & (1 << UInt64(i & 63)) == 0 else { return false }
                t.winners += 1
                let c = terms[r.terms]
                guard c.production else { return false }
                t.kept += 1
                if c.ownership == .familyShared { t.family += 1 }
                r.remap(strings: idMaps.span.extracting(mapStarts[file]..<mapStarts[file + 1]))
                return true
            })
        var counters = ReadCounters()
        for f in files {
            guard let counts = f.counts else { continue }
            counters.add(file: counts)
            counters.duplicates += counts.rows
        }
        for t in tallies {
            counters.duplicates -= t.winners
            counters.sandbox += t.winners - t.kept
            counters.familyShared += t.family
        }
        rejects.normalize()
        let set = TransactionSet(
            strings: run, rows: store, inputs: files.compactMap { $0.counts?.stats }, rejects: rejects,
            counters: counters, renewals: RenewalIndex(files.map { ($0.renewals, $0.map) }))
        self.files = []
        return set  // files are in path order, their rejects' lines ascending
    }
}

extension Merger {
    /// Hands every winner and every renewal info to `capture`, after ids were renumbered: the
    /// winners cut into pieces of `capture.pieceRows`, each piece on one thread.
    private func capture(_ files: [Slot], strings: StringTable, into capture: WinnerCapture, threads: Int) {
        for (slot, f) in files.enumerated() {
            if let counts = f.counts { capture.file(slot, counts) }
            f.map.withUnsafeBufferPointer { map in
                for (key, info) in f.renewals {
                    var k = key
                    k.remap(map)
                    capture.renewal(slot, k, info, strings)
                }
            }
        }
        // Pieces: runs of (file, first row, end) holding pieceRows winners between them.
        @Sendable @inline(__always) func wins(_ f: Slot, _ i: Int) -> Bool {
            f.superseded[i >> 6] & (1 << UInt64(i & 63)) == 0
        }
        var pieces: [[(slot: Int, start: Int, end: Int)]] = [[]]
        var inPiece = 0
        for (slot, f) in files.enumerated() {
            if f.isState, f.rows.count > 0, !f.superseded.contains(where: { $0 != 0 }),
                capture.keeps(slot, f.rows.count)
            {
                continue
            }
            var i = 0
            let n = f.rows.count
            while i < n {
                var j = i
                while j < n && inPiece < capture.pieceRows {
                    if wins(f, j) { inPiece += 1 }
                    j += 1
                }
                pieces[pieces.count - 1].append((slot, i, j))
                i = j
                if inPiece == capture.pieceRows {
                    pieces.append([])
                    inPiece = 0
                }
            }
        }
        if pieces.count > 1 && inPiece == 0 { pieces.removeLast() }
        let work = pieces
        let all = files
        let columns = self.columns
        try? parallelFor(count: work.count, threads: threads) { p in
            var buffer: [Transaction] = []
            // Sections of at most 8,192 rows: the buffers of the threads stay small.
            let section = 1 << 13
            buffer.reserveCapacity(min(capture.pieceRows, section))
            var file = -1
            func flush() {
                if !buffer.isEmpty { capture.rows(p, file, buffer.span, strings) }
                buffer.removeAll(keepingCapacity: true)
            }
            for (slot, start, end) in work[p] {
                let f = all[slot]
                f.map.withUnsafeBufferPointer { map in
                    f.rows.withChunks { chunks in
                        for i in start..<end where wins(f, i) {
                            let rank = Merger.rank(f, slot, i)
                            if rank != file || buffer.count == section {
                                flush()
                                file = rank
                            }
                            var r = chunks[i >> TransactionRows.chunkShift][i & (TransactionRows.chunkRows - 1)]
                            r.remap(strings: map.span)
                            buffer.append(columns.transaction(r))
                        }
                    }
                }
            }
            flush()
        }
    }
}

/// What makes rows versions of one transaction (docs/rules.md §3 rule 1): the same
/// transactionId within the same customer (subscription group, originalTransactionId), so
/// that deduplication never looks past a customer's rows, in a run in memory as in a shard or
/// `explain`, which see only some customers.
struct VersionKey: Equatable {
    var transaction: TransactionKey
    var original: TransactionKey
    var group: Int32

    /// `row`'s key, its ids rewritten through `map` (a file's local ids → the run's), its
    /// terms (already rewritten) those of the run's `columns`.
    @inline(__always)
    init(_ row: CompactRow, _ map: UnsafeBufferPointer<Int32>, _ columns: RowColumns) {
        self.init(row, map, group: columns.group(row))
    }

    /// `row`'s key, its ids rewritten through `map`, its group `group` (the run's id).
    @inline(__always)
    init(_ row: CompactRow, _ map: UnsafeBufferPointer<Int32>, group: Int32) {
        transaction = row.transactionId
        transaction.remap(map)
        original = row.originalTransactionId
        original.remap(map)
        self.group = group
    }

    /// The three ids folded into one word for ``WinnerIndex``'s hash: the customer's ids
    /// multiplied by odd constants, so that a customer's consecutive transactionIds, and one
    /// transactionId under several customers, land on different words.
    @inline(__always)
    var hash: Int64 {
        transaction.raw &+ original.raw &* -0x61C8_8646_80B5_83EB &+ Int64(group) &* 0x2545_F491_4F6C_DD1D
    }
}
