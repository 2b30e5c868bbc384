import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackDelivery
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
            try WorkFolder(root).secure(making: "parts")
            Issue.record("a work folder of another user's was used")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect("\(e)".contains("the work folder is owned by another user"), "\(e)")
        }
        #expect(!FileManager.default.fileExists(atPath: root + "/parts"))
    }

    @Test(
        "a link planted where the work folder's parts or shards belong is refused with exit 73, its target untouched",
        arguments: ["/parts", "/shards"])
    func linkInTheWorkFolder(at place: String) throws {
        let victim = try Self.victim()
        let before = try Self.mode(victim)
        let root = Paths.temporary() + "/work"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + place, withDestinationPath: victim)
        do {
            try WorkFolder(root).secure(making: "parts")
            Issue.record("a link at \(place) was followed")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect(
                "\(e)"
                    == "\(root + place): is a symbolic link; the work folder's \(place.dropFirst()) must be a real folder"
            )
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim) == ["_SUCCESS"])
        #expect(try Self.mode(victim) == before)
    }

    @Test("a work folder given as a link of the user's own is followed: its target is made private and used")
    func ownLinkAsTheWorkFolder() throws {
        let target = Paths.temporary() + "/scratch/work"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let link = Paths.temporary() + "/work"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        try WorkFolder(link).secure(making: "parts")
        #expect(try Self.mode(target) == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: target) == ["parts"])
        #expect(System.linkKind(link) == System.symbolicLinkType)
    }

    @Test(
        "a work folder given as a link another user planted is refused, its target untouched",
        .enabled(if: geteuid() == 0, "only root can give a link to another user"))
    func anotherUsersLinkAsTheWorkFolder() throws {
        let victim = try Self.victim()
        let before = try Self.mode(victim)
        let link = Paths.temporary() + "/work"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim)
        #expect(lchown(link, 65534, 65534) == 0)
        #expect {
            try WorkFolder(link).secure(making: "parts")
        } throws: { e in
            (e as? WinBackError)?.code.exitCode == 73
                && "\(e)" == "\(link): is a symbolic link; the work folder must be a real folder"
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim) == ["_SUCCESS"])
        #expect(try Self.mode(victim) == before)
    }

    @Test("without create, a missing work folder is left missing, for the reader to say what has not run")
    func missingWorkFolderIsNotMade() throws {
        let root = Paths.temporary() + "/typo/work"
        try WorkFolder(root).secure()
        #expect(!FileManager.default.fileExists(atPath: Paths.temporary() + "/typo"))
    }

    @Test("a work folder that is a file says so, and so does a file above it")
    func workFolderThatIsAFile() throws {
        let dir = Paths.temporary()
        #expect(FileManager.default.createFile(atPath: dir + "/file", contents: Data("x".utf8)))
        #expect {
            try WorkFolder(dir + "/file").secure(making: "parts")
        } throws: { e in
            "\(e)" == "\(dir)/file: is a regular file, not a folder; the work folder must be a folder"
        }
        #expect {
            try WorkFolder(dir + "/file/work").secure(making: "parts")
        } throws: { e in
            "\(e)" == "\(dir)/file/work: cannot create the work folder: \(dir)/file is a file, not a folder"
        }
    }

    @Test("a work folder, its parts and shards are made private, also when they were there before, open to all")
    func workFolderIsMadePrivate() throws {
        let root = Paths.temporary() + "/deeper/work"
        try FileManager.default.createDirectory(atPath: root + "/parts", withIntermediateDirectories: true)
        for folder in [root, root + "/parts"] { #expect(chmod(folder, 0o777) == 0) }
        try WorkFolder(root).secure(making: "parts")
        #expect(!FileManager.default.fileExists(atPath: root + "/shards"))
        try WorkFolder(root).secure(making: "shards")
        for folder in [root, root + "/parts", root + "/shards"] { #expect(try Self.mode(folder) == 0o700) }
    }

    /// Where an output and a work folder below `above` are begun: nil when both were, else
    /// the messages of both refusals (exit 73), which must agree.
    static func refusal(below above: String) throws -> String? {
        var refused: [String] = []
        do {
            let publisher = Publisher(root: above + "/out/pipeline", date: "2026-11-22")
            try publisher.begin()
            publisher.fail(keeping: [])
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect("\(e)".hasSuffix(": another user could swap the output folder while a run writes into it"), "\(e)")
            // Nothing was made below the refused folder.
            #expect(!FileManager.default.fileExists(atPath: above + "/out/pipeline"))
            refused.append("\(e)".components(separatedBy: ": another user")[0])
        }
        do { try WorkFolder(above + "/work").secure(making: "parts") } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect("\(e)".hasSuffix(": another user could swap the work folder while a run writes into it"), "\(e)")
            refused.append("\(e)".components(separatedBy: ": another user")[0])
        }
        #expect(refused.count != 1, "\(refused)")
        return refused.first.map { $0.components(separatedBy: ": ").dropFirst().joined(separator: ": ") }
    }

    @Test(
        "a folder above the output or work folder that all may write without the sticky bit is refused with exit 73; sticky, it is not",
        arguments: [0o777, 0o1777, 0o755])
    func writableFolderAbove(mode: Int) throws {
        let above = Paths.temporary() + "/shared"
        try FileManager.default.createDirectory(atPath: above, withIntermediateDirectories: true)
        #expect(chmod(above, mode_t(mode)) == 0)
        let why = try Self.refusal(below: above)
        if mode == 0o777 {
            #expect(why == "\(above) can be written by every user (mode 777, not sticky)")
        } else {
            #expect(why == nil)
        }
    }

    @Test(
        "a folder above that its group may write is refused, unless that group is the user's own, with no other member")
    func groupWritableFolderAbove() throws {
        let own = Paths.temporary() + "/own-group"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        #expect(chown(own, uid_t.max, getegid()) == 0)
        #expect(chmod(own, 0o775) == 0)
        let members = getgrgid(getegid()).map { g in
            var n = 0
            while g.pointee.gr_mem[n] != nil { n += 1 }
            return n
        }
        // A group of the user's own with members besides the user is refused like any other.
        let onlyMine = members == 0
        #expect(try (Self.refusal(below: own) == nil) == onlyMine)
        guard geteuid() == 0 else { return }  // only root can give a folder to another group
        let shared = Paths.temporary() + "/other-group"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        #expect(chown(shared, uid_t.max, 65534) == 0)
        #expect(chmod(shared, 0o775) == 0)
        let why = try Self.refusal(below: shared)
        #expect(why?.hasPrefix("\(shared) can be written by its group ") == true, "\(why ?? "")")
        #expect(why?.hasSuffix(" (mode 775, not sticky)") == true, "\(why ?? "")")
    }

    @Test(
        "a link on the way to the output or work folder is followed only when neither it nor its folder lets another user swap it"
    )
    func linkOnTheWay() throws {
        // A fresh real folder for each link, so that what one case made is not seen by the next.
        func real() throws -> String {
            let dir = Paths.temporary() + "/real"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            return dir
        }
        // The user's own link in a folder of the user's own: followed.
        let mine = Paths.temporary() + "/mine"
        try FileManager.default.createDirectory(atPath: mine, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: mine + "/link", withDestinationPath: try real())
        #expect(try Self.refusal(below: mine + "/link") == nil)
        // The same link in a folder all may write: whoever writes it could replace the link.
        let open = Paths.temporary() + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
        #expect(chmod(open, 0o777) == 0)
        try FileManager.default.createSymbolicLink(atPath: open + "/link", withDestinationPath: try real())
        #expect(
            try Self.refusal(below: open + "/link") == "\(open) can be written by every user (mode 777, not sticky)")
        // A link to a folder all may write: its target is checked too.
        let target = Paths.temporary() + "/open-target"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        #expect(chmod(target, 0o777) == 0)
        try FileManager.default.createSymbolicLink(atPath: mine + "/to-open", withDestinationPath: target)
        #expect(
            try Self.refusal(below: mine + "/to-open")
                == "\(target) can be written by every user (mode 777, not sticky)")
        guard geteuid() == 0 else { return }  // only root can give a link to another user
        // Another user's link in a sticky folder: its owner can replace it.
        let sticky = Paths.temporary() + "/sticky"
        try FileManager.default.createDirectory(atPath: sticky, withIntermediateDirectories: true)
        #expect(chmod(sticky, 0o1777) == 0)
        try FileManager.default.createSymbolicLink(atPath: sticky + "/link", withDestinationPath: try real())
        #expect(lchown(sticky + "/link", 65534, 65534) == 0)
        #expect(
            try Self.refusal(below: sticky + "/link")
                == "\(sticky)/link is a symbolic link of another user's (uid 65534)")
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
