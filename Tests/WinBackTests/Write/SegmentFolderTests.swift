import Foundation
import Testing

@testable import WinBack

@Suite("Segment files: a folder that cannot be made (docs/rules.md §6)")
struct SegmentFolderTests {
    @Test("a segments folder that cannot be created fails with exit 73, naming the folder")
    func segmentsFolderBlockedByAFile() throws {
        let w = TestWorld()
        let rows = w.monthly(from: "2025-01-01T12:00:00Z", count: 3)
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        let book = OfferBook(catalog: OfferCatalog(offers: [TestWorld.basicOffer()]), ids: { w.strings.lookup($0) })
        let audience = Audience.evaluate(
            customers, book: book, renewals: nil, asOf: ms("2026-01-01T00:00:00Z"), gapDays: 60, threads: 1)
        let dir = Paths.temporary()
        // A file where the folder should go.
        #expect(FileManager.default.createFile(atPath: dir + "/segments", contents: Data("x".utf8)))
        let writer = SegmentWriter(customers: customers, audience: audience, book: book, formats: ["csv"])
        do {
            _ = try writer.write(to: dir, threads: 1)
            Issue.record("writing segments under a file succeeded")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 73)
            #expect("\(e)".contains(dir + "/segments"))
        }
    }
}
