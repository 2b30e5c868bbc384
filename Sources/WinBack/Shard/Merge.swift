import Foundation
import WinBackDelivery
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackWrite

/// `winback merge` (docs/rules.md §8): the shards' outputs merged into the run's segments,
/// reports, rejects and manifest, published atomically exactly as a run in one process would
/// publish them (byte-identical files, the manifest aside).
///
/// Streaming: segment files are merged line by line (k-way, bytewise, which is the customer
/// order of docs/rules.md §4.1 since identifiers hold no byte below `-`), and reports are sums
/// of the shards' rows; memory does not grow with the audience.
public enum Merge {
    /// A shard's apple-disagreements.csv, beside its segments.
    static let disagreements = "reports/apple-disagreements.csv"
    /// A shard's report rows (``ShardReports``).
    static let reports = "reports.json"

    /// Merges `shards` shards of `work` and publishes; returns the published folder. With a
    /// `publisher` already begun (a memory-bounded run holds the lock throughout), publishes
    /// through it. `started` is when the run began: for a memory-bounded run, before its
    /// partition. With the state `keeper` of an incremental memory-bounded run, the files its
    /// state absorbed are counted with those read now, their rejects listed with theirs, and
    /// once published the next state replaces the previous one (docs/rules.md §12).
    static func run(
        _ p: ResolvedPipeline, work: WorkFolder, shards: Int, progress: Progress, publisher given: Publisher? = nil,
        memoryLimit: Int? = nil, started: Date = Date(), state keeper: ShardedStateKeeper? = nil
    ) throws -> RunSummary {
        let fingerprint = try RunFingerprint(p, shards: shards)
        let partitions: [(PartitionMarker, digest: String)]
        var markers: [ShardMarker] = []
        do {
            try work.secure()
            partitions = try Partition.markers(work, expecting: fingerprint)
            let digests = partitions.map(\.digest)
            for k in 0..<shards {
                let (m, _) = try WorkFolder.finished(
                    ShardMarker.self, in: work.shard(k), what: "shard \(k) of \(shards)", expecting: fingerprint,
                    of: \.fingerprint)
                guard m.partitions == digests else {
                    throw WinBackError(
                        .noInput, "shard \(k) read the outputs of an earlier partition run: run shard \(k) again",
                        path: work.shard(k))
                }
                markers.append(m)
            }
            try checkOutputs(p, markers, work: work, shards: shards)
        } catch {
            // A memory-bounded run has begun its publish: its failure is kept as any other's.
            if let given { ShardedRun.failed(error, p, work: work, started: started, publisher: given) }
            throw error
        }
        work.removeLeftovers()

        // An array job began when its first partition task did; a memory-bounded run passes its own start.
        let first = partitions.compactMap { $0.0.started }.min().map { Date(timeIntervalSince1970: $0) }
        let began = given == nil ? min(first ?? started, started) : started
        // Once published, under the lock: the next state replaces the previous one.
        let swap = keeper.map { keeper in { keeper.state.swap(progress: progress) } }
        return try Stage.publishing(
            p, started: began, publisher: given, progress: progress,
            after: AfterPublish.steps(p, swapState: swap, progress: progress)
        ) {
            manifest, rejects, lists, staging, sync in
            progress.begin("merge")
            // Under a memory limit, what a step no longer needs is let go of before the next.
            let settle = { if memoryLimit != nil { ResidentMemory.releaseUnused() } }
            try count(
                p, partitions: partitions.map(\.0), markers: markers, keeper: keeper, work: work, manifest: &manifest,
                rejects: &rejects)

            let (reports, dropped, held) = try sum(p, work: work, shards: shards)
            manifest.eligible = zip(p.catalog.offers, reports.funnel).map { ($0.offerId, $1.funnel.eligible) }
            manifest.requireApple = p.config.requireApple
            manifest.droppedByApple = Array(zip(p.catalog.offers.map(\.offerId) + ["best-offer"], dropped))
            manifest.heldOut = Array(zip(p.catalog.offers.map(\.offerId) + ["best-offer"], held))
            settle()
            let tonight = ShardSegments(folders: (0..<shards).map { work.shard($0) })
            lists = tonight
            let steps = OutputSteps(
                lists: tonight, segments: { try segments(p, work: work, shards: shards, into: staging, sync: sync) },
                changes: { baseline in
                    // The exited rows' reasons from the shards that hold their customers.
                    let reasons = ShardReasonFiles((0..<shards).map { work.shard($0) + "/" + ShardReasons.file })
                    let changes = try Changes.write(p, tonight: tonight, baseline: baseline, to: staging, sync: sync) {
                        segment, _, row in try reasons.reason(segment: segment, row)
                    }
                    try reasons.finish()
                    return changes
                },
                reports: {
                    (reports, try writeReports(reports, p, work: work, shards: shards, into: staging, sync: sync))
                },
                reportsBeside: false,
                bounds: memoryLimit.map { IdentityJoin.Bounds(folder: work.root + "/identities", memory: $0) },
                between: settle)
            let outputs = try Stage.writeOutputs(
                p, steps, baseline: fingerprint.baseline, rejects: &rejects, manifest: &manifest, to: staging,
                sync: sync)
            manifest.outputs = outputs
            manifest.stages = [
                ("partition", partitions.reduce(0) { $0 + $1.0.seconds }),
                ("shards", markers.reduce(0) { $0 + $1.seconds }),
                ("merge", progress.end("\(counted(shards, "shard")), \(outputs.count) files")),
            ]
            if let memoryLimit { manifest.memory = (memoryLimit, shards, System.peakResidentBytes) }
        }.summary
    }

    /// What the partition tasks and shards read and counted, into the manifest; their rejects
    /// (and those the incremental state absorbed) into `rejects`. More rejected rows than the
    /// budget allows is 65.
    static func count(
        _ p: ResolvedPipeline, partitions: [PartitionMarker], markers: [ShardMarker], keeper: ShardedStateKeeper?,
        work: WorkFolder, manifest: inout Manifest, rejects: inout RejectList
    ) throws {
        if let absorbed = keeper?.absorbedRejects { rejects.merge(absorbed) }
        let absorbedInputs = keeper?.absorbedInputs ?? []
        for m in partitions {
            if let (list, _) = try IntermediateFile.readJSON(RejectList.self, from: work.task(m.task) + "/rejects.json")
            {
                rejects.merge(list)
            }
        }
        rejects.merge(markers[0].renewalRejects)
        rejects.normalize()
        var counters = ReadCounters()
        for inputs in [absorbedInputs] + partitions.map(\.inputs) {
            for input in inputs { counters.add(file: input.counts) }
        }
        var states = CustomerStates()
        for m in markers {
            counters.add(deduplicationOf: m.counters)
            states.add(m.customerStates)
        }
        manifest.inputs = (absorbedInputs + partitions.flatMap(\.inputs)).sorted { $0.file < $1.file }.map(
            \.counts.stats)
        if let keeper { manifest.incremental = keeper.state.summary }
        manifest.counters = counters
        manifest.renewalInputs = markers[0].renewalInputs
        manifest.renewalRejected = markers[0].renewalRejects.total
        manifest.states = states
        try Stage.checkRejectBudget(counters, limit: p.config.maxRejectedFraction)
    }

    /// Checks every file of every shard against the size and SHA-256 its marker recorded
    /// (docs/rules.md §8.1), before any of them is read: a damaged, missing or unlisted file is
    /// bad data (65) naming it.
    static func checkOutputs(_ p: ResolvedPipeline, _ markers: [ShardMarker], work: WorkFolder, shards: Int) throws {
        let names = segmentFiles(p) + [reports, disagreements, ShardReasons.file]
        let jobs = (0..<shards).flatMap { k in names.map { (k, $0) } }
        try parallelFor(count: jobs.count, threads: p.threads) { j in
            let (k, name) = jobs[j]
            let path = work.shard(k) + "/" + name
            guard let expected = markers[k].outputs.first(where: { $0.path == name }) else {
                throw WinBackError(.badData, "shard \(k)'s marker does not list this file", path: path)
            }
            try IntermediateFile.check(path, against: expected)
        }
    }

    /// The report files: those of ``ReportWriter`` from the summed reports, but for the
    /// disagreements, merged from the shards' sorted files.
    /// report.html is written after the destinations (``Stage/writePage(_:_:manifest:outputs:at:to:sync:)``).
    static func writeReports(
        _ reports: Reports, _ p: ResolvedPipeline, work: WorkFolder, shards: Int, into directory: String,
        sync: DiskSync
    ) throws -> [OutputStats] {
        let name = (disagreements as NSString).lastPathComponent
        return try ReportWriter(reports: reports, title: p.config.name).write(
            to: directory, sync: sync,
            writing: [name: { try mergeCSV((0..<shards).map { work.shard($0) + "/" + disagreements }, into: $0) }],
            page: false)
    }

    /// The run's reports: the shards' rows summed, each report's by its rows' own keys and `+`
    /// (``ShardReports/add(_:)``), in the orders of docs/rules.md §4.3 and §4.5 (but for
    /// the disagreements, merged from files); and the segment rows `audience.requireApple` left
    /// out, per catalog offer, then best-offer.
    ///
    /// Also the segment rows the experiment held out, per catalog offer, then best-offer.
    static func sum(_ p: ResolvedPipeline, work: WorkFolder, shards: Int) throws -> (Reports, [Int], [Int]) {
        @Sendable func read(_ k: Int) throws -> ShardReports {
            let path = work.shard(k) + "/" + reports
            guard let (r, _) = try IntermediateFile.readJSON(ShardReports.self, from: path) else {
                throw WinBackError(.noInput, "shard \(k) has no reports", path: path)
            }
            return r
        }
        // With threads to spare, the next shard's reports are read and decoded while this
        // one's are added: two shards' reports held at once, not more.
        let ahead = p.threads > 1
        var next = ahead && shards > 0 ? Ahead { try read(0) } : nil
        var total: ShardReports?
        for k in 0..<shards {
            let r = try next?.get() ?? read(k)
            next = ahead && k + 1 < shards ? Ahead { try read(k + 1) } : nil
            let path = work.shard(k) + "/" + reports
            if total == nil {
                total = r
            } else if total?.add(r) != true {
                throw WinBackError(.badData, "shard \(k)'s reports do not match shard 0's", path: path)
            }
        }
        guard let total else { throw WinBackError(.noInput, "no shard reports to merge", path: work.root) }
        let window = ReportWindow(asOf: p.asOf, months: p.config.windowMonths)
        return (
            total.reports(window: window, experiment: p.config.experiment), total.droppedByApple, total.heldOut
        )
    }

    /// The segment files of a run of `p`, each shard's and the merged.
    static func segmentFiles(_ p: ResolvedPipeline) -> [String] {
        SegmentWriter.names(offerIds: p.catalog.offers.map(\.offerId), experiment: p.config.experiment != nil)
            .flatMap { n in p.config.formats.map { "segments/\(n).\($0)" } }
    }

    /// Every segment file, merged from the shards'.
    static func segments(
        _ p: ResolvedPipeline, work: WorkFolder, shards: Int, into directory: String, sync: DiskSync
    ) throws -> [OutputStats] {
        try OutputFile.makeFolder(directory + "/segments")
        let jobs = segmentFiles(p)
        let slots = ResultSlots<OutputStats>(count: jobs.count)
        try parallelFor(count: jobs.count, threads: p.threads) { j in
            let rel = jobs[j]
            let sources = (0..<shards).map { work.shard($0) + "/" + rel }
            let out = try OutputFile(path: directory + "/" + rel, sync: sync)
            let rows =
                rel.hasSuffix(".xml")
                ? try mergeXML(sources, into: out) : try mergeCSV(sources, into: out)
            let (bytes, sha) = try out.finish()
            slots[j] = OutputStats(path: rel, bytes: bytes, rows: rows, sha256: sha)
        }
        return slots.all
    }

    /// A header line, then every shard's rows in bytewise order; returns the rows.
    static func mergeCSV(_ paths: [String], into out: OutputFile) throws -> Int {
        let readers = try paths.map { try LineCursor(path: $0) }
        guard let header = try readers[0].next().map(Array.init) else {
            throw WinBackError(.badData, "empty shard segment file", path: paths[0])
        }
        for r in readers.dropFirst() { _ = try r.next() }
        try out.write(header)
        return try LineCursor.merge(readers, until: nil) { try out.write($0) }
    }

    /// The XML declaration, the root element with the total of the shards' customers, their
    /// customer elements in bytewise order, and the closing tag; returns the customers.
    static func mergeXML(_ paths: [String], into out: OutputFile) throws -> Int {
        let readers = try paths.map { try LineCursor(path: $0) }
        var declaration: [UInt8] = []
        var root: [UInt8] = []
        var total = 0
        var open: [LineCursor] = []
        for (i, r) in readers.enumerated() {
            guard let decl = try r.next().map(Array.init), let top = try r.next().map(Array.init) else {
                throw WinBackError(.badData, "shard segment file ends early", path: paths[i])
            }
            guard let n = rootCount(top) else {
                throw WinBackError(.badData, "shard segment file has no customers count", path: paths[i])
            }
            if i == 0 {
                declaration = decl
                root = top
            }
            total += n
            if !top.ends(with: "/>\n") { open.append(r) }
        }
        // The root as it would be written with `total` customers: open, or empty and closed.
        var head = String(decoding: root, as: UTF8.self)
        head = head.replacingOccurrences(
            of: #" customers="[0-9]+""#, with: " customers=\"\(total)\"", options: .regularExpression)
        let closed = head.hasSuffix("/>\n")
        let bare = closed ? String(head.dropLast(3)) : String(head.dropLast(2))
        try out.write(declaration)
        guard total > 0 else {
            try out.write(Array((bare + "/>\n").utf8))
            return 0
        }
        try out.write(Array((bare + ">\n").utf8))
        let rows = try LineCursor.merge(open, until: UInt8(ascii: "<")) { try out.write($0) }
        let name = bare.dropFirst().prefix { $0 != " " && $0 != ">" }
        try out.write(Array("</\(name)>\n".utf8))
        return rows
    }

    /// `customers="N"` of a root element line.
    static func rootCount(_ line: [UInt8]) -> Int? {
        let s = String(decoding: line, as: UTF8.self)
        guard let r = s.range(of: #"customers="[0-9]+""#, options: .regularExpression) else { return nil }
        return Int(s[r].dropFirst(11).dropLast())
    }
}

extension Array where Element == UInt8 {
    func ends(with s: String) -> Bool {
        let b = Array(s.utf8)
        return count >= b.count && Array(self[(count - b.count)...]) == b
    }
}

/// The segment lists of a merge (``SegmentSource``): each list's shard files merged again, line
/// by line in the order ``Merge/mergeCSV(_:into:)`` wrote them, every line checked to be a
/// segment row; the steps after the segments never read the merged files back.
struct ShardSegments: SegmentSource {
    /// The shards' folders, each with its `segments/`.
    let folders: [String]

    func forEachRow(of name: String, keysOnly: Bool, _ body: (SegmentRow) throws -> Void) throws {
        let paths = folders.map { $0 + "/segments/" + name + ".csv" }
        let readers = try paths.map { try LineCursor(path: $0) }
        for (i, r) in readers.enumerated() where try r.next() == nil {
            throw WinBackError(.badData, "empty shard segment file", path: paths[i])
        }
        var row = SegmentRow()
        var record: [UInt8] = []
        _ = try LineCursor.merge(readers, until: nil) { line in
            record.removeAll(keepingCapacity: true)
            record.append(contentsOf: line)
            if record.last == UInt8(ascii: "\n") { record.removeLast() }
            guard let fields = SegmentRecords.split(record, only: keysOnly ? SegmentRecords.keyColumns : nil),
                fields.count == SegmentWriter.columns.count
            else {
                throw WinBackError(.badData, "a shard's row of segment \(name) is not a segment row", path: paths[0])
            }
            row.fill(fields: fields)
            try body(row)
        }
    }
}
