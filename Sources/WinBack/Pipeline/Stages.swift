import Foundation
import WinBackDelivery
import WinBackHistory
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
    /// Compressed bytes of the transaction files read (not those whose rows came from a state).
    public var bytesRead = 0

    /// Every rejected line (those listed sorted by file, then line), and how many in all.
    public var rejects: RejectList {
        var all = transactions.rejects
        all.merge(renewalRejects)
        all.normalize()
        return all
    }
}

/// What the read stage is asked for besides the pipeline's files.
public struct ReadOptions {
    /// Keep only the rows of customers with one of these originalTransactionIds or
    /// appAccountTokens (`explain`); nil keeps every row.
    public var only: [String]?
    /// An incremental run's state (docs/rules.md §12): the files it absorbed are not read,
    /// their rows and counts come from it, and the next state is written as the rows are merged.
    var state: InMemoryStateKeeper?

    public init(only: [String]? = nil) { self.only = only }

    /// Only the rows of customers with one of `ids`.
    public static func only(_ ids: [String]) -> ReadOptions { ReadOptions(only: ids) }

    /// Every row, with the state `keeper` keeps (nil: none).
    static func incremental(_ keeper: InMemoryStateKeeper?) -> ReadOptions {
        var o = ReadOptions()
        o.state = keeper
        return o
    }
}

extension Stage {
    /// The read stage: reads every transaction file and renewal-info file of the pipeline
    /// (docs/rules.md §2, §3 rule 1). With several threads the renewal info is read by one of
    /// the threads reading the transactions, first.
    ///
    /// With a state (``ReadOptions/incremental(_:)``, docs/rules.md §12) only the files its
    /// state did not absorb are read, and the next state is written as the rows are merged; a
    /// state found damaged while it is read is given up, said in the log, and every file read.
    ///
    /// - Parameters:
    ///   - progress: the run's progress, its "read" stage begun here with the bytes to read (the
    ///     state's pieces counted too, as they are read); nil shows none (`explain`).
    /// - Returns: the inputs; their ``Inputs/bytesRead`` are the transaction files' read.
    public static func read(
        _ p: ResolvedPipeline, _ options: ReadOptions = ReadOptions(), progress: Progress? = nil
    ) throws -> Inputs {
        let advance: @Sendable (Int) -> Void
        if let progress { advance = { progress.advance($0) } } else { advance = { _ in } }
        let keeper = options.state
        return try StateFolder.rebuildingIfDamaged(keeper?.state, progress: progress ?? Progress(mode: .quiet)) { _ in
            let state = try keeper?.forRead(progress: advance)
            let reading = p.transactionFiles.indices.filter { !(state?.absorbed.contains($0) ?? false) }
            let totalBytes = reading.reduce(0) { $0 + p.transactionInput($1).identity.size }
            progress?.begin("read", totalBytes: totalBytes + (keeper?.stateBytes ?? 0))
            var inputs = try readFiles(p, only: options.only, state: state, progress: advance)
            // A table's rows have no size before they are read: theirs as read (docs/rules.md §14.1).
            let tables = Set(reading.map(p.transactionInput).filter(\.identity.isRows).map(\.path))
            inputs.bytesRead =
                totalBytes + inputs.transactions.inputs.filter { tables.contains($0.path) }.reduce(0) { $0 + $1.bytes }
            try keeper?.finish(inputs.transactions)
            return inputs
        }
    }

    /// The files of the read stage, and the rows and counts `state` holds of those it absorbed.
    private static func readFiles(
        _ p: ResolvedPipeline, only: [String]?, state: IncrementalState?, progress: @escaping @Sendable (Int) -> Void
    ) throws -> Inputs {
        let renewalRead = ResultSlots<Result<RenewalRead, Error>>(count: 1)
        let readRenewals: @Sendable () -> Void = {
            renewalRead[0] = Result {
                try RenewalReader.read(
                    paths: p.renewalFiles, inflater: p.inflater, signed: p.signed, limits: p.limits)
            }
        }
        // Not on a thread of its own: three threads on two cores shared one of them for a while
        // after the renewal info was read (docs/performance.md).
        let set = try TransactionReader.read(
            inputs: p.inputs, format: p.config.format, products: p.config.products, threads: p.threads,
            inflater: p.inflater, only: only, progress: progress, environment: p.config.environment,
            signed: p.signed, limits: p.limits, state: state, beside: p.threads > 1 ? readRenewals : nil)
        if p.threads == 1 { readRenewals() }
        let renewals = try renewalRead[0]!.get()
        // Renewal info found among signed transactions, then that of the renewal-info files.
        var index = set.renewals
        index.merge(renewals.index(in: set.strings))
        return Inputs(
            transactions: set, renewals: index, renewalStats: renewals.stats, renewalRejects: renewals.rejects)
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
    /// (docs/rules.md §3), and counts the reports (§4.3, §4.5) in the same pass over the
    /// customers, with the renewal info (for the agreement with Apple); their rows are made
    /// by ``CountedReports/reports()``. The customers' rows are handed back to the system as
    /// they are evaluated: nothing after this stage reads them (the exit reasons ask the
    /// audience's ``LatestWinBacks``).
    public static func evaluate(
        _ customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, _ p: ResolvedPipeline
    ) -> (audience: Audience, counted: CountedReports) {
        Reports.count(
            customers, book: book, renewals: renewals, asOf: p.asOf, experiment: p.config.experiment,
            settings: Reports.Settings(
                windowMonths: p.config.windowMonths, gapDays: p.config.consecutiveGapDays,
                retentionMonths: p.config.retentionMonths, rates: p.rates,
                horizonMonths: p.config.money?.horizonMonths ?? 3),
            threads: p.threads, releasingRows: true)
    }

    /// Writes a run's files into `directory` from its customers and their evaluation (docs/rules.md
    /// §4), every file handed to `sync`, through the output steps every composition shares
    /// (``writeOutputs(_:_:baseline:rejects:manifest:to:sync:)``); returns the files and the
    /// segment lists, for the steps after the publish.
    ///
    /// With several threads the reports' rows are made and their files written while the
    /// segments are written, and then the segment changes. With one thread, one after the other.
    static func write(
        _ customers: CustomerRows, audience: Audience, reports counted: CountedReports, book: OfferBook,
        rejects: inout RejectList, manifest: inout Manifest, _ p: ResolvedPipeline, to directory: String,
        sync: DiskSync
    ) throws -> (outputs: [OutputStats], lists: SegmentSource) {
        // The segment lists, written, then handed in memory to the changes and the destinations.
        let lists = SegmentWriter(
            customers: customers, audience: audience, book: book, formats: p.config.formats,
            requireApple: p.config.requireApple, threads: p.threads)
        let steps = OutputSteps(
            lists: lists, segments: { try lists.write(to: directory, threads: p.threads, sync: sync) },
            changes: { baseline in
                try Changes.write(
                    p, tonight: lists, baseline: baseline,
                    reasoner: {
                        ExitReasoner(
                            customers: customers, audience: audience, book: book,
                            requireApple: p.config.requireApple, baselineAsOf: $0.asOf)
                    }, to: directory, sync: sync)
            },
            reports: {
                let reports = counted.reports()
                return (
                    reports,
                    try ReportWriter(reports: reports, title: p.config.name).write(
                        to: directory, sync: sync, page: false)
                )
            }, reportsBeside: p.threads > 1)
        let outputs = try writeOutputs(
            p, steps, baseline: try Changes.baseline(p), rejects: &rejects, manifest: &manifest, to: directory,
            sync: sync)
        return (outputs, lists)
    }

    /// The output steps of every composition that publishes (a run in memory, a merge), in their
    /// one order: the segments, their changes since `baseline` (docs/rules.md §10.5), the report
    /// files, the destinations' files (§10.2), report.html (whose first screen counts the
    /// others, listed after the other report files) and rejects.csv, last, with the identities'
    /// rejected rows. What each step counted goes in `manifest`; returns the files in the
    /// manifest's order.
    static func writeOutputs(
        _ p: ResolvedPipeline, _ steps: OutputSteps, baseline: Baseline?, rejects: inout RejectList,
        manifest: inout Manifest, to directory: String, sync: DiskSync
    ) throws -> [OutputStats] {
        let report = steps.reports
        let beside = steps.reportsBeside ? Ahead(report) : nil
        let segments = Result { try steps.segments() }
        // What changed since the last published run: while the reports are still being counted.
        let changed = Result {
            _ = try segments.get()
            steps.between()
            return try steps.changes(baseline)
        }
        // Waited for beside, or written now, whatever the segments and changes did.
        let reportFiles = Result { try beside?.get() ?? report() }
        var outputs = try segments.get()
        let changes = try changed.get()
        manifest.changes = changes.summary
        outputs += changes.outputs
        let (reports, reportOutputs) = try reportFiles.get()
        manifest.record(amountsOf: reports)
        outputs += reportOutputs
        let page = outputs.count
        steps.between()
        let delivered = try Delivery.writeDestinations(
            p, tonight: steps.lists, baseline: baseline, to: directory, rejects: &rejects, sync: sync,
            bounds: steps.bounds)
        manifest.record(delivered)
        outputs += delivered.outputs
        steps.between()
        try writePage(reports, p, manifest: manifest, outputs: &outputs, at: page, to: directory, sync: sync)
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

    static func writeFile(
        _ dir: String, _ name: String, _ bytes: [UInt8], rows: Int, sync: DiskSync
    ) throws -> OutputStats {
        let f = try OutputFile(path: dir + "/" + name, sync: sync)
        try f.write(bytes)
        let (n, sha) = try f.finish()
        return OutputStats(path: name, bytes: n, rows: rows, sha256: sha)
    }
}

/// How a composition takes each of the output steps ``Stage/writeOutputs(_:_:baseline:rejects:manifest:to:sync:)``
/// orders: a run in memory from its evaluation, a merge from its shards' files.
struct OutputSteps {
    /// Tonight's segment lists, for the changes and the destinations.
    var lists: SegmentSource
    /// Writes the segment files.
    var segments: () throws -> [OutputStats]
    /// Writes the changes against a baseline (nil: none).
    var changes: (Baseline?) throws -> (outputs: [OutputStats], summary: ChangesSummary)
    /// The reports, and their files but report.html.
    var reports: @Sendable () throws -> (Reports, [OutputStats])
    /// Whether the reports' rows are made and their files written beside the segments and changes
    /// (a run with threads).
    var reportsBeside: Bool
    /// Where a memory-bounded run joins the identities (nil: in memory).
    var bounds: IdentityJoin.Bounds? = nil
    /// Taken between steps: a memory-bounded run lets go of what the last one no longer needs.
    var between: () -> Void = {}
}
