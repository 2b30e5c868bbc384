import Foundation
import WinBackDelivery
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The entry points of a run past one machine (docs/rules.md §8): the three stages of an array
/// job, and the same three inside one process under a memory limit.
public enum ShardedRun {
    /// `winback partition`: task `task` (nil: the scheduler's index) of `tasks`.
    public static func partition(
        _ options: RunOptions, work: String, shards: Int, task: Int?, tasks: Int, progress: Progress
    ) throws -> Partition.Summary {
        try checkCounts(shards: shards, tasks: tasks)
        let p = try ResolvedPipeline.resolve(options)
        try refuseTables(p)
        try p.checkAsOf(options)
        progress.pipeline = p.config.name
        let i = try WorkFolder.index(task, option: "--task", count: tasks)
        if p.config.incremental {
            progress.warn(
                "incremental", "incremental: true is not used by array jobs: every file is read (docs/rules.md §12)")
        }
        let total = p.transactionFiles.indices.filter { $0 % tasks == i }.reduce(0) {
            $0 + p.transactionInput($1).identity.size
        }
        progress.begin("partition \(i) of \(tasks)", totalBytes: total)
        let s = try Partition.run(
            p, work: WorkFolder(work), shards: shards, task: i, tasks: tasks, progress: { progress.advance($0) })
        _ = progress.end(
            "\(s.files) files, \(s.rows) rows, \(s.rejected) rejected, \(Progress.mb(s.partBytes)) of parts")
        return s
    }

    /// An array job reads its inputs in several tasks, each resolving them itself: a table's
    /// rows would be read as each task found the table, at another moment (docs/rules.md §14.1).
    static func refuseTables(_ p: ResolvedPipeline) throws {
        guard (p.transactionFiles + p.renewalFiles).contains(where: InputStores.isTable) else { return }
        throw WinBackError(
            .configuration,
            "PostgreSQL inputs are read by one run (`winback run`, with --memory when it must be bounded), not by "
                + "an array job's tasks, which would each see the table at another moment (docs/rules.md §14.1)",
            path: p.config.path)
    }

    /// `winback run --work --shard`: shard `shard` (nil: the scheduler's index) of `shards`.
    public static func shard(
        _ options: RunOptions, work: String, shard: Int?, shards: Int, progress: Progress
    ) throws -> ShardRun.Summary {
        try checkCounts(shards: shards, tasks: 1)
        let folder = WorkFolder(work)
        try folder.secure()
        let p = try agreed(ResolvedPipeline.resolve(options), work: folder, asOfGiven: options.asOf != nil)
        progress.pipeline = p.config.name
        let k = try WorkFolder.index(shard, option: "--shard", count: shards)
        progress.begin("shard \(k) of \(shards)")
        let s = try ShardRun.run(p, work: folder, shard: k, shards: shards)
        _ = progress.end("\(s.rows) rows, \(s.customers) customers")
        return s
    }

    /// `winback merge`.
    public static func merge(_ options: RunOptions, work: String, shards: Int, progress: Progress) throws -> RunSummary
    {
        let started = Date()
        // The pipeline file read once: for the merge, and the metrics of one that failed.
        var read: PipelineConfig.Read?
        do {
            try checkCounts(shards: shards, tasks: 1)
            let folder = WorkFolder(work)
            try folder.secure()
            read = try PipelineConfig.read(path: options.pipelinePath)
            let resolved = try ResolvedPipeline.resolve(options, config: read!.usable())
            let p = try agreed(resolved, work: folder, asOfGiven: options.asOf != nil)
            try p.checkAsOf(options)
            progress.pipeline = p.config.name
            Delivery.warnOffersWithoutLink(p, progress: progress)
            return try Merge.run(p, work: folder, shards: shards, progress: progress)
        } catch {
            MetricsFile.failed(
                read?.config, output: options.output, started: started, error: error, progress: progress)
            throw error
        }
    }

    /// `winback run --memory`: partition, every shard one after the other, and merge, in this
    /// process, with the parts in a folder beside the output that is removed afterwards (and,
    /// after a killed run, by the next run under the lock).
    ///
    /// `started` is when the run began (the manifest's `started`); `publisher`, one already
    /// begun (its lock taken before any S3 request, docs/rules.md §6.2).
    public static func bounded(
        _ options: RunOptions, memory: Int, progress: Progress, shards chosen: Int? = nil, started: Date = Date(),
        publisher given: Publisher? = nil, resolved: ResolvedPipeline? = nil
    ) throws -> RunSummary {
        let p = try resolved ?? ResolvedPipeline.resolve(options)
        progress.pipeline = p.config.name
        var shards = chosen ?? shardCount(p, memory: memory)
        let publisher = given ?? p.publisher()
        if given == nil { try publisher.begin() }  // removes the work folders of killed runs
        let work = WorkFolder(publisher.root + "/.work-\(System.processID)")
        defer { System.removeTreeQuietly(work.root) }
        // An incremental run keeps its state per shard (docs/rules.md §12), in as many shards as
        // an earlier night found the rows needed, when the estimate asks for fewer.
        let keeper =
            p.config.incremental
            ? ShardedStateKeeper(p, root: publisher.root, shards: shards, keepingMoreShards: chosen == nil) : nil
        if let kept = keeper?.shards { shards = kept }
        defer { keeper?.state.discard() }
        do {
            // Again after a damaged state, with the shards the first attempt settled on.
            shards = try StateFolder.rebuildingIfDamaged(keeper?.state, progress: progress) { again in
                try partitionAndShards(
                    p, work: work, shards: shards, chosen: again || chosen != nil, memory: memory, keeper: keeper,
                    progress: progress)
            }
            if let keeper {
                guard
                    let (marker, _) = try IntermediateFile.readJSON(
                        PartitionMarker.self, from: work.task(0) + "/" + WorkFolder.marker)
                else { throw WinBackError(.software, "the partition task left no marker", path: work.task(0)) }
                let rejects =
                    try IntermediateFile.readJSON(RejectList.self, from: work.task(0) + "/rejects.json")?.0
                    ?? RejectList(limit: p.config.maxRejectsListed)
                let renewals =
                    try IntermediateFile.readJSON([FoundRenewal].self, from: work.task(0) + "/renewals.json")?.0
                    ?? []
                try keeper.finishShards(
                    inputs: marker.inputs, shardParts: marker.parts.map { ($0.shard, $0.rows) }, rejects: rejects,
                    renewals: renewals)
                progress.event("incremental", keeper.state.line, fields: ["state": keeper.state.use.rawValue])
            }
        } catch {
            failed(error, p, work: work, started: started, publisher: publisher)
            throw error
        }
        return try Merge.run(
            p, work: work, shards: shards, progress: progress, publisher: publisher, memoryLimit: memory,
            started: started, state: keeper)
    }

    /// A memory-bounded run's failure before its merge publishes: the manifest saying why and
    /// the partition's rejects kept in `.failed-<date>/`, the staging folder removed and the lock
    /// released (docs/rules.md §6).
    static func failed(_ error: Error, _ p: ResolvedPipeline, work: WorkFolder, started: Date, publisher: Publisher) {
        var manifest = Manifest(p, started: started)
        let rejects =
            (try? IntermediateFile.readJSON(RejectList.self, from: work.task(0) + "/rejects.json"))??.0
            ?? RejectList(limit: p.config.maxRejectsListed)
        manifest.failed(error, rejects: rejects, folder: p.config.folder, publisher: publisher)
    }

    /// The partition and every shard of a memory-bounded run, one after the other; returns the
    /// shards used. With a state keeper, files the state absorbed are not partitioned, and each
    /// shard merges its rows of the state and writes those of the next one.
    private static func partitionAndShards(
        _ p: ResolvedPipeline, work: WorkFolder, shards initial: Int, chosen: Bool, memory: Int,
        keeper: ShardedStateKeeper?,
        progress: Progress
    ) throws -> Int {
        var shards = initial
        var absorbed = try keeper?.beginShards() ?? []
        func partition() throws -> Partition.Summary {
            let reading = p.transactionFiles.indices.filter { !absorbed.contains($0) }
            progress.begin(
                "partition into \(counted(shards, "shard"))",
                totalBytes: reading.reduce(0) { $0 + p.transactionInput($1).identity.size })
            let s = try Partition.run(
                p, work: work, shards: shards, task: 0, tasks: 1, progress: { progress.advance($0) },
                skipping: absorbed)
            _ = progress.end("\(s.rows) rows, \(Progress.mb(s.partBytes)) of parts")
            return s
        }
        ResidentMemory.releaseUnused()
        let s = try partition()
        ResidentMemory.releaseUnused()
        // The estimate went by bytes; the rows now known (with the state's) may ask for more
        // shards (inputs that compress far better than exports do). Once.
        let largest = zip(s.shardRows, 0..<shards).map { $0 + (keeper?.shard($1).rows?.stats.rows ?? 0) }.max() ?? 0
        if !chosen, largest > maxRows(memory),
            case let more = min(
                4096, Int((Double(shards) * Double(largest) / Double(maxRows(memory)) * 1.25).rounded(.up))),
            more > shards
        {
            progress.event(
                "repartition",
                "\(largest) rows in one shard do not fit; partitioning again into \(more) shards",
                fields: ["largestShardRows": largest, "shards": more])
            shards = more
            if let keeper {
                keeper.reshard(more)
                absorbed = try keeper.beginShards()
            }
            _ = try partition()
        }
        // A shard's part file, once read, is removed while the next shard works: freeing its
        // pages takes the kernel a while, and a shard leaves one core idle at times. Every
        // removal is done before this returns (or throws), so a partition again never meets one.
        let removing = DispatchGroup()
        defer { removing.wait() }
        for k in 0..<shards {
            progress.begin("shard \(k) of \(shards)")
            let r = try ShardRun.run(
                p, work: work, shard: k, shards: shards, maxRows: maxRows(memory), state: keeper?.shard(k))
            if let keeper, let kept = r.state { keeper.shard(k, wrote: kept) }
            let part = work.part(task: 0, shard: k)
            DispatchQueue.global(qos: .utility).async(group: removing) { System.removeTreeQuietly(part) }
            ResidentMemory.releaseUnused()
            _ = progress.end("\(r.customers) customers")
        }
        return shards
    }

    /// Shards enough that one shard's customers fit in `memory`: a run holds about twice the
    /// gzipped input (a fifth of uncompressed NDJSON or CSV) at its peak, plus a fixed part.
    static func shardCount(_ p: ResolvedPipeline, memory: Int) -> Int {
        let estimate = p.inputs.reduce(0.0) { sum, input in
            let size = Double(input.identity.size)
            return sum + (isGzipName(input.path) ? 2.0 * size : 0.25 * size)
        }
        return shardCount(estimate: estimate, memory: memory)
    }

    /// Shards for a run estimated to hold `estimate` bytes at its peak in memory.
    static func shardCount(estimate: Double, memory: Int) -> Int {
        max(1, min(4096, Int((estimate / Double(room(memory))).rounded(.up))))
    }

    /// Rows one shard may hold under `memory`: a row costs about ``rowBytes`` at a shard's peak
    /// (the row, its place in the deduplication index, grouping and the results).
    static func maxRows(_ memory: Int) -> Int { room(memory) / rowBytes }

    /// What one shard's customers may take under `memory`: what ``baseMemory`` leaves, and at
    /// least an eighth of the limit. Near the 32 MB minimum the run's own code, libraries and
    /// buffers hold 25 to 28 MB of it, however little it frees between stages (measured on the
    /// 20,000-customer world: a shard of a quarter of the limit peaked at 29 to 32 MB).
    static func room(_ memory: Int) -> Int { max(memory - baseMemory, memory / 8) }

    /// Measured: 120 to 137 bytes a row above the process's own at the peak of a shard (200,000
    /// customers under 96 MB, 1,000,000 under 256 MB), and a margin.
    static let rowBytes = 144

    /// Memory a run takes whatever its input (code, libraries, buffers, the catalog).
    static let baseMemory = 48 << 20

    static func checkCounts(shards: Int, tasks: Int) throws {
        guard shards >= 1, shards <= 4096 else { throw WinBackError(.usage, "--shards must be between 1 and 4096") }
        guard tasks >= 1, tasks <= 4096 else { throw WinBackError(.usage, "--tasks must be between 1 and 4096") }
    }

    /// `p` with the as-of instant the partition tasks resolved, unless one was given here.
    static func agreed(_ p: ResolvedPipeline, work: WorkFolder, asOfGiven: Bool) throws -> ResolvedPipeline {
        var p = p
        if !asOfGiven, let (m, _) = try Partition.firstMarker(work) { p.asOf = m.fingerprint.asOf }
        return p
    }
}
