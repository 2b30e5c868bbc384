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
    /// file it read (or its state absorbed); a merge, each file a partition task read.
    package mutating func add(file counts: FileCounts) {
        rowsRead += counts.stats.rows + counts.extraRows
        lines += counts.stats.rows
        nonSubscription += counts.nonSubscription
        rejected += counts.stats.rejected
    }

    /// Adds what deduplication and the environment and ownership filters counted among another
    /// set of rows (a shard's, which holds no other shard's customers), but none of its lines:
    /// a merge counts those from the files, with ``add(file:)``.
    package mutating func add(deduplicationOf o: ReadCounters) {
        duplicates += o.duplicates
        sandbox += o.sandbox
        familyShared += o.familyShared
    }
}

/// What reading one transaction file counted, besides its rows: its stats, the rows it gave
/// (before deduplication), those that were not a subscription's, and the transactions beyond
/// one a line. The one record of a file's counts: the merger keeps it for every file, an
/// incremental state's ledger for every file it absorbed, a partition task's marker for every
/// file it read (both write its fields among their own, under these names).
package struct FileCounts: Sendable, Equatable, Codable {
    /// Size and SHA-256 of its bytes as stored, lines and rejects.
    package var stats: InputStats
    /// Rows it gave, before deduplication.
    package var rows: Int
    package var nonSubscription: Int
    /// Transactions beyond one a line (signed lines that hold several).
    package var extraRows: Int

    /// `rows` rows of no file in particular (no bytes, lines or rejects): what the files an
    /// incremental state absorbed gave one shard of a memory-bounded run.
    package static func rows(_ rows: Int) -> FileCounts {
        FileCounts(
            stats: InputStats(path: "", bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0), rows: rows,
            nonSubscription: 0, extraRows: 0)
    }
}

/// The rows of one input file read now, with ids local to its own string table. The reader
/// keeps every row, or only one customer's (``CustomerFilter``, `explain`), and may have
/// them written out every so many rows (``Spill``, a partition task).
// One thread fills a file's rows; the merger takes them over under its lock.
package final class FileRows: @unchecked Sendable {
    let path: String
    /// Ids local to this file; released once merged into the run's.
    @exclusivity(unchecked) package var table = StringTable(capacity: 1 << 14)
    @exclusivity(unchecked) package var rows: RowChunks
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
    /// The customer filter's ids as keys of ``table``; nil keeps every row.
    private let only: CustomerFilter.Keys?
    /// The row count at which ``spill`` writes the rows out; `Int.max` without one.
    private let spillAt: Int
    private let spill: Spill?

    package init(
        path: String, store: TransactionRows, limits: ReadLimits = .default, only: CustomerFilter? = nil,
        spill: Spill? = nil
    ) {
        self.path = path
        self.limits = limits
        rejects = RejectList(limit: limits.maxRejectsListed)
        rows = RowChunks(store: store)
        stats = InputStats(path: path, bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0)
        self.only = only.map { [table] in CustomerFilter.Keys($0.ids, table: table) }
        spillAt = spill?.rows ?? Int.max
        self.spill = spill
    }

    /// What the file counted: its rows are those it holds now.
    package var counts: FileCounts {
        FileCounts(stats: stats, rows: rows.count, nonSubscription: nonSubscription, extraRows: extraRows)
    }

    /// Records what the source says of the file once it is read.
    func finish(_ source: ByteSource) {
        rows.settle()
        stats.bytes = source.fileBytesConsumed
        stats.uncompressedBytes = source.bytesProduced
        stats.sha256 = source.fileSHA256()
        stats.rejected = rejects.total
        // A table's rejected rows are named by their cursor value too (docs/rules.md §14.1).
        let names = source.lineNames(rejects.listed.map(\.line))
        if !names.isEmpty { rejects.name(names) }
    }

    /// Rejects a line longer than `limits.maxLineBytes`, of which `bytes` are the first.
    func tooLong(_ line: Int, _ bytes: UnsafeRawBufferPointer) {
        stats.rows += 1
        rejects.add(Reject(file: path, line: line, reason: FileRows.tooLongReason(limits), bytes: bytes))
    }

    static func tooLongReason(_ limits: ReadLimits) -> String {
        "line longer than limits.maxLineBytes (\(limits.maxLineBytes) bytes): skipped unread"
    }

    /// Keeps a decoded row, unless the customer filter leaves it out; spills the rows when
    /// they reach the spill's count.
    @inline(__always)
    package func add(_ t: Transaction) throws {
        if let only, !only.keeps(t) { return }
        try rows.append(t)
        if rows.count == spillAt {
            rows.settle()
            try spill?.write(self)
        }
    }

    /// The shared columns of the part file section being read (``add(sectionRow:)``).
    private var section = RowColumns()

    /// Takes the shared columns of a part file section, whose rows follow (``add(sectionRow:)``).
    package func enter(section: RowColumns) {
        self.section = section
        if only == nil && spill == nil { rows.enter(section: section) }
    }

    /// Keeps a row of the part file section last entered: as it is, its terms and token found
    /// through the section's places, unless a customer filter or a spill needs the transaction.
    @inline(__always)
    package func add(sectionRow r: CompactRow) throws {
        if only == nil && spill == nil {
            try rows.append(sectionRow: r)
        } else {
            try add(section.transaction(r))
        }
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
}

/// `explain`'s filter: only the rows whose originalTransactionId or appAccountToken is one of
/// `ids` are kept, so that one customer is read with the run's own reader. Tokens match in any
/// case (a UUID's letters are the same digits either way, docs/rules.md §2.1).
package struct CustomerFilter: Sendable {
    package var ids: [String]

    package init(_ ids: [String]) { self.ids = ids }

    /// The ids as keys of one file's table, which its rows' keys are compared with.
    struct Keys {
        let originals: [TransactionKey]
        /// The 128 bits of each id that is a UUID.
        let tokens: [(high: UInt64, low: UInt64)]
        let table: StringTable

        init(_ ids: [String], table: StringTable) {
            originals = ids.map { TransactionKey($0, table: table) }
            tokens = ids.compactMap { Keys.value(of: $0, table: table) }
            self.table = table
        }

        /// The digits of the token `s` names in any case, or nil when `s` is no UUID.
        static func value(of s: String, table: StringTable) -> (high: UInt64, low: UInt64)? {
            // All lowercase: kept as its value, never interned.
            AppAccountToken.parse(IdentityReader.lowercasedASCII(s), table: table).map { ($0.high, $0.low) }
        }

        @inline(__always)
        func keeps(_ t: Transaction) -> Bool {
            if originals.contains(t.originalTransactionId) { return true }
            let token = t.appAccountToken
            if token.isNone || tokens.isEmpty { return false }
            let v: (high: UInt64, low: UInt64)
            if token.kind == .interned {
                // Letters of both cases: its string, read in lowercase.
                guard let s = token.string(in: table), let value = Keys.value(of: s, table: table) else { return false }
                v = value
            } else {
                v = (token.high, token.low)
            }
            return tokens.contains { $0 == v }
        }
    }
}

/// A partition task's spill (docs/rules.md §6.1): every `rows` rows of a file, `write` writes
/// them out and drops them (``FileRows/dropRows()``), so that a task never holds a whole large
/// file.
package struct Spill {
    package var rows: Int
    package var write: (FileRows) throws -> Void

    package init(every rows: Int, _ write: @escaping (FileRows) throws -> Void) {
        self.rows = rows
        self.write = write
    }
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
    /// Reads `input` as resolved (docs/rules.md §11): an object changed since is an error.
    func read(input: Input, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
}

/// App Store Server API NDJSON (docs/rules.md §2.1).
struct NDJSONFormat: RowFormat {
    func read(input: Input, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
    {
        let source = try openSource(input: input, inflater: inflater)
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

    /// Reads `inputs` and keeps the winners of docs/rules.md §3 rule 1.
    ///
    /// - Parameters:
    ///   - inputs: files in sorted path order (the order ties in deduplication go by), each with
    ///     its identity (``InputStores/lookUp(_:)`` for a path as it is now).
    ///   - inflater: the library that inflates `.gz` files.
    ///   - only: keep only the rows of customers with one of these originalTransactionIds or
    ///     appAccountTokens (nil = all).
    ///   - progress: called with compressed bytes consumed since the last call, from any thread.
    ///   - environment: the pipeline's environment; rows of another are counted, not kept.
    ///   - signed: how `appstore-signed` files are verified (default: against Apple's root).
    ///   - state: of an incremental run (docs/rules.md §12): the files it absorbed are not read;
    ///     its rows and counts stand for them.
    ///   - beside: work of the run's to be done on one of the threads that read the files, before
    ///     any file (the renewal info): on a thread of its own it would take a core from them.
    package static func read(
        inputs: [Input], format name: InputFormat = .appstoreNDJSON, products: [String: String] = [:], threads: Int,
        inflater: Inflater = .zlib, only: [String]? = nil, progress: @escaping @Sendable (Int) -> Void = { _ in },
        environment: String = "Production", signed: SignedReading? = nil, limits: ReadLimits = .default,
        state: IncrementalState? = nil, beside: (@Sendable () -> Void)? = nil
    ) throws -> TransactionSet {
        let paths = inputs.map(\.path)
        let fmt = format(name, products: products, signed: signed)
        let filter = only.map(CustomerFilter.init)
        let reading = paths.indices.filter { !(state?.absorbed.contains($0) ?? false) }
        let merger = try Merger(count: paths.count + (state?.slots ?? 0), limits: limits)
        let bySize = InputFiles.largestFirst(inputs: reading.map { inputs[$0] }).map { reading[$0] }
        // Of an incremental run (docs/rules.md §12): each absorbed file in its place (its counts,
        // rejects and renewal info), and the state's pieces of rows read alongside the files,
        // after them in the schedule, in slots `paths.count...`, one a piece.
        try state?.absorb(merger)
        let pieces = state?.pieces ?? 0
        let load = state?.load
        let besideAt = paths.count + pieces
        let schedule = (beside == nil ? [] : [besideAt]) + bySize + Array(paths.count..<besideAt)
        try parallelFor(count: schedule.count, threads: threads, order: schedule) { i in
            if i == besideAt {
                beside!()
                return
            }
            if i >= paths.count {
                try load!(merger, i - paths.count, i)
                return
            }
            let out = FileRows(path: paths[i], store: merger.store, limits: limits, only: filter)
            out.environment = environment
            try fmt.read(input: inputs[i], inflater: inflater, into: out, progress: progress)
            merger.add(out, index: i)
        }
        guard let state else { return merger.finish(threads: threads) }
        // A slot the state left empty (no state yet) holds no rows.
        for k in paths.count..<paths.count + state.slots where !merger.filled(k) {
            merger.add(StateRows(store: merger.store), index: k)
        }
        return merger.finish(threads: threads, capture: state.capture)
    }
}

/// The customers of a set of rows, by originalTransactionId (bytes as read): the renewal info a
/// shard keeps is theirs.
package struct SetCustomers: Sendable {
    /// Each customer's ``TransactionKey/raw`` (a decimal id itself, an interned one below zero):
    /// one open-addressing map, as the grouping numbers customers, where two sets hashed every
    /// row of a shard with SipHash on one thread.
    private var keys = Int64Map(capacity: 1024)
    private let strings: StringTable

    package init(_ set: TransactionSet) {
        // The compact rows themselves: iterating the set would make each row's Transaction.
        for r in set.rows.buffer { _ = keys.insert(r.originalTransactionId.raw, 0) }
        strings = set.strings
    }

    /// Whether `bytes` are the originalTransactionId of one of the set's customers.
    package func contains(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if let v = TransactionKey.decimal(bytes) { return keys.find(v) != nil }
        guard let id = strings.find(bytes) else { return false }
        return keys.find(-(Int64(id) + 1)) != nil
    }

    package func contains(_ id: String) -> Bool {
        var id = id
        return id.withUTF8 { contains(UnsafeRawBufferPointer($0)) }
    }
}

extension TransactionSet {
    /// Accepts the originalTransactionIds of the set's rows (``SetCustomers``).
    package func customerFilter() -> SetCustomers { SetCustomers(self) }
}
