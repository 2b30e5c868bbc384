import Foundation
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackWrite

/// The stages of the pipeline, each a function from a typed input to a typed output:
///
///     ResolvedPipeline ─read→ Inputs ─group→ CustomerRows ─evaluate→ Audience ─report→ Reports
///                                                                       └─write→ [OutputStats] ─publish→ folder
///
/// The renewal info read with the inputs goes to `evaluate` (state at T, Apple's marks on the
/// segments) and to `report` (the agreement with Apple, docs/rules.md §4.5).
///
/// `winback run` (``PipelineRun``), `winback explain` (``Explainer``) and the benchmark's child
/// runs compose these functions; none of them wires readers, groupers or evaluators by hand.
/// Where threads are spent is said in docs/architecture.md.
public enum Stage {}

/// What the read stage gives: the run's deduplicated rows and the renewal info, joined in one
/// string table.
public struct Inputs: Sendable {
    public var transactions: TransactionSet
    public var renewals: RenewalIndex
    public var renewalStats: [InputStats]
    public var renewalRejects: RejectList

    /// The run's string table (ids of every row and renewal info).
    public var strings: StringTable { transactions.strings }
    /// Every rejected line (those listed sorted by file, then line), and how many in all.
    public var rejects: RejectList {
        var all = transactions.rejects
        all.merge(renewalRejects)
        all.normalize()
        return all
    }
}

extension Stage {
    /// Reads every transaction file and renewal-info file of the pipeline (docs/rules.md §2, §3
    /// rule 1). With several threads the renewal info is read alongside the transactions.
    ///
    /// - Parameters:
    ///   - only: keep only the rows of customers with one of these originalTransactionIds or
    ///     appAccountTokens (`explain`); nil keeps every row.
    ///   - progress: compressed bytes consumed since the last call, from any thread.
    public static func read(
        _ p: ResolvedPipeline, only: [String]? = nil, progress: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws -> Inputs {
        try read(p, only: only, state: nil, progress: progress)
    }

    /// ``read(_:only:progress:)`` of an incremental run (docs/rules.md §12): the files the state
    /// absorbed are not read, their rows and counts come from it.
    static func read(
        _ p: ResolvedPipeline, only: [String]? = nil, state: IncrementalState? = nil,
        progress: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws -> Inputs {
        let renewalRead = ResultSlots<Result<RenewalRead, Error>>(count: 1)
        let readRenewals: @Sendable () -> Void = {
            renewalRead[0] = Result {
                try RenewalReader.read(
                    paths: p.renewalFiles, inflater: p.inflater, signed: p.signed, limits: p.limits)
            }
        }
        let renewing = DispatchGroup()
        if p.threads > 1 { DispatchQueue.global().async(group: renewing, execute: readRenewals) }
        let set: TransactionSet
        do {
            defer { renewing.wait() }
            set = try TransactionReader.read(
                paths: p.transactionFiles, format: p.config.format, products: p.config.products, threads: p.threads,
                inflater: p.inflater, only: only, progress: progress, environment: p.config.environment,
                signed: p.signed, limits: p.limits, state: state)
        }
        if p.threads == 1 { readRenewals() }
        let renewals = try renewalRead[0]!.get()
        // Renewal info found among signed transactions, then that of the renewal-info files.
        var index = set.renewals
        index.merge(renewals.index(in: set.strings))
        return Inputs(
            transactions: set, renewals: index, renewalStats: renewals.stats, renewalRejects: renewals.rejects)
    }

    /// The read stage of a run, with its progress: with a state keeper (an incremental run,
    /// docs/rules.md §12) only the files its state did not absorb are read, and the next state
    /// is written as the rows are merged; a state found damaged while it is read is given up,
    /// said in the log, and every file read. Returns the inputs and the bytes of the files read.
    static func read(_ p: ResolvedPipeline, keeper: StateKeeper?, progress: Progress) throws -> (Inputs, Int) {
        func attempt() throws -> (Inputs, Int) {
            let state = try keeper?.forRead(progress: { progress.advance($0) })
            let reading = p.transactionFiles.indices.filter { !(state?.absorbed.contains($0) ?? false) }
            let totalBytes = reading.reduce(0) { $0 + InputFiles.size(p.transactionFiles[$1]) }
            // The progress counts the state's bytes too, as its pieces are read.
            progress.begin("read", totalBytes: totalBytes + (keeper?.stateBytes ?? 0))
            let inputs = try read(p, state: state, progress: { progress.advance($0) })
            try keeper?.finish(inputs.transactions)
            return (inputs, totalBytes)
        }
        do {
            return try attempt()
        } catch let damaged as StateDamaged {
            guard let keeper else { throw damaged }
            let why = "the state is damaged (\(damaged.why))"
            progress.warn("state_rebuilt", "incremental state rebuilt: \(why)", fields: ["path": keeper.folder])
            keeper.rebuild(why)
            return try attempt()
        }
    }

    /// Fails the run (exit 65) when more lines were rejected than the pipeline allows
    /// (docs/rules.md §6): the fraction is of lines, a signed line of several transactions
    /// counting once (§2.6).
    public static func checkRejectBudget(_ c: ReadCounters, limit: Double) throws {
        guard c.lines > 0 else { return }
        let fraction = Double(c.rejected) / Double(c.lines)
        if fraction > limit {
            throw WinBackError(
                .badData,
                String(
                    format: "%d of %d rows rejected (%.4f%%), more than maxRejectedFraction %g allows; "
                        + "see rejects.csv in the .failed folder",
                    c.rejected, c.lines, fraction * 100, limit))
        }
    }

    /// Groups the rows by customer (docs/rules.md §3 rule 2), each customer's rows in order.
    public static func group(_ inputs: Inputs, threads: Int) -> CustomerRows {
        CustomerRows.build(rows: inputs.transactions.rows, strings: inputs.strings, threads: threads)
    }

    /// The catalog compiled against the run's string table.
    public static func offers(_ p: ResolvedPipeline, strings: StringTable) -> OfferBook {
        OfferBook(catalog: p.catalog, ids: { strings.lookup($0) })
    }

    /// Reconstructs every customer and evaluates every offer at the pipeline's as-of instant
    /// (docs/rules.md §3).
    public static func evaluate(
        _ customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, _ p: ResolvedPipeline
    ) -> Audience {
        Audience.evaluate(
            customers, book: book, renewals: renewals, asOf: p.asOf, gapDays: p.config.consecutiveGapDays,
            experiment: p.config.experiment, threads: p.threads)
    }

    /// Computes the reports (docs/rules.md §4.3, §4.5) from the customers, their evaluation and
    /// the renewal info (for the agreement with Apple).
    public static func report(
        _ customers: CustomerRows, audience: Audience, book: OfferBook, renewals: RenewalIndex?, _ p: ResolvedPipeline
    ) -> Reports {
        Reports.compute(
            customers: customers, audience: audience, book: book, windowMonths: p.config.windowMonths,
            gapDays: p.config.consecutiveGapDays, retentionMonths: p.config.retentionMonths, renewals: renewals,
            threads: p.threads)
    }

    /// Writes segments, reports and rejects into `directory` (docs/rules.md §4), every file
    /// handed to `sync`.
    ///
    /// With several threads the report stage runs, and its files are written, while the segments
    /// are written: each job has a long last piece (the best-offer list, the busiest customers)
    /// that the other fills in. With one thread, one after the other.
    ///
    /// Then the destinations' files from the segments (docs/rules.md §10.2), recorded in
    /// `manifest`; their identities' rejected rows join `rejects`, written last.
    static func write(
        _ customers: CustomerRows, audience: Audience, book: OfferBook, renewals: RenewalIndex?,
        rejects: inout RejectList, manifest: inout Manifest, _ p: ResolvedPipeline, to directory: String,
        sync: DiskSync
    ) throws -> [OutputStats] {
        let reportFiles = ResultSlots<Result<[OutputStats], Error>>(count: 1)
        let writeReports: @Sendable () -> Void = {
            reportFiles[0] = Result {
                let reports = report(customers, audience: audience, book: book, renewals: renewals, p)
                return try ReportWriter(reports: reports, title: p.config.name).write(to: directory, sync: sync)
            }
        }
        let reporting = DispatchGroup()
        if p.threads > 1 { DispatchQueue.global().async(group: reporting, execute: writeReports) }
        let segments = Result {
            try SegmentWriter(
                customers: customers, audience: audience, book: book, formats: p.config.formats,
                requireApple: p.config.requireApple
            ).write(to: directory, threads: p.threads, sync: sync)
        }
        if p.threads > 1 { reporting.wait() } else { writeReports() }
        var outputs = try segments.get()
        outputs += try reportFiles[0]!.get()
        let delivered = try writeDestinations(p, to: directory, rejects: &rejects, sync: sync)
        manifest.record(delivered)
        outputs += delivered.outputs
        outputs.append(try writeRejects(rejects, p, to: directory, sync: sync))
        return outputs
    }

    /// `rejects.csv` (docs/rules.md §6.1): the listed rejects, and a row counting the rest.
    static func writeRejects(
        _ rejects: RejectList, _ p: ResolvedPipeline, to directory: String, sync: DiskSync
    ) throws -> OutputStats {
        try writeFile(
            directory, "rejects.csv", RejectsWriter.bytes(rejects, relativeTo: p.config.folder),
            rows: rejects.count + (rejects.omitted > 0 ? 1 : 0), sync: sync)
    }

    /// A run's files staged and published (docs/rules.md §4, §6): the one sequence of every
    /// composition that publishes (``PipelineRun``, ``Merge``).
    ///
    /// Begins `publisher` (unless given one already begun), then `stages` writes the run's files
    /// into its staging folder, each handed to the sync, records in the manifest what it read,
    /// counted and wrote, and keeps the rejected lines in `rejects`. Then the manifest is
    /// written, every file waited for and the folder published. On any error the staging folder
    /// is removed, the rejects and the manifest saying why are kept in the failed folder, and
    /// the error is thrown again.
    ///
    /// - Parameters:
    ///   - started: when the run started, for the manifest and the summary.
    ///   - publisher: a publisher already begun (a memory-bounded run holds the lock
    ///     throughout); nil begins `p`'s own.
    ///   - published: called with the summary once the run is published, while what `stages`
    ///     returned is still held: a process that ends there (the command line) leaves the
    ///     run's rows and results to the system rather than freeing them piece by piece first.
    /// - Returns: the run's summary, as `published` got it.
    static func publishing<Held>(
        _ p: ResolvedPipeline, started: Date, publisher given: Publisher? = nil, progress: Progress,
        published: ((RunSummary) -> Void)? = nil, afterPublish: (() -> Void)? = nil,
        _ stages: (_ manifest: inout Manifest, _ rejects: inout RejectList, _ staging: String, _ sync: DiskSync)
            throws -> Held
    ) throws -> RunSummary {
        var manifest = Manifest(p, started: started)
        let publisher = given ?? p.publisher()
        if given == nil { try publisher.begin() }
        var rejects = RejectList(limit: p.config.maxRejectsListed)
        let held: Held
        let folder: String
        do {
            // Files are synced on a thread of their own while the next ones are written.
            let sync = DiskSync()
            defer { try? sync.wait() }  // no descriptor outlives a failed run
            held = try stages(&manifest, &rejects, publisher.staging, sync)
            manifest.finished = Date()
            folder = try publish(
                manifest, with: publisher, sync: sync, keepingLock: p.config.upload != nil || afterPublish != nil)
        } catch {
            manifest.failed(error, rejects: rejects, folder: p.config.folder, publisher: publisher)
            throw error
        }
        progress.event("published", "published \(folder)", fields: ["folder": folder])
        // Still under the lock: an incremental run's next state replaces the previous one.
        afterPublish?()
        if p.config.upload == nil { publisher.unlock() }
        // Published: an upload that fails from here leaves the local publish as it is
        // (docs/rules.md §11), and the run's exit code says why.
        if let upload = p.config.upload {
            // Under the run's lock: no other run replaces the folder while it is read.
            defer { publisher.unlock() }
            try Upload.run(
                folder: folder, to: upload, name: p.config.name, date: publisher.date, threads: p.threads,
                progress: progress)
        }
        if let metrics = p.config.metricsPath {
            MetricsFile.write(
                MetricsFile.run(manifest, exitCode: 0, counted: true), to: p.config.resolve(metrics),
                group: p.config.outputGroup, progress: progress)
        }
        let summary = RunSummary(
            published: folder, asOf: p.asOf, states: manifest.states, counters: manifest.counters,
            eligible: manifest.eligible, seconds: Date().timeIntervalSince(started))
        withExtendedLifetime(held) { published?(summary) }
        return summary
    }

    /// Writes the manifest, waits until every file is on disk, then publishes the staging folder
    /// atomically (docs/rules.md §4). Returns the published folder.
    static func publish(
        _ manifest: Manifest, with publisher: Publisher, sync: DiskSync, keepingLock: Bool = false
    ) throws -> String {
        _ = try writeFile(publisher.staging, "manifest.json", manifest.json(), rows: 0, sync: sync)
        try sync.wait()
        try publisher.publish(keepingLock: keepingLock)
        return publisher.root + "/" + publisher.date
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
