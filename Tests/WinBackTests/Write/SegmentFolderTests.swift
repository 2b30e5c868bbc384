import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Segment files: a folder that cannot be made (docs/rules.md §6)")
struct SegmentFolderTests {
    @Test("a segments folder that cannot be created fails with exit 73, naming the folder")
    func segmentsFolderBlockedByAFile() throws {
        let w = TestWorld()
        let (customers, book, audience) = evaluateWorld(
            w, w.monthly(from: "2025-01-01T12:00:00Z", count: 3), offers: [TestWorld.basicOffer()],
            asOf: "2026-01-01T00:00:00Z")
        let dir = Paths.temporary()
        // A file where the folder should go.
        #expect(FileManager.default.createFile(atPath: dir + "/segments", contents: Data("x".utf8)))
        let writer = SegmentWriter(customers: customers, audience: audience, book: book, formats: ["csv"])
        if let e = try expectWinBackError(
            exit: 73, "writing segments under a file succeeded",
            {
                _ = try writer.write(to: dir, threads: 1)
            })
        {
            #expect("\(e)".contains(dir + "/segments"))
            #expect("\(e)".hasSuffix("cannot create the folder: \(dir)/segments is a file, not a folder"), "\(e)")
        }
    }

    @Test("an output folder under a file says which part is a file, with exit 73")
    func outputFolderUnderAFile() throws {
        let dir = Paths.temporary()
        #expect(FileManager.default.createFile(atPath: dir + "/out", contents: Data("x".utf8)))
        for root in [dir + "/out/golden", dir + "/out/deeper/golden"] {
            if let e = try expectWinBackError(
                exit: 73, "an output folder under a file was made",
                {
                    try Publisher(root: root, date: "2026-11-22").begin()
                })
            {
                #expect(
                    "\(e)" == "\(root): cannot create the output folder: \(dir)/out is a file, not a folder")
            }
        }
    }

    @Test(
        "a regular file, a folder or a FIFO where `latest` or the date's link belongs fails the publish with exit 73, saying what it is",
        arguments: [("latest", "file"), ("2026-11-22", "file"), ("latest", "folder"), ("latest", "fifo")])
    func nonLinkWhereALinkBelongs(name: String, kind: String) throws {
        let root = Paths.temporary() + "/pipeline"
        let publisher = Publisher(root: root, date: "2026-11-22")
        try publisher.begin()
        defer { publisher.fail(keeping: []) }
        let path = root + "/" + name
        switch kind {
        case "file": #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        case "folder": try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        default: #expect(mkfifo(path, 0o600) == 0)
        }
        let words = ["file": "a regular file", "folder": "a folder", "fifo": "a FIFO (named pipe)"][kind]!
        if let e = try expectWinBackError(
            exit: 73, "published over \(kind) \(name)",
            {
                try publisher.publish()
            })
        {
            #expect(
                "\(e)" == "\(path): is \(words), not a link this tool manages; move it away (nothing was published)")
        }
    }

    @Test("a folder that cannot be made for another reason gives the system's words, not Foundation's code")
    func folderProblemWords() {
        let error = NSError(
            domain: NSCocoaErrorDomain, code: 513,
            userInfo: [NSUnderlyingErrorKey: NSError(domain: NSPOSIXErrorDomain, code: Int(EACCES))])
        #expect(OutputFile.folderProblem("/nonexistent-\(UUID().uuidString)/x", error) == "Permission denied")
    }
}
