import Foundation
import WinBackModel
import WinBackSupport

/// What reading one input file gave.
public struct InputStats: Sendable, Equatable, Codable {
    public var path: String
    /// Bytes of the file as stored (compressed for `.gz`).
    public var bytes: Int
    /// Bytes after decompression.
    public var uncompressedBytes: Int
    public var sha256: String
    /// Non-blank lines (data rows for CSV formats).
    public var rows: Int
    public var rejected: Int
}

/// Counters of the read stage, reported in the manifest.
public struct ReadCounters: Sendable, Equatable, Codable {
    public var rowsRead = 0
    /// Non-blank lines (CSV data rows), what the reject fraction counts in: one a row, except
    /// in signed files, where a line may hold many transactions.
    public var lines = 0
    public var duplicates = 0
    public var sandbox = 0
    /// Rows of another environment than the pipeline's (`sandbox` is its former name).
    public var otherEnvironment: Int {
        get { sandbox }
        set { sandbox = newValue }
    }
    public var nonSubscription = 0
    public var familyShared = 0
    public var rejected = 0

    public init() {}

    /// Counts one input file: `stats.rows` lines, each a row but for the `extraRows`
    /// transactions beyond one a line (a signed line counts once, docs/rules.md §2.6), of which
    /// `nonSubscription` were skipped and `stats.rejected` rejected. The read stage counts each
    /// file it read; a merge, each file a partition task read.
    package mutating func add(file stats: InputStats, extraRows: Int, nonSubscription: Int) {
        rowsRead += stats.rows + extraRows
        lines += stats.rows
        self.nonSubscription += nonSubscription
        rejected += stats.rejected
    }

    /// Adds what deduplication and the environment and ownership filters counted among another
    /// set of rows (a shard's, which holds no other shard's customers), but none of its lines:
    /// a merge counts those from the files, with ``add(file:extraRows:nonSubscription:)``.
    package mutating func add(deduplicationOf o: ReadCounters) {
        duplicates += o.duplicates
        sandbox += o.sandbox
        familyShared += o.familyShared
    }
}

/// The rows of one input file, with ids local to its own string table.
// One thread fills a file's rows; the merger takes them over under its lock; then each
// thread of the packing touches only its own files.
package final class FileRows: @unchecked Sendable {
    let path: String
    /// Ids local to this file; released once merged into the run's.
    @exclusivity(unchecked) package var table = StringTable(capacity: 1 << 14)
    /// Local string id → the run's string id, set when the file is merged.
    @exclusivity(unchecked) var map: [Int32] = []
    @exclusivity(unchecked) package var rows: RowChunks
    /// Rows that lost deduplication to another version of their transaction.
    @exclusivity(unchecked) var superseded: [UInt64] = []
    @exclusivity(unchecked) package var rejects: RejectList
    /// Bounds on what bad lines may cost (docs/rules.md §6.1).
    let limits: ReadLimits
    @exclusivity(unchecked) package var nonSubscription = 0
    @exclusivity(unchecked) package var stats: InputStats
    /// The pipeline's environment: rows of another are read but not kept.
    package var environment = "Production"
    /// Rows beyond one a line: the other transactions of signed lines that hold several.
    @exclusivity(unchecked) package var extraRows = 0
    /// Renewal info found among the transactions (signed files), keyed with this file's ids.
    @exclusivity(unchecked) package var renewals: [(key: TransactionKey, info: RenewalInfo)] = []
    /// When set, only rows whose originalTransactionId or appAccountToken is one of these ids
    /// are kept (`explain` reads one customer with the same reader).
    private let only: (originals: [TransactionKey], tokens: [AppAccountToken])?

    /// Each row's file, as its index in sorted path order (the row's place in the order
    /// deduplication goes by), when the rows are of several files, in (file, line) order; nil
    /// for the rows of one file, whose index is the one it is merged with.
    package var rowRanks: [UInt32]?
    /// The rows of an incremental run's state (docs/rules.md §12): the winners among the rows
    /// of the files absorbed earlier, with their ``rowRanks``. Merged after every file read
    /// now; not a file of the run.
    package var fromState = false
    /// A file absorbed earlier, whose rows are in the state: the rows it gave when it was read
    /// (duplicates are counted of them); nil for a file read now. The state's rows count as
    /// none: they are the winners among those rows.
    package var absorbedRows: Int?

    package init(path: String, store: TransactionRows, only: [String]? = nil, limits: ReadLimits = .default) {
        self.path = path
        self.limits = limits
        rejects = RejectList(limit: limits.maxRejectsListed)
        rows = RowChunks(store: store)
        stats = InputStats(path: path, bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0)
        self.only = only.map { [table] ids in
            (ids.map { TransactionKey($0, table: table) }, ids.compactMap { AppAccountToken.parse($0, table: table) })
        }
    }

    /// Records what the source says of the file once it is read.
    func finish(_ source: ByteSource) {
        stats.bytes = source.fileBytesConsumed
        stats.uncompressedBytes = source.bytesProduced
        stats.sha256 = source.fileSHA256()
        stats.rejected = rejects.total
    }

    /// Rejects a line longer than `limits.maxLineBytes`, of which `bytes` are the first.
    func tooLong(_ line: Int, _ bytes: UnsafeRawBufferPointer) {
        stats.rows += 1
        rejects.add(Reject(file: path, line: line, reason: FileRows.tooLongReason(limits), bytes: bytes))
    }

    static func tooLongReason(_ limits: ReadLimits) -> String {
        "line longer than limits.maxLineBytes (\(limits.maxLineBytes) bytes): skipped unread"
    }

    /// The row count at which ``spill`` is called: a partition task writes the rows out and
    /// drops them, so that it never holds a whole large file (docs/rules.md §6.1).
    @exclusivity(unchecked) package var spillAt = Int.max
    package var spill: ((FileRows) throws -> Void)?

    /// Keeps a decoded row, unless a customer filter leaves it out.
    @inline(__always)
    package func add(_ t: Transaction) throws {
        if let only, !only.originals.contains(t.originalTransactionId),
            t.appAccountToken.isNone || !only.tokens.contains(t.appAccountToken)
        {
            return
        }
        try rows.append(t)
        if rows.count == spillAt { try spill?(self) }
    }

    /// What the decoder made of a row: keeps a row (``add(_:)``) and counts one that is not a
    /// subscription's; returns why a rejected one was rejected.
    @inline(__always)
    func take(_ outcome: TransactionDecoder.Outcome) throws -> String? {
        switch outcome {
        case .row(let t): try add(t)
        case .nonSubscription: nonSubscription += 1
        case .rejected(let reason): return reason
        }
        return nil
    }

    /// ``take(_:)``, rejecting a rejected row as line `line` of the file, whose bytes are `raw`.
    @inline(__always)
    func take(_ outcome: TransactionDecoder.Outcome, line: Int, raw: UnsafeRawBufferPointer) throws {
        if let reason = try take(outcome) { rejects.add(Reject(file: path, line: line, reason: reason, bytes: raw)) }
    }

    /// Forgets the rows (written elsewhere): they go to a fresh store of their own, and the old
    /// one's pages back to the system.
    package func dropRows() throws { rows = RowChunks(store: try TransactionRows(reservingForRead: ())) }

    @inline(__always) func supersede(_ i: Int) { superseded[i >> 6] |= 1 << UInt64(i & 63) }
}

/// The transactions of a run, after reading every file, merging ids and deduplicating.
// Made once the read is over; its table and rows are only read afterwards.
public struct TransactionSet: @unchecked Sendable {
    /// All ids (transaction ids, customers, groups, products, offers, storefronts, tokens).
    public let strings: StringTable
    /// Deduplicated Production rows (family-shared ones included), in no particular order.
    public var rows: TransactionRows
    public var inputs: [InputStats]
    /// The first rejects by file, then line, and how many there were.
    public var rejects: RejectList
    public var counters: ReadCounters
    /// Renewal info read from the transaction files (signed ones hold both), with run ids.
    public var renewals = RenewalIndex()
}

/// A reader of one export format: turns a file into rows. Adding a format means adding one.
package protocol RowFormat: Sendable {
    func read(path: String, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
}

/// App Store Server API NDJSON (docs/rules.md §2.1).
struct NDJSONFormat: RowFormat {
    func read(path: String, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
    {
        let source = try openSource(path: path, inflater: inflater)
        let decoder = TransactionDecoder(table: out.table)
        decoder.environment = out.environment
        try LineCursor(source: source, maxLineBytes: out.limits.maxLineBytes).forEachLine(
            { line, number in
                if Whitespace.isBlank(line) { return }
                out.stats.rows += 1
                try out.take(decoder.decode(line), line: number, raw: line)
            }, tooLong: out.tooLong, afterChunk: progressTap(source, progress))
        out.finish(source)
    }
}

/// Reads every transaction file in parallel, then merges and deduplicates (docs/rules.md §3 rule 1).
public enum TransactionReader {
    package static func format(_ format: InputFormat, products: [String: String], signed: SignedReading? = nil)
        -> RowFormat
    {
        switch format {
        case .appstoreNDJSON: return NDJSONFormat()
        case .csv: return CSVFormat()
        case .revenuecat: return RevenueCatFormat(products: products)
        case .appstoreSigned: return SignedFormat(settings: signed ?? SignedReading())
        }
    }

    /// - Parameters:
    ///   - paths: files in sorted path order (the order ties in deduplication go by).
    ///   - inflater: the library that inflates `.gz` files.
    ///   - only: keep only the rows of customers with one of these originalTransactionIds or
    ///     appAccountTokens (nil = all).
    ///   - progress: called with compressed bytes consumed since the last call, from any thread.
    ///   - environment: the pipeline's environment; rows of another are counted, not kept.
    ///   - signed: how `appstore-signed` files are verified (default: against Apple's root).
    public static func read(
        paths: [String], format name: InputFormat = .appstoreNDJSON, products: [String: String] = [:], threads: Int,
        inflater: Inflater = .zlib, only: [String]? = nil, progress: @escaping @Sendable (Int) -> Void = { _ in },
        environment: String = "Production", signed: SignedReading? = nil, limits: ReadLimits = .default
    ) throws -> TransactionSet {
        try read(
            paths: paths, format: name, products: products, threads: threads, inflater: inflater, only: only,
            progress: progress, environment: environment, signed: signed, limits: limits, state: nil)
    }

    /// ``read(paths:format:products:threads:inflater:only:progress:environment:signed:limits:)``
    /// of an incremental run (docs/rules.md §12): the files `state` absorbed are not read; its
    /// rows and counts stand for them.
    package static func read(
        paths: [String], format name: InputFormat, products: [String: String], threads: Int,
        inflater: Inflater, only: [String]?, progress: @escaping @Sendable (Int) -> Void,
        environment: String, signed: SignedReading?, limits: ReadLimits, state: IncrementalState?
    ) throws -> TransactionSet {
        let fmt = format(name, products: products, signed: signed)
        let reading = paths.indices.filter { !(state?.absorbed.contains($0) ?? false) }
        let merger = try Merger(
            count: paths.count + (state?.slots ?? 0),
            totalBytes: reading.reduce(0) { $0 + InputFiles.size(paths[$1]) }, limits: limits)
        let bySize = InputFiles.largestFirst(reading.map { paths[$0] }).map { reading[$0] }
        try parallelFor(count: reading.count, threads: threads, order: bySize) { i in
            let out = FileRows(path: paths[i], store: merger.store, only: only, limits: limits)
            out.environment = environment
            try fmt.read(path: paths[i], inflater: inflater, into: out, progress: progress)
            merger.add(out, index: i)
        }
        guard let state else { return merger.finish(threads: threads) }
        // Then what the state holds: each absorbed file in its place, and its rows, which must
        // come after every file read now.
        try state.add(merger, paths.count)
        // A slot the state left empty (no state yet) holds no rows.
        for k in paths.count..<paths.count + state.slots where !merger.filled(k) {
            let none = FileRows(path: "", store: merger.store, limits: limits)
            none.fromState = true
            merger.add(none, index: k)
        }
        return merger.finish(threads: threads, capture: state.capture)
    }
}

/// Merges files into the run as they finish reading, in whatever order they finish: their ids
/// into the run's string table, their rows into the deduplication index. A file's own table
/// is released as soon as it is merged, so only the files being read hold one.
///
/// The outcome does not depend on the order: deduplication compares (signedDate, file, line)
/// explicitly, and string ids are renumbered at the end in order of first appearance by
/// (file, local id), which is the numbering a merge in path order gives.
// Files are merged under `lock`; `finish` runs after every file was added.
package final class Merger: @unchecked Sendable {
    @exclusivity(unchecked) private var files: [FileRows?]
    private let lock = NSLock()
    private let strings = StringTable(capacity: 1 << 16)
    /// Where every file's rows are written as they are read.
    package let store: TransactionRows
    /// transactionId (with the run's string ids) → row number of its current winner, rows
    /// being numbered across files in the order they were merged.
    @exclusivity(unchecked) private var winners = Int64Map(capacity: 1 << 16)
    /// The first row number of each merged file, ascending, with the file's index.
    @exclusivity(unchecked) private var merged: [(first: Int, file: Int)] = []
    @exclusivity(unchecked) private var rowsMerged = 0
    /// The rejects of the files merged so far: only those that may be listed are held.
    @exclusivity(unchecked) private var rejects: RejectList

    /// The file index and row of a row number.
    private func locate(_ n: Int) -> (file: Int, row: Int) {
        var lo = 0
        var hi = merged.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if merged[mid].first <= n { lo = mid } else { hi = mid - 1 }
        }
        return (merged[lo].file, n - merged[lo].first)
    }

    /// Bytes of all the files as stored, and of those merged so far: the rows merged so far
    /// then tell how many the whole run will have, and the deduplication index is sized for
    /// them once instead of growing through every power of two.
    private let totalBytes: Int
    @exclusivity(unchecked) private var bytesMerged = 0

    package init(count: Int, totalBytes: Int, limits: ReadLimits = .default) throws {
        rejects = RejectList(limit: limits.maxRejectsListed)
        store = try TransactionRows(reservingForRead: ())
        files = Array(repeating: nil, count: count)
        self.totalBytes = totalBytes
    }

    /// Takes over file `index` once read; merges it under the lock.
    package func add(_ f: FileRows, index: Int) {
        lock.lock()
        defer { lock.unlock() }
        files[index] = f
        rejects.merge(f.rejects)
        f.rejects = RejectList(limit: 0)
        f.map = strings.merge(f.table)
        f.table = StringTable(capacity: 1)
        f.superseded = [UInt64](repeating: 0, count: (f.rows.count + 63) / 64)
        let map = f.map
        let first = rowsMerged
        precondition(first + f.rows.count < Int(UInt32.max), "more than 4 billion rows in one run")
        merged.append((first, index))
        rowsMerged += f.rows.count
        if f.absorbedRows != nil { return }  // its rows are among the state's
        // The rows of an incremental run's state (docs/rules.md §12) come once every file read
        // now was added: they are the winners among the absorbed files, so each meets at most
        // the rows of the files read now, found by looking its transactionId up. No row of the
        // state enters the index, which stays the size of the night's files.
        let lookingUp = f.fromState
        if !lookingUp {
            bytesMerged += f.stats.bytes
            if bytesMerged > 0 && bytesMerged < totalBytes {
                winners.reserve(Int(Double(rowsMerged) * Double(totalBytes) / Double(bytesMerged)))
            } else {
                winners.reserve(rowsMerged)
            }
        }
        let ahead = 8
        let count = f.rows.count
        // The file's rows and id map as buffers for the whole loop: no reference is taken per row.
        f.rows.withChunks { chunks in
            map.withUnsafeBufferPointer { map in
                @inline(__always) func row(_ i: Int) -> UnsafeMutablePointer<Transaction> {
                    chunks[i >> TransactionRows.chunkShift] + (i & (TransactionRows.chunkRows - 1))
                }
                @inline(__always) func key(_ i: Int) -> TransactionKey {
                    var key = row(i).pointee.transactionId
                    key.remap(map)
                    return key
                }
                for i in 0..<count {
                    if i + ahead < count { winners.prefetch(key(i + ahead).raw) }
                    let key = key(i)
                    let here = UInt32(first + i)
                    let there: UInt32
                    if lookingUp {
                        guard let found = winners.find(key.raw) else { continue }
                        there = found
                    } else {
                        there = winners.insert(key.raw, here)
                        if there == here { continue }
                    }
                    // Newest signedDate wins; on a tie the later file, then the later line.
                    let (fo, j) = locate(Int(there))
                    let other = files[fo]!
                    let a = row(i).pointee.signedDate
                    let b = other.rows[j].signedDate
                    if a > b || (a == b && (Merger.rank(f, index, i), i) > (Merger.rank(other, fo, j), j)) {
                        other.supersede(j)
                        winners.update(key.raw, here)
                    } else {
                        f.supersede(i)
                    }
                }
            }
        }
    }

    /// Whether slot `index` holds a file.
    package func filled(_ index: Int) -> Bool { lock.withLock { files[index] != nil } }

    /// The place in the order deduplication goes by of row `j` of `f`, merged as file `slot`:
    /// the file's index in sorted path order (for a state's rows, that of the file each came from).
    @inline(__always)
    private static func rank(_ f: FileRows, _ slot: Int, _ j: Int) -> Int {
        if let ranks = f.rowRanks { return Int(ranks[j]) }
        return slot
    }

    /// Renumbers ids, then gathers the winning Production rows of every file, in path order.
    /// With `capture` (an incremental run), every winner, of any environment, and every renewal
    /// info found among the transactions is handed to it first, by file, with the run's ids.
    package func finish(threads: Int, capture: WinnerCapture? = nil) -> TransactionSet {
        let files = self.files.map { $0! }
        winners = Int64Map(capacity: 1)
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
                guard r.production else { return false }
                t.kept += 1
                if r.ownership == .familyShared { t.family += 1 }
                r.remap(UnsafeBufferPointer(rebasing: idMaps[mapStarts[file]..<mapStarts[file + 1]]))
                return true
            })
        var counters = ReadCounters()
        for f in files where !f.fromState {
            counters.add(file: f.stats, extraRows: f.extraRows, nonSubscription: f.nonSubscription)
            counters.duplicates += f.absorbedRows ?? f.rows.count
        }
        for t in tallies {
            counters.duplicates -= t.winners
            counters.sandbox += t.winners - t.kept
            counters.familyShared += t.family
        }
        rejects.normalize()
        let set = TransactionSet(
            strings: run, rows: store, inputs: files.filter { !$0.fromState }.map(\.stats), rejects: rejects,
            counters: counters, renewals: RenewalIndex(files.map { ($0.renewals, $0.map) }))
        for f in files {
            f.rows = RowChunks(store: store)
            f.map = []
            f.renewals = []
            f.superseded = []
            f.rowRanks = nil
        }
        return set  // files are in path order, their rejects' lines ascending
    }
}

/// An incremental run's state, as the read stage takes it (docs/rules.md §12).
package struct IncrementalState {
    /// Indices, in sorted path order, of the files the state absorbed: they are not read.
    package var absorbed: Set<Int>
    /// Slots of the merger the state's rows take, after those of the files: one a piece.
    package var slots: Int
    /// Adds to the merger a ``FileRows`` for every absorbed file at its index (no rows: its
    /// counts, rejects and renewal info), then the state's rows at indices `rowsIndex...`
    /// (``FileRows/fromState``, their ``FileRows/rowRanks`` set); every slot must be filled.
    package var add: (_ merger: Merger, _ rowsIndex: Int) throws -> Void
    /// Takes the winners for the next state; nil when no state is to be written.
    package var capture: WinnerCapture?

    package init(
        absorbed: Set<Int>, slots: Int, add: @escaping (Merger, Int) throws -> Void, capture: WinnerCapture?
    ) {
        self.absorbed = absorbed
        self.slots = slots
        self.add = add
        self.capture = capture
    }
}

/// What an incremental run keeps of its merge for the next night's state (docs/rules.md §12):
/// ``Merger/finish(threads:capture:)`` hands it the winners, in pieces of at most `pieceRows`
/// rows written on several threads, and, file by file in path order, the renewal info found
/// among the transactions and what each file counted; all with the run's string ids.
package struct WinnerCapture: Sendable {
    /// Rows a piece holds at most: pieces are written, and read back, in parallel.
    package var pieceRows: Int
    /// Winning rows of file `file` (its index in sorted path order) for piece `piece`: the
    /// calls of one piece come from one thread at a time, those of several pieces at once.
    package var rows:
        @Sendable (_ piece: Int, _ file: Int, _ rows: UnsafeBufferPointer<Transaction>, _ strings: StringTable) -> Void
    /// One renewal info of file `file`, in the order it was read.
    package var renewal:
        @Sendable (_ file: Int, _ originalTransactionId: TransactionKey, _ info: RenewalInfo, _ strings: StringTable) ->
            Void
    /// What file `file` gave besides rows (of an absorbed one, what it gave when it was read).
    package var file: @Sendable (_ file: Int, _ read: FileCounts) -> Void
    /// Asked of every slot of state rows (``FileRows/fromState``) of which no row lost: true
    /// when the next state keeps those rows as they are, which then are not handed over.
    package var keeps: @Sendable (_ slot: Int, _ rows: Int) -> Bool

    package init(
        pieceRows: Int,
        rows: @escaping @Sendable (Int, Int, UnsafeBufferPointer<Transaction>, StringTable) -> Void,
        renewal: @escaping @Sendable (Int, TransactionKey, RenewalInfo, StringTable) -> Void,
        file: @escaping @Sendable (Int, FileCounts) -> Void,
        keeps: @escaping @Sendable (Int, Int) -> Bool = { _, _ in false }
    ) {
        self.pieceRows = max(1, pieceRows)
        self.rows = rows
        self.renewal = renewal
        self.file = file
        self.keeps = keeps
    }
}

/// What reading one transaction file counted: its stats, the rows it gave (before
/// deduplication), those that were not a subscription's, and the transactions beyond one a line.
package struct FileCounts: Sendable {
    package var stats: InputStats
    package var rows: Int
    package var nonSubscription: Int
    package var extraRows: Int

    package init(stats: InputStats, rows: Int, nonSubscription: Int, extraRows: Int) {
        self.stats = stats
        self.rows = rows
        self.nonSubscription = nonSubscription
        self.extraRows = extraRows
    }
}

extension Merger {
    /// Hands every winner and every renewal info to `capture`, after ids were renumbered: the
    /// winners cut into pieces of `capture.pieceRows`, each piece on one thread.
    fileprivate func capture(_ files: [FileRows], strings: StringTable, into capture: WinnerCapture, threads: Int) {
        for (slot, f) in files.enumerated() {
            if !f.fromState {
                capture.file(
                    slot,
                    FileCounts(
                        stats: f.stats, rows: f.absorbedRows ?? f.rows.count, nonSubscription: f.nonSubscription,
                        extraRows: f.extraRows))
            }
            f.map.withUnsafeBufferPointer { map in
                for (key, info) in f.renewals {
                    var k = key
                    k.remap(map)
                    capture.renewal(slot, k, info, strings)
                }
            }
        }
        // Pieces: runs of (file, first row, end) holding pieceRows winners between them.
        @Sendable @inline(__always) func wins(_ f: FileRows, _ i: Int) -> Bool {
            f.superseded[i >> 6] & (1 << UInt64(i & 63)) == 0
        }
        var pieces: [[(slot: Int, start: Int, end: Int)]] = [[]]
        var inPiece = 0
        for (slot, f) in files.enumerated() {
            if f.fromState, f.rows.count > 0, !f.superseded.contains(where: { $0 != 0 }),
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
        nonisolated(unsafe) let all = files
        try? parallelFor(count: work.count, threads: threads) { p in
            var buffer: [Transaction] = []
            // Sections of at most 8,192 rows: the buffers of the threads stay small.
            let section = 1 << 13
            buffer.reserveCapacity(min(capture.pieceRows, section))
            var file = -1
            func flush() {
                if !buffer.isEmpty { buffer.withUnsafeBufferPointer { capture.rows(p, file, $0, strings) } }
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
                            r.remap(map)
                            buffer.append(r)
                        }
                    }
                }
            }
            flush()
        }
    }
}
