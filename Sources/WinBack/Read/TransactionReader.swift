import Foundation

/// What reading one input file gave.
public struct InputStats: Sendable, Equatable {
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
public struct ReadCounters: Sendable, Equatable {
    public var rowsRead = 0
    public var duplicates = 0
    public var sandbox = 0
    public var nonSubscription = 0
    public var familyShared = 0
    public var rejected = 0

    public init() {}
}

/// The rows of one input file, with ids local to its own string table.
final class FileRows {
    let path: String
    /// Ids local to this file; replaced by an empty table once merged into the run's.
    var table = StringTable(capacity: 1 << 14)
    var rows: [Transaction] = []
    /// `updated_at` (or any newer-wins key) per row when the format has one instead of signedDate.
    var rejects: [Reject] = []
    var nonSubscription = 0
    var stats: InputStats
    /// When set, only rows whose originalTransactionId or appAccountToken is one of these ids
    /// are kept (`explain` reads one customer with the same reader).
    private let only: [Int32]?

    init(path: String, only: [String]? = nil) {
        self.path = path
        stats = InputStats(path: path, bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0)
        self.only = only.map { [table] in $0.map { table.intern($0) } }
    }

    /// Records what the source says of the file once it is read.
    func finish(_ source: ByteSource) {
        stats.bytes = source.fileBytesConsumed
        stats.uncompressedBytes = source.bytesProduced
        stats.sha256 = source.fileSHA256()
        stats.rejected = rejects.count
    }

    /// Keeps a decoded row, unless a customer filter leaves it out.
    @inline(__always)
    func add(_ t: Transaction) {
        if let only, !only.contains(t.originalTransactionId), !(t.appAccountToken >= 0 && only.contains(t.appAccountToken)) {
            return
        }
        rows.append(t)
    }
}

/// The transactions of a run, after reading every file, merging ids and deduplicating.
public struct TransactionSet: @unchecked Sendable {
    /// All ids (transaction ids, customers, groups, products, offers, storefronts, tokens).
    public let strings: StringTable
    /// Deduplicated Production rows (family-shared ones included), in file then line order.
    public var rows: [Transaction]
    public var inputs: [InputStats]
    /// Sorted by file, then line.
    public var rejects: [Reject]
    public var counters: ReadCounters
}

/// A reader of one export format: turns a file into rows. Adding a format means adding one.
protocol RowFormat: Sendable {
    func read(path: String, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
}

/// App Store Server API NDJSON (SPEC §2.1).
struct NDJSONFormat: RowFormat {
    func read(path: String, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws {
        let source = try openSource(path: path)
        let decoder = TransactionDecoder(table: out.table)
        try LineReader(source: source).forEachLine({ line, number in
            if LineReader.isBlank(line) { return }
            out.stats.rows += 1
            switch decoder.decode(line) {
            case .row(let t): out.add(t)
            case .nonSubscription: out.nonSubscription += 1
            case .rejected(let reason):
                out.rejects.append(Reject(file: path, line: number, reason: reason, bytes: line))
            }
        }, afterChunk: progressTap(source, progress))
        out.finish(source)
    }
}

/// Reads every transaction file in parallel, then merges and deduplicates (SPEC §3 rule 1).
public enum TransactionReader {
    static func format(_ name: String, products: [String: String]) -> RowFormat {
        switch name {
        case "csv": return CSVFormat()
        case "revenuecat": return RevenueCatFormat(products: products)
        default: return NDJSONFormat()
        }
    }

    /// - Parameters:
    ///   - paths: files in sorted path order (the order ties in deduplication go by).
    ///   - only: keep only the rows of customers with one of these originalTransactionIds or
    ///     appAccountTokens (nil = all).
    ///   - progress: called with compressed bytes consumed since the last call, from any thread.
    public static func read(
        paths: [String], format name: String = "appstore-ndjson", products: [String: String] = [:], threads: Int,
        only: [String]? = nil, progress: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws -> TransactionSet {
        let fmt = format(name, products: products)
        let slots = ResultSlots<FileRows>(count: paths.count)
        let bySize = paths.indices.sorted { InputFiles.size(paths[$0]) > InputFiles.size(paths[$1]) }
        try parallelFor(count: paths.count, threads: threads, order: bySize) { i in
            let out = FileRows(path: paths[i], only: only)
            try fmt.read(path: paths[i], into: out, progress: progress)
            slots[i] = out
        }
        return merge(slots.all)
    }

    /// Merges per-file tables into one, deduplicates by transactionId and drops sandbox rows.
    ///
    /// Memory stays near one copy of the rows: each file's rows are remapped in place, and a
    /// file's rows and table are released as soon as they have been taken over.
    static func merge(_ files: [FileRows]) -> TransactionSet {
        // Sized for the largest case (no string shared between files), so it never rehashes.
        let strings = StringTable(capacity: files.reduce(16) { $0 + $1.table.count })
        var counters = ReadCounters()
        for f in files {
            let map = strings.merge(f.table)
            f.table = StringTable(capacity: 1)
            map.withUnsafeBufferPointer { m in
                f.rows.withUnsafeMutableBufferPointer { rows in
                    for i in rows.indices { rows[i].remap(m) }
                }
            }
            counters.rowsRead += f.stats.rows
            counters.nonSubscription += f.nonSubscription
            counters.rejected += f.rejects.count
        }
        // Newest signedDate wins; on a tie the later file, then the later line: the later
        // position in (file, row) order, which is the order visited here.
        var best = [Int64](repeating: -1, count: strings.count)
        var total = 0
        for (fi, f) in files.enumerated() {
            for (i, r) in f.rows.enumerated() {
                total += 1
                let tx = Int(r.transactionId)
                let b = best[tx]
                if b < 0 || r.signedDate >= files[Int(b >> 32)].rows[Int(b & 0xFFFF_FFFF)].signedDate {
                    best[tx] = Int64(fi) << 32 | Int64(i)
                }
            }
        }
        var winners = 0
        for b in best where b >= 0 { winners += 1 }
        var kept: [Transaction] = []
        kept.reserveCapacity(winners)
        for (fi, f) in files.enumerated() {
            for (i, r) in f.rows.enumerated() where best[Int(r.transactionId)] == Int64(fi) << 32 | Int64(i) {
                if !r.production {
                    counters.sandbox += 1
                    continue
                }
                if r.ownership == .familyShared { counters.familyShared += 1 }
                kept.append(r)
            }
            f.rows = []
        }
        counters.duplicates = total - winners
        let rejects = files.flatMap(\.rejects)  // files are in path order, lines ascending
        return TransactionSet(
            strings: strings, rows: kept, inputs: files.map(\.stats), rejects: rejects, counters: counters)
    }
}
