import Foundation
import WinBackDelivery
import WinBackModel
import WinBackPipeline
import WinBackPostgres
import WinBackRead
import WinBackRules
import WinBackS3
import WinBackSupport
import WinBackWrite

/// What the command line may override in a pipeline file.
public struct RunOptions: Sendable {
    public var pipelinePath: String
    public var asOf: String?
    public var output: String?
    public var threads: Int?
    /// The library that inflates `.gz` inputs; nil = the pipeline file's `inflater`.
    public var inflater: Inflater?
    /// A memory limit in bytes (`--memory`): run partitioned under it; nil = the pipeline
    /// file's `limits.memory`.
    public var memory: Int?
    /// The wall clock, in ms since the epoch (injectable for tests).
    public var now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
    /// Rows a piece of an incremental state holds at most (``InMemoryStateKeeper/pieceRows``;
    /// tests lower it, to have many pieces of a small world).
    var statePieceRows = InMemoryStateKeeper.pieceRows

    public init(pipelinePath: String, asOf: String? = nil, output: String? = nil, threads: Int? = nil) {
        self.pipelinePath = pipelinePath
        self.asOf = asOf
        self.output = output
        self.threads = threads
    }
}

/// The outcome of a successful run.
public struct RunSummary: Sendable {
    /// `<output>/<name>/<YYYY-MM-DD>` as published.
    public var published: String
    public var asOf: Int64
    public var states: CustomerStates
    public var counters: ReadCounters
    /// (offerId, eligible customers) in catalog order.
    public var eligible: [(String, Int)]
    public var seconds: Double
}

extension ResolvedPipeline {
    /// Loads the pipeline file and catalog and resolves the input globs (exit 78 / 66).
    public static func resolve(_ o: RunOptions) throws -> ResolvedPipeline {
        try resolve(o, config: PipelineConfig.load(path: o.pipelinePath))
    }

    /// ``resolve(_:)`` with the pipeline file already read (a run reads it once).
    static func resolve(_ o: RunOptions, config: PipelineConfig) throws -> ResolvedPipeline {
        // Before any S3 request: the run's network time is bounded (docs/rules.md §6.2).
        S3Client.limitNetwork(seconds: Double(config.networkSeconds))
        let (asOf, out) = try target(config, o)
        let catalogPath = config.resolve(config.offersPath)
        let catalog = try OfferCatalog.load(path: catalogPath, contents: try InputStores.contents(catalogPath))
        // The output folder may be the command line's: the metrics file must not be in it either
        // (docs/rules.md §6.2).
        if let m = config.metricsPath, MetricsPlace.isInside(config.resolve(m), output: out) {
            throw WinBackError(
                .configuration, "field 'output.metrics': " + MetricsPlace.insideProblem(m, output: out),
                path: o.pipelinePath)
        }
        let threads = o.threads ?? config.threads ?? ProcessInfo.processInfo.activeProcessorCount
        let inflater = try self.inflater(asked: o.inflater, file: config.inflater, path: o.pipelinePath)
        if let i = config.identities {
            let path = config.resolve(i.path)
            guard InputStores.existsAsFile(path) else {
                throw WinBackError(.noInput, "the identities file is missing", path: path)
            }
        }
        // Every configuration error found before anything is read (docs/rules.md §10.7).
        try Delivery.checkIdentities(config, inflater: inflater)
        let signed =
            config.format == .appstoreSigned
            ? try SignedReading.resolve(config.apple, folder: config.folder, now: o.now) : nil
        // A table read by a cursor reads only the rows above the ranges the state absorbed
        // (docs/rules.md §14.1).
        InputStores.limitTables(seconds: Double(config.networkSeconds))
        for t in config.tables where t.label != config.identities?.path {
            try t.check(seconds: Double(config.networkSeconds))
        }
        for t in config.tables where t.cursor != nil && config.transactionPaths == [t.label] {
            let ranges =
                config.incremental ? StateFolder.absorbedRanges(root: out + "/" + config.name, label: t.label) : []
            InputStores.setAbsorbed(ranges, of: t.label)
        }
        let transactions = try InputStores.resolve(config.transactionPaths, base: config.folder)
        let renewals = try InputStores.resolve(config.renewalInfoPaths, base: config.folder)
        return ResolvedPipeline(
            config: config, catalog: catalog, asOf: asOf.resolve(now: o.now), threads: max(1, threads),
            inflater: inflater, outputDirectory: out, transactionFiles: transactions.map(\.path),
            renewalFiles: renewals.map(\.path), signed: signed, rates: try MoneyRates.load(config),
            transactionInputs: transactions, renewalInputs: renewals, memoryLimit: o.memory ?? config.memoryLimit)
    }

    /// A run publishes at most a day after the clock (docs/rules.md §6.3): an as-of further
    /// ahead would move `latest` there for every later night and prune the weeks kept before
    /// it, so it is a usage error (64) unless the run writes to an `--output` of its own (a
    /// planning run).
    func checkAsOf(_ o: RunOptions) throws {
        try Self.checkAsOf(asOf: asOf, output: outputDirectory, config: config, o)
    }

    /// ``checkAsOf(_:)`` from the pipeline file and the command line alone: before anything
    /// else is read. An `--output` that resolves to the pipeline's own folder is not one of its own.
    static func checkAsOf(_ config: PipelineConfig, _ o: RunOptions) throws {
        let (asOf, out) = try target(config, o)
        try checkAsOf(asOf: asOf.resolve(now: o.now), output: out, config: config, o)
    }

    /// The as-of (`--as-of`, else the pipeline's) and the output folder (`--output`, else the
    /// pipeline's) of a run of `config`; a bad `--as-of` is a usage error (64).
    static func target(_ config: PipelineConfig, _ o: RunOptions) throws -> (asOf: PipelineConfig.AsOf, output: String)
    {
        var asOf = config.asOf
        if let s = o.asOf {
            guard let v = PipelineConfig.AsOf.parse(s) else {
                throw WinBackError(.usage, "--as-of \(PipelineConfig.AsOf.problem(s))")
            }
            asOf = v
        }
        let cwd = System.currentDirectory
        return (asOf, o.output.map { InputFiles.absolute($0, base: cwd) } ?? config.resolve(config.outputDirectory))
    }

    private static func checkAsOf(asOf: Int64, output: String, config: PipelineConfig, _ o: RunOptions) throws {
        guard asOf > o.now + 86_400_000 else { return }
        let own = config.resolve(config.outputDirectory)
        let same = output == own || (System.resolved(output).map { $0 == System.resolved(own) } ?? false)
        guard o.output == nil || same else { return }
        throw WinBackError(
            .usage,
            "the as-of \(Timestamp.date(asOf)) is more than a day after the clock (\(Timestamp.date(o.now))): "
                + "it would move latest ahead and prune the runs kept before it; a planning run writes to an "
                + "--output of its own (docs/rules.md §6.3)")
    }

    /// The run's publisher, begun (its lock held) before any S3 request, when the pipeline
    /// reads an input from S3: a run that hangs on the network holds back the next one rather
    /// than racing it (docs/rules.md §6.2). Nil when every input is local (the lock is taken as
    /// the run publishes).
    static func lockedBeforeNetwork(_ o: RunOptions, config: PipelineConfig) throws -> Publisher? {
        let inputs =
            config.transactionPaths + config.renewalInfoPaths + [config.offersPath] + [config.identities?.path ?? ""]
            + [config.money?.ratesPath ?? ""]
        guard inputs.contains(where: InputStores.isObject) else { return nil }
        let (asOf, out) = try target(config, o)
        let publisher = Publisher(
            root: out + "/" + config.name, date: Timestamp.date(asOf.resolve(now: o.now)), group: config.outputGroup)
        try publisher.begin()
        return publisher
    }

    /// The publisher of this pipeline's runs: `<output>/<name>/` and the as-of date.
    func publisher() -> Publisher {
        Publisher(root: outputDirectory + "/" + config.name, date: Timestamp.date(asOf), group: config.outputGroup)
    }

    /// The inflater of a run: the command line's, else the pipeline file's choice. One this
    /// machine lacks is a usage error (exit 64) from the command line, a configuration error
    /// (exit 78) from the file.
    static func inflater(
        asked: Inflater?, file: InflaterChoice, path: String, isalAvailable: Bool = Inflater.isal.isAvailable
    ) throws -> Inflater {
        let inflater = asked ?? file.resolved(isalAvailable: isalAvailable)
        if inflater == .isal && !isalAvailable {
            if asked != nil { throw inflater.unavailable }
            throw WinBackError(
                .configuration,
                "field 'inflater': isal is not available on this machine (Debian: apt-get install libisal-dev, "
                    + "then rebuild); use auto to fall back to zlib",
                path: path)
        }
        return inflater
    }
}

/// The nightly job: the stages of ``Stage`` composed — read → group → evaluate → report and
/// write → publish, then the steps after the publish — with the manifest kept along the way.
public enum PipelineRun {
    /// Runs the pipeline (``runHoldingMemory(_:progress:)``); the run's memory is freed before
    /// this returns.
    public static func run(_ options: RunOptions, progress: Progress) throws -> RunSummary {
        try runHoldingMemory(options, progress: progress).summary
    }

    /// Runs the pipeline and returns its summary with its memory still held (``RunMemory``):
    /// a process that ends while it holds the value (the command line) leaves the run's rows
    /// and results to the system rather than freeing them piece by piece first.
    ///
    /// Writes `output.metrics` after the run, failed or not, once the pipeline file was read
    /// (docs/rules.md §10.3).
    public static func runHoldingMemory(_ options: RunOptions, progress: Progress) throws -> PublishedRun {
        let started = Date()
        // The pipeline file read once: for the lock, the run, and the metrics of a failed run.
        var read: PipelineConfig.Read?
        do {
            read = try PipelineConfig.read(path: options.pipelinePath)
            return try runPipeline(options, config: read!.usable(), started: started, progress: progress)
        } catch {
            MetricsFile.failed(
                read?.config, output: options.output, started: started, error: error, progress: progress)
            throw error
        }
    }

    static func runPipeline(
        _ options: RunOptions, config: PipelineConfig, started: Date, progress: Progress
    ) throws -> PublishedRun {
        try ResolvedPipeline.checkAsOf(config, options)
        let locked = try ResolvedPipeline.lockedBeforeNetwork(options, config: config)
        let p: ResolvedPipeline
        do {
            p = try ResolvedPipeline.resolve(options, config: config)
            try p.checkAsOf(options)
        } catch {
            if let locked {
                System.removeTreeQuietly(locked.staging)
                locked.unlock()
            }
            throw error
        }
        progress.pipeline = p.config.name
        Delivery.warnOffersWithoutLink(p, progress: progress)
        // Which inflater reads the gzip inputs: ISA-L's where it loads (the default, `auto`).
        progress.event(
            "inflater", "inflating with \(p.inflater.rawValue)",
            fields: [
                "inflater": p.inflater.rawValue, "asked": options.inflater?.rawValue ?? p.config.inflater.rawValue,
            ])
        if let memory = options.memory ?? p.config.memoryLimit {
            Allocator.handFreedPagesBack()
            let summary = try ShardedRun.bounded(
                options, memory: memory, progress: progress, started: started, publisher: locked, resolved: p)
            // Each shard's memory was freed as the next began: nothing large is left to hold.
            return PublishedRun(summary: summary, memory: RunMemory(()))
        }
        Allocator.keepFreedPages()
        // The run's lock before its state is examined: a state is read and replaced under it.
        let publisher = locked ?? p.publisher()
        if locked == nil { try publisher.begin() }
        let keeper =
            p.config.incremental
            ? InMemoryStateKeeper(p, root: publisher.root, pieceRows: options.statePieceRows) : nil
        defer { keeper?.discard() }
        // Once published, under the lock: the next state replaces the previous one.
        let swap = keeper.map { keeper in { keeper.state.swap(progress: progress) } }
        return try Stage.publishing(
            p, started: started, publisher: publisher, progress: progress,
            after: AfterPublish.steps(p, swapState: swap, progress: progress)
        ) {
            manifest, rejects, lists, staging, sync in
            let inputs = try Stage.read(p, .incremental(keeper), progress: progress)
            rejects = inputs.rejects
            manifest.record(inputs)
            if let keeper {
                manifest.incremental = keeper.state.summary
                progress.event("incremental", keeper.state.line, fields: ["state": keeper.state.use.rawValue])
            }
            let c = inputs.transactions.counters
            manifest.stages.append(
                (
                    "read",
                    progress.end(
                        ReadSummary(
                            filesRead: keeper?.state.filesRead ?? p.transactionFiles.count,
                            filesFromState: keeper?.state.filesFromState ?? 0, bytesRead: inputs.bytesRead,
                            counters: c, rowsFromState: keeper?.state.rowsFromState ?? 0
                        ).line)
                ))
            try Stage.checkRejectBudget(c, limit: p.config.maxRejectedFraction)

            progress.begin("evaluate")
            let customers = Stage.group(inputs, threads: p.threads)
            let book = Stage.offers(p, strings: inputs.strings)
            let (audience, counted) = Stage.evaluate(customers, book: book, renewals: inputs.renewals, p)
            manifest.record(audience, catalog: p.catalog, requireApple: p.config.requireApple)
            manifest.stages.append(("evaluate", progress.end(audience.summaryLine)))

            progress.begin("write")
            let written = try Stage.write(
                customers, audience: audience, reports: counted, book: book, rejects: &rejects,
                manifest: &manifest, p, to: staging, sync: sync)
            manifest.outputs = written.outputs
            lists = written.lists
            manifest.stages.append(("write", progress.end("\(manifest.outputs.count) files")))
            // Held by the published run (``RunMemory``): releasing them takes a while.
            return (inputs, customers, audience)
        }
    }
}
