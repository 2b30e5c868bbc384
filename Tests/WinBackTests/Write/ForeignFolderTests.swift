import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackSupport
@testable import WinBackWrite

/// Folders a run writes into and trusts are its user's own and real (docs/rules.md §6.1): an
/// output or work folder another user made, or a link planted where a folder belongs, is
/// refused or removed, never written through, even when the run is root.
@Suite("Folders of another user's, and links where folders belong")
struct ForeignFolderTests {
    /// A folder this process's user does not own: as root (who may give it away), a fresh one
    /// given to `nobody`; otherwise `/`, which only root owns. Either is refused before anything
    /// in it is changed.
    static func foreignFolder() throws -> String {
        guard geteuid() == 0 else { return "/" }
        let dir = Paths.temporary() + "/foreign"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(chown(dir, 65534, 65534) == 0)
        return dir
    }

    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    /// A folder with one file in it, that no run may touch.
    static func victim() throws -> String {
        let dir = Paths.temporary() + "/victim"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try "keep me".write(toFile: dir + "/_SUCCESS", atomically: false, encoding: .utf8)
        return dir
    }

    @Test("a folder of another user's is not made private: it is refused, its mode unchanged")
    func secureDirectoryRefusesAnothersFolder() throws {
        let folder = try Self.foreignFolder()
        let before = try Self.mode(folder)
        #expect(throws: System.OwnedByAnother.self) { try System.secureDirectory(folder, mode: 0o700, group: nil) }
        #expect(try Self.mode(folder) == before)
        // One's own folder is made private.
        let own = Paths.temporary() + "/own"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        try System.secureDirectory(own, mode: 0o700, group: nil)
        #expect(try Self.mode(own) == 0o700)
    }

    @Test("an output folder another user made fails the run with exit 73, before its lock is taken")
    func outputFolderOfAnothersUser() throws {
        let root = try Self.foreignFolder()
        do {
            try Publisher(root: root, date: "2026-11-22").begin()
            Issue.record("a run began in \(root), which is not its user's")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect("\(e)".hasPrefix("\(root): the output folder is owned by another user (uid "), "\(e)")
            #expect("\(e)".hasSuffix("; a run writes only into its own"), "\(e)")
        }
        #expect(!FileManager.default.fileExists(atPath: root + "/.lock"))
    }

    @Test("a work folder another user made is refused with exit 73, nothing made in it")
    func workFolderOfAnothersUser() throws {
        let root = try Self.foreignFolder()
        do {
            try WorkFolder(root).secure()
            Issue.record("a work folder of another user's was used")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect("\(e)".contains("the work folder is owned by another user"), "\(e)")
        }
        #expect(!FileManager.default.fileExists(atPath: root + "/parts"))
    }

    @Test(
        "a link planted where the work folder, its parts or its shards belong is refused with exit 73, its target untouched",
        arguments: ["", "/parts", "/shards"])
    func linkInTheWorkFolder(at place: String) throws {
        let victim = try Self.victim()
        let before = try Self.mode(victim)
        let root = Paths.temporary() + "/work"
        if !place.isEmpty { try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true) }
        try FileManager.default.createSymbolicLink(atPath: root + place, withDestinationPath: victim)
        do {
            try WorkFolder(root).secure()
            Issue.record("a link at \(place) was followed")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect(
                "\(e)"
                    == "\(root + place): is a symbolic link; a work folder and its parts and shards must be real folders"
            )
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim) == ["_SUCCESS"])
        #expect(try Self.mode(victim) == before)
    }

    @Test("a fresh work folder, its parts and shards are made private whatever the umask")
    func freshWorkFolderIsPrivate() throws {
        let root = Paths.temporary() + "/deeper/work"
        let old = umask(0)
        defer { umask(old) }
        try WorkFolder(root).secure()
        for folder in [root, root + "/parts", root + "/shards"] { #expect(try Self.mode(folder) == 0o700) }
    }

    @Test("a task's folder that is a link is replaced, not followed: the link's target keeps its files")
    func replaceDoesNotFollowALink() throws {
        let victim = try Self.victim()
        let parent = Paths.temporary() + "/shards"
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        let final = parent + "/0"
        try FileManager.default.createSymbolicLink(atPath: final, withDestinationPath: victim)
        let staged = try WorkFolder.staging(for: final)
        try "new".write(toFile: staged + "/data", atomically: false, encoding: .utf8)
        try WorkFolder.replace(final, with: staged)
        #expect(System.linkKind(final) == System.folderType)
        #expect(try FileManager.default.contentsOfDirectory(atPath: final) == ["data"])
        #expect(try String(contentsOfFile: victim + "/_SUCCESS", encoding: .utf8) == "keep me")
    }

    @Test("a link in the place of the identities' work folder is removed, not emptied")
    func identitiesWorkFolderLink() throws {
        let victim = try Self.victim()
        let link = Paths.temporary() + "/identities"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim)
        IdentityBuckets.removeFolder(link)
        #expect(System.linkKind(link) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim) == ["_SUCCESS"])
    }

    @Test("a memory-bounded run whose merge finds no finished task keeps its failure and leaves no staging folder")
    func boundedMergeFailureIsKept() throws {
        let w = try Paths.copyFixture("golden")
        let p = try ResolvedPipeline.resolve(RunOptions(pipelinePath: w + "/pipeline.yaml"))
        let publisher = p.publisher()
        try publisher.begin()
        let staging = publisher.staging
        #expect(FileManager.default.fileExists(atPath: staging))
        let work = WorkFolder(publisher.root + "/.work-test")
        #expect {
            _ = try Merge.run(p, work: work, shards: 2, progress: .automatic(quiet: true), publisher: publisher)
        } throws: { e in
            (e as? WinBackError)?.code == .noInput && "\(e)".contains("no partition task has finished")
        }
        #expect(!FileManager.default.fileExists(atPath: staging))
        let manifest = try String(
            contentsOfFile: publisher.root + "/.failed-" + publisher.date + "/manifest.json", encoding: .utf8)
        #expect(manifest.contains("no partition task has finished"), "\(manifest)")
        #expect(FileManager.default.fileExists(atPath: publisher.root + "/.failed-" + publisher.date + "/rejects.csv"))
        // The lock was released: another run begins.
        let next = Publisher(root: publisher.root, date: publisher.date)
        try next.begin()
        next.fail(keeping: [])
    }
}
