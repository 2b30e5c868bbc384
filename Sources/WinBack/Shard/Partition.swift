import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport

/// `winback partition` (docs/rules.md §8): task i of M reads its share of the transaction
/// files — file k (in sorted path order) goes to task k mod M — with the run's own readers, and
/// writes, for every shard, the rows of that shard's customers to one part file.
public enum Partition {
    /// What a partition task did, for its log line.
    public struct Summary: Sendable {
        public var files: Int
        public var rows: Int
        public var rejected: Int
        public var partBytes: Int
        /// Rows of the shard given the most.
        public var largestShardRows: Int
        /// Rows given each shard.
        var shardRows: [Int] = []
    }

    /// Rows of one file a partition task holds before writing them out.
    public static let spillRows = 1 << 16

    /// Runs task `task` of `tasks` for `shards` shards into `work`; idempotent (a retried task
    /// replaces its own outputs).
    public static func run(
        _ p: ResolvedPipeline, work: WorkFolder, shards: Int, task: Int, tasks: Int,
        progress: @escaping @Sendable (Int) -> Void = { _ in }, spillRows: Int = Partition.spillRows,
        skipping absorbed: Set<Int> = []
    ) throws -> Summary {
        let started = Date()
        let final = work.task(task)
        try work.secure(making: "parts")
        let staged = try WorkFolder.staging(for: final)
        let writers = try (0..<shards).map { try PartWriter(path: staged + "/shard-\($0).part") }
        let files = p.transactionFiles
        let resolved = p.inputs
        // An incremental run's absorbed files are in its state, not read (docs/rules.md §12).
        let mine = files.indices.filter { $0 % tasks == task && !absorbed.contains($0) }
        let format = TransactionReader.format(p.config.format, products: p.config.products, signed: p.signed)
        let done = ResultSlots<(FileRead, RejectList, [FoundRenewal])>(count: mine.count)
        let bySize = InputFiles.largestFirst(inputs: mine.map { resolved[$0] })
        try parallelFor(count: mine.count, threads: p.threads, order: bySize) { j in
            let fi = mine[j]
            // The rows read so far go to the part files every `spillRows` rows, each part file
            // getting the strings its earlier sections of the file did not have.
            var sent = [Int](repeating: 0, count: shards)
            var rows = 0
            let flush = { (out: FileRows) throws in
                // The rows taken once: read through the file's property, each row would copy
                // them (a reference taken per array of theirs).
                let spilled = out.rows
                let table = out.table
                let columns = spilled.columns
                rows += spilled.count
                // Each shard's rows by number: they stay compact, encoded as they are (none
                // made into a transaction), their columns entered once a section.
                var byShard = [[Int32]](repeating: [], count: shards)
                try spilled.withChunks { chunks in
                    @inline(__always) func row(_ i: Int) -> CompactRow {
                        chunks[i >> TransactionRows.chunkShift][i & (TransactionRows.chunkRows - 1)]
                    }
                    for i in 0..<spilled.count {
                        byShard[ShardKey.shard(of: row(i), columns: columns, table: table, shards: shards)]
                            .append(Int32(i))
                    }
                    for (k, numbers) in byShard.enumerated() where !numbers.isEmpty {
                        try writers[k].append(
                            file: fi, table: table, from: sent[k], count: numbers.count, columns: columns
                        ) { row(Int(numbers[$0])) }
                        sent[k] = table.count
                    }
                }
                try out.dropRows()
            }
            // A store of its own per file: its pages go back to the system as soon as the file
            // is written out, so a task holds the rows of the files being read only.
            let out = FileRows(
                path: files[fi], store: try TransactionRows(reservingForRead: ()), limits: p.limits,
                spill: Spill(every: spillRows, flush))
            out.environment = p.config.environment
            try format.read(input: resolved[fi], inflater: p.inflater, into: out, progress: progress)
            try flush(out)
            let renewals = out.renewals.map {
                FoundRenewal(
                    file: fi, originalTransactionId: $0.key.string(in: out.table), info: $0.info)
            }
            var counts = out.counts
            counts.rows = rows
            done[j] = (.init(file: fi, counts: counts), out.rejects, renewals)
        }
        for w in writers { try w.close() }
        let inputs = done.all.map(\.0).sorted { $0.file < $1.file }
        var rejects = RejectList(limit: p.config.maxRejectsListed)
        for d in done.all { rejects.merge(d.1) }
        rejects.normalize()
        try IntermediateFile.writeJSON(rejects, to: staged + "/rejects.json")
        try IntermediateFile.writeJSON(
            done.all.sorted { $0.0.file < $1.0.file }.flatMap(\.2), to: staged + "/renewals.json")
        let marker = PartitionMarker(
            fingerprint: try RunFingerprint(p, shards: shards), task: task, tasks: tasks, inputs: inputs,
            parts: writers.enumerated().map {
                .init(
                    shard: $0.offset, bytes: $0.element.compressedBytes, rows: $0.element.rows,
                    sha256: $0.element.sha256)
            },
            rejected: rejects.total, seconds: Date().timeIntervalSince(started),
            started: started.timeIntervalSince1970)
        try IntermediateFile.writeJSON(marker, to: staged + "/" + WorkFolder.marker)
        try WorkFolder.replace(final, with: staged)
        return Summary(
            files: mine.count, rows: inputs.reduce(0) { $0 + $1.counts.stats.rows }, rejected: rejects.total,
            partBytes: marker.parts.reduce(0) { $0 + $1.bytes }, largestShardRows: marker.parts.map(\.rows).max() ?? 0,
            shardRows: marker.parts.map(\.rows))
    }

    /// The partition markers of every task, checked against this run (exit 66 when a task has
    /// not finished, 78 when one was run with another pipeline, catalog, shard count or as-of).
    static func markers(_ work: WorkFolder, expecting fingerprint: RunFingerprint) throws -> [(
        PartitionMarker, digest: String
    )] {
        guard let (first, _) = try firstMarker(work) else {
            throw WinBackError(
                .noInput, "no partition task has finished: run `winback partition` first", path: work.root + "/parts")
        }
        var out: [(PartitionMarker, digest: String)] = []
        for i in 0..<first.tasks {
            let (m, digest) = try WorkFolder.finished(
                PartitionMarker.self, in: work.task(i), what: "partition task \(i) of \(first.tasks)",
                expecting: fingerprint, of: \.fingerprint)
            guard m.tasks == first.tasks, m.task == i else {
                throw WinBackError(
                    .configuration, "partition tasks disagree on their number (\(m.tasks) and \(first.tasks))",
                    path: work.task(i))
            }
            out.append((m, digest))
        }
        return out
    }

    /// Any finished task's marker (to learn the number of tasks and the run's as-of).
    static func firstMarker(_ work: WorkFolder) throws -> (PartitionMarker, digest: String)? {
        let entries = System.entries(work.root + "/parts")
        for e in entries.sorted() where e.hasPrefix("task-") {
            if let m = try IntermediateFile.readJSON(
                PartitionMarker.self, from: work.root + "/parts/" + e + "/" + WorkFolder.marker)
            {
                return m
            }
        }
        return nil
    }
}
