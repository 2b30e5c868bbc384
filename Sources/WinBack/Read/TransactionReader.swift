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
    let table = StringTable(capacity: 1 << 14)
    var rows: [Transaction] = []
    /// `updated_at` (or any newer-wins key) per row when the format has one instead of signedDate.
    var rejects: [Reject] = []
    var nonSubscription = 0
    var stats: InputStats

    init(path: String) {
        self.path = path
        stats = InputStats(path: path, bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0)
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
    func read(path: String, into out: FileRows, progress: @Sendable (Int) -> Void) throws
}

/// App Store Server API NDJSON (SPEC §2.1).
struct NDJSONFormat: RowFormat {
    func read(path: String, into out: FileRows, progress: @Sendable (Int) -> Void) throws {
        let source = try openSource(path: path)
        let decoder = TransactionDecoder(table: out.table)
        var lastConsumed = 0
        let reader = LineReader(source: source)
        try reader.forEachLine({ line, number in
            if LineReader.isBlank(line) { return }
            out.stats.rows += 1
            switch decoder.decode(line) {
            case .row(let t): out.rows.append(t)
            case .nonSubscription: out.nonSubscription += 1
            case .rejected(let reason):
                out.rejects.append(Reject(file: path, line: number, reason: reason, bytes: line))
            }
        }, afterChunk: {
            let c = source.fileBytesConsumed
            progress(c - lastConsumed)
            lastConsumed = c
        })
        out.stats.bytes = source.fileBytesConsumed
        out.stats.uncompressedBytes = reader.bytesRead
        out.stats.sha256 = source.fileSHA256()
        out.stats.rejected = out.rejects.count
    }
}

/// Reads every transaction file in parallel, then merges and deduplicates (SPEC §3 rule 1).
public enum TransactionReader {
    static func format(_ name: String) -> RowFormat {
        switch name {
        default: return NDJSONFormat()
        }
    }

    /// - Parameters:
    ///   - paths: files in sorted path order (the order ties in deduplication go by).
    ///   - progress: called with compressed bytes consumed since the last call, from any thread.
    public static func read(
        paths: [String], format name: String = "appstore-ndjson", threads: Int,
        progress: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws -> TransactionSet {
        let fmt = format(name)
        let slots = ResultSlots<FileRows>(count: paths.count)
        let bySize = paths.indices.sorted { InputFiles.size(paths[$0]) > InputFiles.size(paths[$1]) }
        try parallelFor(count: paths.count, threads: threads, order: bySize) { i in
            let out = FileRows(path: paths[i])
            try fmt.read(path: paths[i], into: out, progress: progress)
            slots[i] = out
        }
        return merge(slots.all)
    }

    /// Merges per-file tables into one, deduplicates by transactionId and drops sandbox rows.
    static func merge(_ files: [FileRows]) -> TransactionSet {
        let strings = StringTable(capacity: files.reduce(0) { $0 + $1.table.count } + 16)
        var counters = ReadCounters()
        var all: [Transaction] = []
        all.reserveCapacity(files.reduce(0) { $0 + $1.rows.count })
        for f in files {
            let map = strings.merge(f.table)
            map.withUnsafeBufferPointer { m in
                for var r in f.rows {
                    r.remap(m)
                    all.append(r)
                }
            }
            f.rows = []
            counters.rowsRead += f.stats.rows
            counters.nonSubscription += f.nonSubscription
            counters.rejected += f.rejects.count
        }
        // Newest signedDate wins; on a tie the later file, then the later line, which is
        // the later index here.
        var best = [Int32](repeating: -1, count: strings.count)
        for i in all.indices {
            let tx = Int(all[i].transactionId)
            let b = best[tx]
            if b < 0 || all[i].signedDate >= all[Int(b)].signedDate { best[tx] = Int32(i) }
        }
        var kept: [Transaction] = []
        kept.reserveCapacity(all.count)
        for i in all.indices where best[Int(all[i].transactionId)] == Int32(i) {
            if !all[i].production {
                counters.sandbox += 1
                continue
            }
            if all[i].ownership == .familyShared { counters.familyShared += 1 }
            kept.append(all[i])
        }
        counters.duplicates = all.count - kept.count - counters.sandbox
        let rejects = files.flatMap(\.rejects)  // files are in path order, lines ascending
        return TransactionSet(
            strings: strings, rows: kept, inputs: files.map(\.stats), rejects: rejects, counters: counters)
    }
}
