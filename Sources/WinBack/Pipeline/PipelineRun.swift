import Foundation

/// What the command line may override in a pipeline file.
public struct RunOptions: Sendable {
    public var pipelinePath: String
    public var asOf: String?
    public var output: String?
    public var threads: Int?
    /// The library that inflates `.gz` inputs; nil = the pipeline file's `inflater`.
    public var inflater: Inflater?
    /// The wall clock, in ms since the epoch (injectable for tests).
    public var now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
    /// Called once the run is published, while its memory is still held: a process that
    /// ends there (the command line) leaves the memory to the system at once, rather than
    /// freeing it piece by piece first.
    public var published: (@Sendable (RunSummary) -> Void)?

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
    public var states: StateCounts
    public var counters: ReadCounters
    /// (offerId, eligible customers) in catalog order.
    public var eligible: [(String, Int)]
    public var seconds: Double
}

/// Everything a run needs, resolved from the pipeline file and the command line.
public struct ResolvedPipeline: Sendable {
    public var config: PipelineConfig
    public var catalog: OfferCatalog
    public var asOf: Int64
    public var threads: Int
    public var inflater: Inflater = .zlib
    public var outputDirectory: String
    public var transactionFiles: [String]
    public var renewalFiles: [String]
    /// How signed inputs are verified; nil unless the format is `appstore-signed`.
    public var signed: SignedReading?

    /// Loads the pipeline file and catalog and resolves the input globs (exit 78 / 66).
    public static func resolve(_ o: RunOptions) throws -> ResolvedPipeline {
        let config = try PipelineConfig.load(path: o.pipelinePath)
        var asOf = config.asOf
        if let s = o.asOf {
            guard let v = PipelineConfig.AsOf.parse(s) else {
                throw WinBackError(.usage, "--as-of '\(s)' is not today, now, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ")
            }
            asOf = v
        }
        let catalog = try OfferCatalog.load(path: config.resolve(config.offersPath))
        let cwd = FileManager.default.currentDirectoryPath
        let out = o.output.map { InputFiles.absolute($0, base: cwd) } ?? config.resolve(config.outputDirectory)
        let threads = o.threads ?? config.threads ?? ProcessInfo.processInfo.activeProcessorCount
        let inflater = try self.inflater(asked: o.inflater, file: config.inflater, path: o.pipelinePath)
        let signed =
            config.format == SignedFormat.name
            ? try SignedReading.resolve(config.apple, folder: config.folder, now: o.now) : nil
        return ResolvedPipeline(
            config: config, catalog: catalog, asOf: asOf.resolve(now: o.now), threads: max(1, threads),
            inflater: inflater, outputDirectory: out,
            transactionFiles: try InputFiles.resolve(config.transactionPaths, base: config.folder),
            renewalFiles: try InputFiles.resolve(config.renewalInfoPaths, base: config.folder), signed: signed)
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

/// The nightly job: read → reconstruct → evaluate → write, then publish atomically.
public enum PipelineRun {
    public static func run(_ options: RunOptions, progress: Progress) throws -> RunSummary {
        let started = Date()
        let p = try ResolvedPipeline.resolve(options)
        XMLWriter.initialize()  // before any worker thread touches libxml2

        var manifest = Manifest()
        manifest.pipeline = p.config.name
        manifest.asOf = p.asOf
        manifest.started = started
        manifest.threads = p.threads
        manifest.inflater = p.inflater.rawValue
        manifest.format = p.config.format
        manifest.signed = p.signed

        let publisher = Publisher(
            root: p.outputDirectory + "/" + p.config.name, date: Timestamp.date(p.asOf))
        try publisher.begin()
        var rejectsBytes: [UInt8] = CSVRecord.header(["file", "line", "reason", "excerpt"])
        do {
            // Read.
            let totalBytes = p.transactionFiles.reduce(0) { $0 + InputFiles.size($1) }
            progress.begin("read", totalBytes: totalBytes)
            // With several threads the renewal info is read alongside the transactions.
            nonisolated(unsafe) var renewalRead: Result<RenewalRead, Error>?
            let readRenewals: @Sendable () -> Void = {
                renewalRead = Result {
                    try RenewalReader.read(paths: p.renewalFiles, inflater: p.inflater, signed: p.signed)
                }
            }
            let renewing = DispatchGroup()
            if p.threads > 1 { DispatchQueue.global().async(group: renewing, execute: readRenewals) }
            var set: TransactionSet
            do {
                defer { renewing.wait() }
                set = try TransactionReader.read(
                    paths: p.transactionFiles, format: p.config.format, products: p.config.products,
                    threads: p.threads, inflater: p.inflater, progress: { progress.advance($0) },
                    environment: p.config.environment, signed: p.signed)
            }
            if p.threads == 1 { readRenewals() }
            manifest.inputs = set.inputs
            manifest.counters = set.counters
            let renewalsRead = try renewalRead!.get()
            var renewals = set.renewals
            renewals.merge(renewalsRead.index(in: set.strings))
            let (renewalRejects, renewalStats) = (renewalsRead.rejects, renewalsRead.stats)
            manifest.renewalInputs = renewalStats
            manifest.renewalRejected = renewalRejects.count
            rejectsBytes = RejectsWriter.bytes(set.rejects + renewalRejects, relativeTo: p.config.folder)
            let c = set.counters
            manifest.stages.append(
                ("read",
                 progress.end(
                    "\(p.transactionFiles.count) files, \(Progress.mb(totalBytes)), \(c.rowsRead) rows, "
                        + "\(c.rejected) rejected, \(c.duplicates) duplicates")))
            try checkRejectBudget(c, limit: p.config.maxRejectedFraction)

            // Reconstruct and evaluate.
            progress.begin("evaluate")
            let customers = CustomerRows.build(rows: set.rows, strings: set.strings, threads: p.threads)
            let book = OfferBook(catalog: p.catalog, ids: { set.strings.lookup($0) })
            let audience = Audience.evaluate(
                customers, book: book, renewals: renewals, asOf: p.asOf, gapDays: p.config.consecutiveGapDays,
                threads: p.threads)
            manifest.states = audience.counts
            manifest.eligible = zip(p.catalog.offers, audience.eligibleCounts).map { ($0.offerId, $1) }
            let s = audience.counts
            manifest.stages.append(
                ("evaluate",
                 progress.end(
                    "\(s.customers) customers: \(s.active) active, \(s.billingRetry) in billing retry, "
                        + "\(s.churned) churned; \(audience.results.reduce(0) { $0 + ($1.eligible.isEmpty ? 0 : 1) }) eligible")))

            // Write.
            progress.begin("write")
            // Files are synced on a thread of their own while the next ones are written; all
            // of them are on disk before the run is published.
            let sync = DiskSync()
            defer { try? sync.wait() }  // no descriptor outlives a failed run
            // With several threads the reports are computed and written while the segments are
            // written: each job has a long last piece (the best-offer list, the busiest
            // customers) that the other fills in. With one thread, one after the other.
            nonisolated(unsafe) var reportFiles: Result<[OutputStats], Error>?
            let writeReports: @Sendable () -> Void = {
                reportFiles = Result {
                    let reports = Reports.compute(
                        customers: customers, audience: audience, book: book, windowMonths: p.config.windowMonths,
                        gapDays: p.config.consecutiveGapDays, threads: p.threads)
                    return try ReportWriter(reports: reports, title: p.config.name).write(to: publisher.staging, sync: sync)
                }
            }
            let reporting = DispatchGroup()
            if p.threads > 1 { DispatchQueue.global().async(group: reporting, execute: writeReports) }
            let segments = Result {
                try SegmentWriter(customers: customers, audience: audience, book: book, formats: p.config.formats)
                    .write(to: publisher.staging, threads: p.threads, sync: sync)
            }
            if p.threads > 1 { reporting.wait() } else { writeReports() }
            var outputs = try segments.get()
            outputs += try reportFiles!.get()
            outputs.append(
                try writeFile(
                    publisher.staging, "rejects.csv", rejectsBytes, rows: set.rejects.count + renewalRejects.count,
                    sync: sync))
            manifest.outputs = outputs
            manifest.stages.append(("write", progress.end("\(outputs.count) files")))
            manifest.finished = Date()
            _ = try writeFile(publisher.staging, "manifest.json", manifest.json(), rows: 0, sync: sync)
            try sync.wait()
            try publisher.publish()
            let published = publisher.root + "/" + publisher.date
            progress.note("winback: published \(published)")
            let summary = RunSummary(
                published: published, asOf: p.asOf, states: audience.counts, counters: set.counters,
                eligible: manifest.eligible, seconds: Date().timeIntervalSince(started))
            // Before the run's rows and results are released, which takes a while.
            options.published?(summary)
            return summary
        } catch {
            manifest.status = "failed"
            manifest.error = "\(error)"
            manifest.finished = Date()
            publisher.fail(keeping: [("rejects.csv", rejectsBytes), ("manifest.json", manifest.json())])
            throw error
        }
    }

    /// Fails the run (exit 65) when more rows were rejected than the pipeline allows.
    static func checkRejectBudget(_ c: ReadCounters, limit: Double) throws {
        guard c.lines > 0 else { return }
        let fraction = Double(c.rejected) / Double(c.lines)
        if fraction > limit {
            throw WinBackError(
                .badData,
                String(
                    format: "%d of %d rows rejected (%.4f%%), more than maxRejectedFraction %g allows; see rejects.csv in the .failed folder",
                    c.rejected, c.lines, fraction * 100, limit))
        }
    }

    static func writeFile(
        _ dir: String, _ name: String, _ bytes: [UInt8], rows: Int, sync: DiskSync
    ) throws -> OutputStats {
        let f = try OutputFile(path: dir + "/" + name, sync: sync)
        try f.write(bytes)
        let (n, sha) = try f.finish()
        return OutputStats(path: name, bytes: n, rows: rows, sha256: sha)
    }
}
