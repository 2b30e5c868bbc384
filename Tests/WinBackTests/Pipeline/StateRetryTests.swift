import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackIncremental
@testable import WinBackModel
@testable import WinBackSupport

/// The one retry after a damaged incremental state (docs/rules.md §12), which a run in memory
/// and a memory-bounded run share, and validate's preview of the state.
@Suite("A damaged state: given up once, every file read again")
struct StateRetryTests {
    struct Other: Error {}

    /// A pipeline with no input, its output in a fresh folder.
    static func pipeline() throws -> ResolvedPipeline {
        let folder = Paths.temporary()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var config = PipelineConfig(path: folder + "/pipeline.yaml", folder: folder, name: "nightly")
        config.incremental = true
        return ResolvedPipeline(
            config: config, catalog: OfferCatalog(offers: []), asOf: 0, threads: 1, outputDirectory: folder,
            transactionFiles: [], renewalFiles: [])
    }

    static func state(_ p: ResolvedPipeline) -> StateFolder {
        StateFolder(p, root: p.outputDirectory + "/" + p.config.name)
    }

    @Test("a state found damaged is given up, said why, and the attempt made once more, reading every file")
    func retriedOnce() throws {
        let state = Self.state(try Self.pipeline())
        var attempts: [Bool] = []
        let result = try StateFolder.rebuildingIfDamaged(state, progress: Progress(mode: .quiet)) { again in
            attempts.append(again)
            if !again { throw StateDamaged(why: "rows-1-0.part: wrong SHA-256") }
            return 7
        }
        #expect(result == 7)
        #expect(attempts == [false, true])
        #expect(state.use == .rebuilt)
        #expect(state.reason == "the state is damaged (rows-1-0.part: wrong SHA-256)")
        #expect(state.summary.state == "rebuilt")
    }

    @Test("a second damaged attempt is the run's error: never a third")
    func notTwice() throws {
        let state = Self.state(try Self.pipeline())
        var attempts = 0
        #expect(throws: StateDamaged.self) {
            try StateFolder.rebuildingIfDamaged(state, progress: Progress(mode: .quiet)) { _ in
                attempts += 1
                throw StateDamaged(why: "again")
            }
        }
        #expect(attempts == 2)
    }

    @Test("without a state, or for another error, the attempt is made once and its error thrown")
    func noRetry() throws {
        var attempts = 0
        #expect(throws: StateDamaged.self) {
            try StateFolder.rebuildingIfDamaged(nil, progress: Progress(mode: .quiet)) { _ in
                attempts += 1
                throw StateDamaged(why: "no state to give up")
            }
        }
        let state = Self.state(try Self.pipeline())
        #expect(throws: Other.self) {
            try StateFolder.rebuildingIfDamaged(state, progress: Progress(mode: .quiet)) { _ in
                attempts += 1
                throw Other()
            }
        }
        #expect(attempts == 2)
        #expect(state.use == .created)
    }

    @Test("validate's preview examines the state and writes nothing")
    func preview() throws {
        let p = try Self.pipeline()
        let root = p.outputDirectory + "/" + p.config.name
        #expect(StateFolder.preview(p) == "incremental: the next run reads every file (no state yet)")
        #expect(!FileManager.default.fileExists(atPath: root))
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // A `.state` that is a file, not a folder: the next run rebuilds it.
        #expect(FileManager.default.createFile(atPath: root + "/.state", contents: Data("x".utf8)))
        let shown = StateFolder.preview(p)
        #expect(shown.hasPrefix("incremental: the next run reads every file ("), "\(shown)")
        #expect(shown.contains("not a state folder"), "\(shown)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == [".state"])
    }
}
