import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackS3
@testable import WinBackSupport
@testable import WinBackWrite

/// The steps after a publish (docs/rules.md §6.2): in order, the run's lock held through the
/// last step that needs it and released once, a failing step ending the list.
@Suite("Steps after a publish and the run's lock")
struct AfterPublishTests {
    struct Failed: Error {}

    /// A publisher begun (its lock held) in a fresh folder.
    static func begun() throws -> Publisher {
        let root = Paths.temporary() + "/pipeline"
        let publisher = Publisher(root: root, date: "2026-11-22")
        try publisher.begin()
        return publisher
    }

    /// Whether some descriptor holds `publisher`'s lock: another descriptor cannot take it, tried
    /// for a quarter of a second (a process another test spawns holds a copy of every descriptor
    /// from its fork to its exec, the lock's among them).
    static func isLocked(_ publisher: Publisher) throws -> Bool {
        let fd = try System.openOrCreate(publisher.root + "/.lock")
        defer { System.closeQuietly(fd) }
        for _ in 0..<50 {
            if try System.tryLock(fd) { return false }
            usleep(5_000)
        }
        return true
    }

    static var published: PublishedFolder { PublishedFolder(folder: "", date: "2026-11-22", manifest: Manifest()) }

    /// Steps named `names`, each recording its name and whether the lock was held as it ran.
    static func steps(
        _ names: [(String, underLock: Bool)], publisher: Publisher, failing: String? = nil,
        log: Log
    ) -> [AfterPublish] {
        names.map { name, underLock in
            AfterPublish(name: name, underLock: underLock) { _ in
                log.entries.append((name, try isLocked(publisher)))
                if name == failing { throw Failed() }
            }
        }
    }

    final class Log { var entries: [(String, Bool)] = [] }

    @Test("the steps run in order, under the lock until the last that needs it, then without it")
    func order() throws {
        let publisher = try Self.begun()
        let lock = RunLock(publisher)
        let log = Log()
        let steps = Self.steps(
            [("state", true), ("upload", true), ("metrics", false), ("more", false)], publisher: publisher, log: log)
        try AfterPublish.run(steps, Self.published, lock: lock)
        #expect(log.entries.map(\.0) == ["state", "upload", "metrics", "more"])
        #expect(log.entries.map(\.1) == [true, true, false, false])
        #expect(try !Self.isLocked(publisher))
    }

    @Test("a step that needs the lock after one that does not keeps it held until then")
    func lockedAfterUnlocked() throws {
        let publisher = try Self.begun()
        let log = Log()
        let steps = Self.steps([("a", false), ("b", true), ("c", false)], publisher: publisher, log: log)
        try AfterPublish.run(steps, Self.published, lock: RunLock(publisher))
        #expect(log.entries.map(\.1) == [true, true, false])
    }

    @Test("with no step that needs it, the lock is released before the first step")
    func noLockedStep() throws {
        let publisher = try Self.begun()
        let log = Log()
        try AfterPublish.run(
            Self.steps([("metrics", false)], publisher: publisher, log: log), Self.published,
            lock: RunLock(publisher))
        #expect(log.entries.map(\.1) == [false])
        try AfterPublish.run([], Self.published, lock: RunLock(try Self.begun()))
    }

    @Test("a failing step ends the list: the steps after it are not taken, the lock is released, the error thrown")
    func failingStep() throws {
        let publisher = try Self.begun()
        let log = Log()
        let steps = Self.steps(
            [("state", true), ("upload", true), ("metrics", false)], publisher: publisher, failing: "upload", log: log)
        #expect(throws: Failed.self) { try AfterPublish.run(steps, Self.published, lock: RunLock(publisher)) }
        #expect(log.entries.map(\.0) == ["state", "upload"])
        #expect(try !Self.isLocked(publisher))
    }

    @Test("the lock's owner releases it once: a second release leaves a lock taken since alone")
    func releasedOnce() throws {
        let publisher = try Self.begun()
        let lock = RunLock(publisher)
        lock.release()
        #expect(try !Self.isLocked(publisher))
        // Another run takes the lock; a second release by the first run's owner does not free it.
        let next = Publisher(root: publisher.root, date: publisher.date)
        try next.begin()
        lock.release()
        #expect(try Self.isLocked(next))
        next.unlock()
    }

    @Test(
        "the steps of a run in order: the state swap, the upload, pruning, the metrics file, each only when configured")
    func stepsOfARun() throws {
        let folder = Paths.temporary()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var config = PipelineConfig(path: folder + "/pipeline.yaml", folder: folder, name: "nightly")
        let progress = Progress(mode: .quiet)
        let p = ResolvedPipeline(
            config: config, catalog: OfferCatalog(offers: []), asOf: 0, threads: 1, outputDirectory: folder,
            transactionFiles: [], renewalFiles: [])
        // Pruning is on by default (output.keep 35 days); keep 0 takes it away.
        #expect(AfterPublish.steps(p, swapState: nil, progress: progress).map(\.name) == ["prune"])
        var kept = p
        kept.config.keep = 0
        #expect(AfterPublish.steps(kept, swapState: nil, progress: progress).map(\.name) == [])
        config.metricsPath = "metrics.prom"
        config.upload = S3Location(bucket: "b", key: "k")
        var q = p
        q.config = config
        let steps = AfterPublish.steps(q, swapState: {}, progress: progress)
        #expect(steps.map(\.name) == ["state", "upload", "prune", "metrics"])
        #expect(steps.map(\.underLock) == [true, true, true, false])
    }
}
