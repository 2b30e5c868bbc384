import Foundation
import WinBackDelivery
import WinBackHistory
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The run's lock (docs/rules.md §6.1) once the run holds it: the one owner that releases it,
/// once, after the last step that needs it (or when the run fails).
final class RunLock {
    private let publisher: Publisher
    private var held = true

    /// Takes over the lock of `publisher`, begun.
    init(_ publisher: Publisher) { self.publisher = publisher }

    /// Releases the lock; later calls do nothing.
    func release() {
        guard held else { return }
        held = false
        publisher.unlock()
    }

    deinit { release() }
}

/// A run just published: what the steps after the publish work from.
struct PublishedFolder {
    /// `<output>/<name>/<YYYY-MM-DD>`.
    var folder: String
    /// The as-of date, `YYYY-MM-DD`.
    var date: String
    /// The manifest as it was published.
    var manifest: Manifest
    /// The segment lists the run published, as it holds them (nil: none, as when the run writes
    /// no CSV): the steps after the publish never read the published files back.
    var lists: SegmentSource? = nil
}

/// One step after a run is published, in the order a run lists them (``steps(_:state:progress:)``):
/// the incremental state swapped in (docs/rules.md §12), the upload (§11), the metrics file
/// (§10.3). A step that fails leaves the local publish as it is and fails the run (its exit
/// code says why); the steps after it are not taken.
struct AfterPublish {
    /// What the step does, for the reader of the code and its tests.
    var name: String
    /// Taken under the run's lock: no other run replaces the folder or the state meanwhile.
    var underLock: Bool
    var run: (PublishedFolder) throws -> Void

    /// The next incremental state replaces the previous one (never throws: a state that cannot
    /// be swapped is reported and the previous one kept).
    static func swapState(_ swap: @escaping () -> Void) -> AfterPublish {
        AfterPublish(name: "state", underLock: true) { _ in swap() }
    }

    /// `output.upload`: the published folder copied to S3, under the lock so that no other run
    /// replaces the folder while it is read.
    static func upload(_ p: ResolvedPipeline, progress: Progress) -> AfterPublish? {
        guard let upload = p.config.upload else { return nil }
        return AfterPublish(name: "upload", underLock: true) { published in
            try Upload.run(
                folder: published.folder, to: upload, name: p.config.name, date: published.date, threads: p.threads,
                progress: progress)
        }
    }

    /// `output.metrics`: the run's series, once the lock is released.
    static func metrics(_ p: ResolvedPipeline, progress: Progress) -> AfterPublish? {
        guard let metrics = p.config.metricsPath else { return nil }
        return AfterPublish(name: "metrics", underLock: false) { published in
            var run = MetricsFile.run(published.manifest, exitCode: 0, counted: true)
            // The tables of output.postgres were written (a step before this one).
            if p.config.postgres != nil { run.postgresBehind = false }
            MetricsFile.write(run, to: p.config.resolve(metrics), group: p.config.outputGroup, progress: progress)
        }
    }

    /// The steps after a run of `p` publishes, in order: the state swap (when `swapState` is
    /// given), the audience table (`output.postgres`: before the upload, so a failed upload
    /// never leaves the table behind unsaid), the upload, the pruning of old runs (`output.keep`, after the upload so the
    /// bucket never loses a date before tonight's is there), the metrics file.
    static func steps(_ p: ResolvedPipeline, swapState: (() -> Void)?, progress: Progress) -> [AfterPublish] {
        [
            swapState.map { self.swapState($0) }, postgres(p, progress: progress), upload(p, progress: progress),
            prune(p, progress: progress),
            metrics(p, progress: progress),
        ].compactMap { $0 }
    }

    /// Takes `steps` in order, `lock` released right after the last one that needs it (at once
    /// when none does), or when a step fails.
    static func run(_ steps: [AfterPublish], _ published: PublishedFolder, lock: RunLock) throws {
        defer { lock.release() }
        let last = steps.lastIndex { $0.underLock }
        if last == nil { lock.release() }
        for (i, step) in steps.enumerated() {
            try step.run(published)
            if i == last { lock.release() }
        }
    }
}

/// A run's memory (its rows and results), alive as long as this value is: a process that ends
/// while it still holds it (the command line) leaves the memory to the system at once, rather
/// than freeing millions of objects piece by piece first.
public final class RunMemory {
    private let held: Any

    init(_ held: Any) { self.held = held }
}

/// A published run: its summary, and its memory (``RunMemory``).
public struct PublishedRun {
    public var summary: RunSummary
    public var memory: RunMemory
}

extension Stage {
    /// A run's files staged and published (docs/rules.md §4, §6), then the steps after the
    /// publish: the one sequence of every composition that publishes (``PipelineRun``,
    /// ``Merge``).
    ///
    /// Begins `publisher` (unless given one already begun), then `stages` writes the run's files
    /// into its staging folder, each handed to the sync, records in the manifest what it read,
    /// counted and wrote, and keeps the rejected lines in `rejects`. Then the manifest is
    /// written, every file waited for and the folder published, and `after` taken in order
    /// (``AfterPublish``), the lock held (by its one owner, ``RunLock``) until the last that
    /// needs it. On any error before the publish, the staging folder is removed, the rejects and
    /// the manifest saying why are kept in the failed folder, and the error is thrown again.
    ///
    /// - Parameters:
    ///   - started: when the run started, for the manifest and the summary.
    ///   - publisher: a publisher already begun (a memory-bounded run holds the lock
    ///     throughout); nil begins `p`'s own.
    ///   - after: the steps after the publish (``AfterPublish/steps(_:swapState:progress:)``).
    /// - Returns: the run's summary, and what `stages` returned kept alive (``RunMemory``).
    static func publishing<Held>(
        _ p: ResolvedPipeline, started: Date, publisher given: Publisher? = nil, progress: Progress,
        after steps: [AfterPublish],
        _ stages: (
            _ manifest: inout Manifest, _ rejects: inout RejectList, _ lists: inout SegmentSource?, _ staging: String,
            _ sync: DiskSync
        ) throws -> Held
    ) throws -> PublishedRun {
        var manifest = Manifest(p, started: started)
        let publisher = given ?? p.publisher()
        if given == nil { try publisher.begin() }
        let lock = RunLock(publisher)
        defer { lock.release() }
        var rejects = RejectList(limit: p.config.maxRejectsListed)
        // The segment lists as the stages hold them, for the steps after the publish.
        var lists: SegmentSource?
        let held: Held
        let folder: String
        do {
            // Files are synced on a thread of their own while the next ones are written.
            let sync = DiskSync(group: publisher.groupID)
            defer { try? sync.wait() }  // no descriptor outlives a failed run
            held = try stages(&manifest, &rejects, &lists, publisher.staging, sync)
            manifest.finished = Date()
            // What `output.keep` removes once published, listed in the manifest (docs/rules.md §10.6).
            manifest.pruned = Pruning.plan(
                root: publisher.root, date: publisher.date, keep: p.config.keep,
                baseline: try manifest.changes.map { $0.baseline?.date } ?? Changes.baseline(p)?.date)
            folder = try publish(manifest, with: publisher, sync: sync)
        } catch {
            manifest.failed(error, rejects: rejects, folder: p.config.folder, publisher: publisher)
            throw error
        }
        if let changes = manifest.changes {
            // What changed since the last published run, in one line (docs/rules.md §10.5).
            progress.event("changes", changes.line, fields: changes.fields)
        }
        progress.event("published", "published \(folder)", fields: ["folder": folder])
        try AfterPublish.run(
            steps, PublishedFolder(folder: folder, date: publisher.date, manifest: manifest, lists: lists), lock: lock)
        let summary = RunSummary(
            published: folder, asOf: p.asOf, states: manifest.states, counters: manifest.counters,
            eligible: manifest.eligible, seconds: Date().timeIntervalSince(started))
        return PublishedRun(summary: summary, memory: RunMemory(held))
    }

    /// Writes the manifest, waits until every file is on disk, then publishes the staging folder
    /// atomically (docs/rules.md §4), the lock still held (its owner, ``RunLock``, releases it).
    /// Returns the published folder.
    static func publish(_ manifest: Manifest, with publisher: Publisher, sync: DiskSync) throws -> String {
        _ = try writeFile(publisher.staging, "manifest.json", manifest.json(), rows: 0, sync: sync)
        try sync.wait()
        try publisher.publish(keepingLock: true)
        return publisher.root + "/" + publisher.date
    }
}

extension AfterPublish {
    /// `output.keep`: the runs the manifest lists as pruned removed locally, then, with
    /// `output.upload`, from the prefix (docs/rules.md §10.6), under the lock.
    static func prune(_ p: ResolvedPipeline, progress: Progress) -> AfterPublish? {
        guard p.config.keep > 0 else { return nil }
        return AfterPublish(name: "prune", underLock: true) { published in
            guard let plan = published.manifest.pruned else { return }
            Pruning.removeLocal(
                plan, root: (published.folder as NSString).deletingLastPathComponent, progress: progress)
            var remote: [String] = []
            if let upload = p.config.upload {
                // A planning run (an as-of ahead of the clock) never retries the prefix's removals.
                let planning = p.asOf > Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000
                remote = try Pruning.removeRemote(plan, from: upload, name: p.config.name, retry: !planning)
            }
            let retried = remote.filter { !plan.dates.contains($0) }
            progress.event(
                "pruned",
                Pruning.line(plan)
                    + (retried.isEmpty ? "" : "; from the upload prefix also " + retried.joined(separator: ", ")),
                fields: [
                    "dates": plan.dates, "failed": plan.failed, "keepDays": plan.keepDays, "remoteRetried": retried,
                ])
        }
    }
}
