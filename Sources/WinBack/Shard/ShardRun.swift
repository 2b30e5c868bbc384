import Foundation
import WinBackDelivery
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackWrite

/// `winback run --shard k` (docs/rules.md §8): reads shard k's part files from every partition
/// task, deduplicates them as a whole run would, and evaluates its customers with the run's
/// own stages, writing the shard's segment files and report rows under `shards/<k>/`.
public enum ShardRun {
    public struct Summary: Sendable {
        public var customers: Int
        public var rows: Int
        /// An incremental run's: the shard's rows file of the next state.
        var state: OutputStats?
    }

    /// Runs shard `shard` of `shards`. `p.asOf` must already be the run's (``agree(_:work:shards:asOfGiven:)``).
    /// With `maxRows` (a memory-bounded run), a shard whose part files hold more rows fails
    /// with 65 naming the transaction or customer that fills it, before it reads them.
    ///
    /// With `state` (an incremental memory-bounded run, docs/rules.md §12), the shard's rows of
    /// the state are merged with those of its part file, and its winners written to the next
    /// state.
    static func run(
        _ p: ResolvedPipeline, work: WorkFolder, shard: Int, shards: Int, maxRows: Int? = nil, state: ShardState? = nil
    ) throws -> Summary {
        let started = Date()
        try work.secure()
        let fingerprint = try RunFingerprint(p, shards: shards)
        let partitions = try Partition.markers(work, expecting: fingerprint)
        if let maxRows {
            let rows =
                partitions.reduce(0) { $0 + ($1.0.parts.first { $0.shard == shard }?.rows ?? 0) }
                + (state?.rows?.stats.rows ?? 0)
            if rows > maxRows { throw try tooLarge(work, shard: shard, partitions: partitions.map(\.0), rows: rows) }
        }
        let next = state.map { s in
            StateRowsWriter(folder: (s.next as NSString).deletingLastPathComponent) { _ in
                (s.next as NSString).lastPathComponent
            }
        }
        let rows = try readRows(
            p, work: work, shard: shard, shards: shards, partitions: partitions.map(\.0), state: state, next: next)
        // The renewal info of the shard's customers, read on another thread while the rows are
        // grouped (it only looks the customers up; it joins the string table after).
        let keep = rows.keep
        let renewalRead = { @Sendable () throws -> RenewalRead in
            try RenewalReader.read(
                paths: p.renewalFiles, inflater: p.inflater, signed: p.signed, keep: { keep.contains($0) },
                limits: p.limits)
        }
        let renewalsAhead = p.threads > 1 ? Ahead(renewalRead) : nil
        var inputs = Inputs(
            transactions: rows.set, renewals: rows.found, renewalStats: [],
            renewalRejects: RejectList(limit: p.limits.maxRejectsListed))
        // A shard with no rows writes an empty rows file all the same.
        let kept = try next?.finish(atLeastOne: true).first
        let customers = Stage.group(inputs, threads: p.threads)
        try inputs.join(renewalsAhead?.get() ?? renewalRead())
        let book = Stage.offers(p, strings: inputs.strings)
        let (audience, counted) = Stage.evaluate(customers, book: book, renewals: inputs.renewals, p)
        let reports = counted.reports()

        let final = work.shard(shard)
        try work.secure(making: "shards")
        let staged = try WorkFolder.staging(for: final)
        let dropped = audience.droppedByApple(p.config.requireApple, offers: p.catalog.offers.count)
        let held = audience.heldOut(p.config.requireApple, offers: p.catalog.offers.count)
        let droppedRows = dropped.perOffer + [dropped.best]
        let heldRows = held.perOffer + [held.best]
        // The reports in their summable form and the disagreements (sorted by customer like the
        // segments: the merge merges them alike), written on one thread while the segments are
        // written on the others: otherwise one thread's work after theirs.
        let reportFiles = { @Sendable () throws -> [OutputStats] in
            let summable = ShardReports(reports, droppedByApple: droppedRows, heldOut: heldRows)
            let json = try IntermediateFile.writeJSON(summable, to: staged + "/" + Merge.reports)
            try OutputFile.makeFolder(staged + "/reports")
            let disagreements = try OutputFile(path: staged + "/" + Merge.disagreements)
            try disagreements.write(AppleAgreementReport.disagreementsCSV(reports.apple))
            let (bytes, sha) = try disagreements.finish()
            return [
                OutputStats(path: Merge.reports, bytes: json.bytes, rows: 0, sha256: json.sha256),
                OutputStats(path: Merge.disagreements, bytes: bytes, rows: 0, sha256: sha),
            ]
        }
        let beside = p.threads > 1 ? Ahead(reportFiles) : nil
        let segments = Result {
            try SegmentWriter(
                customers: customers, audience: audience, book: book, formats: p.config.formats,
                requireApple: p.config.requireApple, threads: p.threads
            ).write(to: staged, threads: p.threads)
        }
        // Waited for whatever the segments did: nothing writes in the staging folder afterwards.
        let besideFiles = beside.map { b in Result { try b.get() } }
        var outputs = try segments.get()
        outputs += try besideFiles?.get() ?? reportFiles()
        // The reasons of its customers who left a segment since the baseline (docs/rules.md §10.5).
        outputs.append(
            try ShardReasons.write(
                p, baseline: fingerprint.baseline, shard: shard, shards: shards,
                reasoner: {
                    ExitReasoner(
                        customers: customers, audience: audience, book: book, requireApple: p.config.requireApple,
                        baselineAsOf: $0.asOf)
                }, to: staged))
        let marker = ShardMarker(
            fingerprint: fingerprint, shard: shard, partitions: partitions.map(\.digest),
            counters: inputs.transactions.counters, customerStates: audience.counts, renewalInputs: inputs.renewalStats,
            renewalRejects: inputs.renewalRejects, seconds: Date().timeIntervalSince(started), outputs: outputs,
            nextStateRows: kept)
        try IntermediateFile.writeJSON(marker, to: staged + "/" + WorkFolder.marker)
        try WorkFolder.replace(final, with: staged)
        return Summary(customers: audience.counts.customers, rows: inputs.transactions.rows.count, state: kept)
    }

    /// The read stage of a shard but for the renewal files (read beside the grouping, then
    /// joined with ``Inputs/join(_:)``): every task's part file of the shard, merged file by file
    /// in sorted path order as ``TransactionReader`` merges input files; the shard's customers;
    /// and the renewal info found among the rows (signed files).
    ///
    /// With `state` (an incremental memory-bounded run, docs/rules.md §12) the shard's rows of
    /// the state are merged after those of the part file, and the winners written to `next`.
    static func readRows(
        _ p: ResolvedPipeline, work: WorkFolder, shard: Int, shards: Int, partitions: [PartitionMarker],
        state: ShardState? = nil, next: StateRowsWriter? = nil
    ) throws -> (set: TransactionSet, keep: SetCustomers, found: RenewalIndex) {
        guard state == nil || partitions.count == 1 else {
            throw WinBackError(.software, "an incremental state is kept by runs of one partition task")
        }
        var set =
            partitions.count == 1
            ? try readInFileOrder(p, work: work, shard: shard, part: partitions[0], state: state, next: next)
            : try readByFile(p, work: work, shard: shard, partitions: partitions)
        let keep = set.customerFilter()
        // Renewal info found among the transactions (signed files), as the read stage gathers
        // it: file after file in path order.
        var found: [FoundRenewal] = state?.renewals ?? []
        for i in 0..<partitions.count {
            let path = work.task(i) + "/renewals.json"
            found += try IntermediateFile.readJSON([FoundRenewal].self, from: path)?.0 ?? []
        }
        var index = RenewalIndex()
        for r in found.enumerated().sorted(by: { ($0.element.file, $0.offset) < ($1.element.file, $1.offset) }) {
            let id = r.element.originalTransactionId
            guard keep.contains(id) else { continue }
            index.add(originalTransactionId: TransactionKey(id, table: set.strings), r.element.info)
        }
        index.finish()
        set.renewals = index
        return (set, keep, index)
    }

    /// The rows of a shard whose inputs one partition task read: every section of its part
    /// file, in input file order, into one ``FileRows`` (rows of many small files share its
    /// pages), which deduplicates as the files one by one would, since its row order is the
    /// (file, line) order and every input file is in it (docs/rules.md §8.1). The part file is
    /// read and checked whole first, then each file's sections are read again where they are.
    ///
    /// With a state, the rows are merged with their files' indices, so that the state's rows
    /// merge with them in the same order; the merger's slots are then ``StateSlot``'s.
    static func readInFileOrder(
        _ p: ResolvedPipeline, work: WorkFolder, shard: Int, part marker: PartitionMarker, state: ShardState? = nil,
        next: StateRowsWriter? = nil
    ) throws -> TransactionSet {
        let path = work.part(task: 0, shard: shard)
        guard let part = marker.parts.first(where: { $0.shard == shard }) else {
            throw WinBackError(.badData, "partition task 0's marker lists no part file for shard \(shard)", path: path)
        }
        let sections = try PartReader(path: path, bytes: part.bytes, sha256: part.sha256).sectionsByFile()
        guard sections.allSatisfy({ $0.file < p.transactionFiles.count }) else {
            throw WinBackError(.badData, "part file names an input this task did not read", path: path)
        }
        if state == nil && p.threads > 1 && sections.count > 1 {
            return try readInFileOrder(sections, path: path, part: part, threads: p.threads)
        }
        let reader = try PartReader(path: path, bytes: part.bytes, sha256: part.sha256)
        let merger = try Merger(count: state == nil ? 1 : StateSlot.allCases.count)
        let all = FileRows(path: "", store: merger.store)
        var ranks: [UInt32] = []
        try decode(sections[...], from: reader, into: all) { file in
            // Only a state's rows need them: without one, the row order is the (file, line) order.
            if state != nil { ranks += repeatElement(UInt32(file), count: all.rows.count - ranks.count) }
        }
        all.stats.bytes = all.rows.count
        guard let state else {
            merger.add(all, index: 0)
            return merger.finish(threads: p.threads)
        }
        merger.add(all, index: StateSlot.partFile.rawValue, ranks: ranks)
        // The absorbed files' rows of this shard: counted (duplicates are of them), then the
        // winners among them, from the state.
        merger.add(AbsorbedFile(counts: .rows(state.absorbedRows)), index: StateSlot.absorbed.rawValue)
        var kept = StateRows(store: merger.store)
        if let (path, stats) = state.rows {
            try StateFolder.load(&kept, from: path, stats, pathOf: state.pathOfLedgerFile)
        }
        merger.add(kept, index: StateSlot.stateRows.rawValue)
        let capture = WinnerCapture(
            pieceRows: Int.max, rows: { piece, file, rows, strings in next?.append(piece, file, rows, strings) },
            renewal: { _, _, _, _ in }, file: { _, _ in })
        let set = merger.finish(threads: p.threads, capture: capture)
        return set
    }

    /// A shard's rows without a state, on `threads` threads: the input files cut into as many runs
    /// of consecutive files as threads, of about equal bytes of sections, each run's sections
    /// decoded on its own thread into one ``FileRows`` (its small files' rows sharing its pages),
    /// the runs merged in file order. Their rows are then in the (file, line) order of the one
    /// ``FileRows`` of ``readInFileOrder(_:work:shard:part:state:next:)``, and deduplicate alike.
    private static func readInFileOrder(
        _ sections: [(file: Int, offsets: [Int])], path: String, part: PartitionMarker.Part, threads: Int
    ) throws -> TransactionSet {
        let starts = sections.flatMap(\.offsets).sorted()
        var sizeAt: [Int: Int] = [:]
        for (k, o) in starts.enumerated() { sizeAt[o] = (k + 1 < starts.count ? starts[k + 1] : part.bytes) - o }
        let sizes = sections.map { $0.offsets.reduce(0) { $0 + sizeAt[$1, default: 0] } }
        let total = max(1, sizes.reduce(0, +))
        let runs = min(threads, sections.count)
        var bounds = [0]
        var sum = 0
        for (i, size) in sizes.enumerated() {
            sum += size
            let left = sections.count - (i + 1)
            if bounds.count < runs && left >= runs - bounds.count
                && (sum * runs >= total * bounds.count || left == runs - bounds.count)
            {
                bounds.append(i + 1)
            }
        }
        bounds.append(sections.count)
        let runBounds = bounds
        let merger = try Merger(count: runs)
        try parallelFor(count: runs, threads: threads) { r in
            let reader = try PartReader(path: path, bytes: part.bytes, sha256: part.sha256)
            let rows = FileRows(path: "", store: merger.store)
            try decode(sections[runBounds[r]..<runBounds[r + 1]], from: reader, into: rows) { _ in }
            rows.stats.bytes = rows.rows.count
            merger.add(rows, index: r)
        }
        return merger.finish(threads: threads)
    }

    /// The sections of `files`, file after file, into `rows`: each section's columns and rows
    /// kept compact, their ids rewritten to `rows`' table; `fileDone` after each file's.
    private static func decode(
        _ files: ArraySlice<(file: Int, offsets: [Int])>, from reader: PartReader, into rows: FileRows,
        fileDone: (Int) -> Void
    ) throws {
        for (file, offsets) in files {
            // The file's own ids, and the ids of the same strings in the shard's table.
            let local = StringTable()
            var map: [Int32] = []
            for offset in offsets {
                _ = try reader.section(
                    at: offset, into: local,
                    columns: { section in
                        while map.count < local.count {
                            map.append(local.withBytes(Int32(map.count)) { rows.table.intern($0) })
                        }
                        var section = section
                        section.renumber(map)
                        rows.enter(section: section)
                    },
                    { r in
                        var r = r
                        r.remap(strings: map.span)
                        try rows.add(sectionRow: r)
                    })
            }
            fileDone(file)
        }
    }

    /// The slots of a shard's merger when it merges an incremental state (docs/rules.md §12),
    /// in the order deduplication goes by.
    enum StateSlot: Int, CaseIterable {
        /// The part file's rows: every file read now, each row with its file's index.
        case partFile
        /// The files the state absorbed: the rows they gave this shard, counted, none kept.
        case absorbed
        /// The state's rows of this shard: the winners among those, merged last.
        case stateRows
    }

    /// The rows of a shard whose inputs several partition tasks read: each input file's
    /// sections into a ``FileRows`` of its own, merged file by file as ``TransactionReader``
    /// merges input files.
    static func readByFile(
        _ p: ResolvedPipeline, work: WorkFolder, shard: Int, partitions: [PartitionMarker]
    ) throws -> TransactionSet {
        let files = p.transactionFiles
        let merger = try Merger(count: files.count)
        let seen = ResultSlots<[Int]>(count: partitions.count)
        try parallelFor(count: partitions.count, threads: p.threads) { i in
            let path = work.part(task: i, shard: shard)
            guard let part = partitions[i].parts.first(where: { $0.shard == shard }) else {
                throw WinBackError(
                    .badData, "partition task \(i)'s marker lists no part file for shard \(shard)", path: path)
            }
            let reader = try PartReader(path: path, bytes: part.bytes, sha256: part.sha256)
            // A file's sections (several for a large one) go to one FileRows, merged once the
            // part file has been read and checked whole.
            var byFile: [Int: FileRows] = [:]
            while let (fi, f) = try reader.next(into: { fi in
                if let f = byFile[fi] { return f }
                let f = FileRows(path: fi < files.count ? files[fi] : "", store: merger.store)
                byFile[fi] = f
                return f
            }) {
                guard fi < files.count, fi % partitions.count == i else {
                    throw WinBackError(.badData, "part file names an input this task did not read", path: path)
                }
                f.stats.bytes = f.rows.count
            }
            for (fi, f) in byFile.sorted(by: { $0.key < $1.key }) { merger.add(f, index: fi) }
            seen[i] = byFile.keys.sorted()
        }
        // Files with no row of this shard still take their place in the order.
        var present = Set<Int>()
        for i in 0..<partitions.count { present.formUnion(seen[i]!) }
        for fi in files.indices where !present.contains(fi) {
            merger.add(FileRows(path: files[fi], store: merger.store), index: fi)
        }
        return merger.finish(threads: p.threads)
    }

    /// Why shard `shard` cannot fit (docs/rules.md §8.1): its part files are scanned without
    /// keeping a row, counting the most frequent transactionIds and customers (the
    /// Space-Saving sketch, a constant number of counters), and the heaviest is named.
    static func tooLarge(_ work: WorkFolder, shard: Int, partitions: [PartitionMarker], rows: Int) throws
        -> WinBackError
    {
        var transactions = HeavyHitters(capacity: 64)
        var customers = HeavyHitters(capacity: 64)
        for (i, m) in partitions.enumerated() {
            guard let part = m.parts.first(where: { $0.shard == shard }) else { continue }
            let reader = try PartReader(path: work.part(task: i, shard: shard), bytes: part.bytes, sha256: part.sha256)
            try reader.scan { r, table in
                transactions.add(r.transactionId.string(in: table))
                customers.add(
                    table.string(r.subscriptionGroupId) + "/" + r.originalTransactionId.string(in: table))
            }
        }
        let (t, tn) = transactions.top ?? ("", 0)
        let (c, cn) = customers.top ?? ("", 0)
        let culprit =
            tn * 2 > rows
            ? "transaction \(t) has about \(tn) versions (rows with that transactionId)"
            : cn * 2 > rows
                ? "customer \(c) (group/originalTransactionId) has about \(cn) rows"
                : "no single transaction or customer dominates it: give more memory"
        return WinBackError(
            .badData,
            "a shard holds \(rows) rows, more than fit in the memory limit; \(culprit), and all of them "
                + "belong to one shard")
    }
}

extension Inputs {
    /// The renewal files' info joined to the rows: its ids entered in the run's string table,
    /// merged after the renewal info found among the transactions; its stats and rejects kept.
    mutating func join(_ read: RenewalRead) {
        renewals.merge(read.index(in: strings))
        renewalStats = read.stats
        renewalRejects = read.rejects
    }
}
