import Foundation
import Testing
import WinBackTestSupport
import WinBackTesting

@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackWrite

/// Segment files are formatted in pieces on several threads and written in order; their XML
/// customers are formatted by winback, one write for many, their values escaped as libxml2
/// escapes them (docs/rules.md §4.2).
@Suite("Segment files in pieces: the bytes of one writer")
struct SegmentPiecesTests {
    /// Values a customer's fields may hold: plain, every character XML escapes in an attribute,
    /// controls, non-ASCII, long.
    static let values = [
        "plain-value_1.2", "a&b", "<tag>", "say \"hi\"", "it's", "tab\there", "new\nline", "cr\rhere", "]]>",
        "café", "日本", "😀 emoji", "\u{7F}del", "\u{01}soh", "&amp;", String(repeating: "x&", count: 300),
        " lead and trail ",
    ]

    @Test("an attribute winback formats is the bytes libxml2's writer writes for it", arguments: values)
    func attributeAsLibxml2(value: String) throws {
        let path = Paths.temporary() + "/one.xml"
        let x = try XMLWriter(path: path)
        try x.start("r")
        try x.attribute("a", value)
        try x.end()
        _ = try x.finish()
        let written = try #require(FileManager.default.contents(atPath: path))
        var ours = Array("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<r".utf8)
        XMLWriter.appendAttribute("a", to: &ours) { $0.append(contentsOf: Array(value.utf8)) }
        ours += Array("/>\n".utf8)
        #expect(text(ours) == text(Array(written)))
        #expect(ours == Array(written))
    }

    @Test("an empty value is left out; a value escaped already is not escaped again")
    func emptyAndEscaped() {
        var out: [UInt8] = []
        XMLWriter.appendAttribute("a", to: &out) { _ in }
        #expect(out.isEmpty)
        XMLWriter.appendAttribute("a", escaped: true, to: &out) {
            $0.append(contentsOf: XMLWriter.escapedAttribute(Array("x&y".utf8)))
        }
        #expect(text(out) == " a=\"x&amp;y\"")
    }

    @Test("bytes that are not UTF-8 are handed to libxml2's escaping, not kept by winback's")
    func notUTF8() {
        let value: [UInt8] = [0x61, 0xFF, 0xC3, 0x28, 0x62]
        var out: [UInt8] = []
        XMLWriter.appendAttribute("a", to: &out) { $0.append(contentsOf: value) }
        #expect(out == Array(" a=\"".utf8) + XMLWriter.escapedAttribute(value) + [UInt8(ascii: "\"")])
    }

    /// Eligible customers with hostile storefronts, an offer whose id needs escaping and one
    /// without a URL, evaluated.
    static func world(customers: Int) -> (CustomerRows, OfferBook, Audience) {
        let w = TestWorld()
        var rows: [Transaction] = []
        for c in 0..<customers {
            rows += w.monthly(
                from: "2025-01-01T12:00:00Z", count: 3 + c % 5, customer: "c\(c)",
                storefront: values[c % values.count])
        }
        var offer = TestWorld.basicOffer()
        offer.appleId = "10778326500"
        // No appleId: an empty URL, left out of the XML.
        let second = TestWorld.basicOffer(paid: 5, id: "wb.<second>&")
        return evaluateWorld(w, rows, offers: [offer, second], asOf: "2026-01-01T00:00:00Z")
    }

    static func files(_ dir: String) -> [String: Data] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/segments")) ?? []
        return Dictionary(
            uniqueKeysWithValues: names.map { ($0, FileManager.default.contents(atPath: dir + "/segments/" + $0)!) })
    }

    @Test(
        "any piece size and thread count give the bytes of one piece on one thread; each customer's attributes as libxml2 writes them"
    )
    func piecesAndThreads() throws {
        let (customers, book, audience) = Self.world(customers: 61)
        let reference = Paths.temporary()
        let whole = SegmentWriter(
            customers: customers, audience: audience, book: book, formats: ["csv", "xml"], pieceRows: 1_000)
        let stats = try whole.write(to: reference, threads: 1)
        let expected = Self.files(reference)
        #expect(expected.count == 6)
        #expect(stats.first { $0.path == "segments/best-offer.xml" }?.rows == 61)
        #expect(stats.first { $0.path == "segments/wb.<second>&.xml" }.map { $0.rows > 0 } == true)
        for (pieceRows, threads) in [(1, 1), (1, 4), (2, 2), (7, 3), (60, 2), (61, 2), (62, 4)] {
            let dir = Paths.temporary()
            let writer = SegmentWriter(
                customers: customers, audience: audience, book: book, formats: ["csv", "xml"], pieceRows: pieceRows)
            let got = try writer.write(to: dir, threads: threads)
            #expect(got == stats, "\(pieceRows) rows a piece, \(threads) threads")
            #expect(Self.files(dir) == expected, "\(pieceRows) rows a piece, \(threads) threads")
        }
        // Each customer line holds what libxml2's writer writes for its attributes.
        let xml = String(decoding: try #require(expected["best-offer.xml"]), as: UTF8.self)
        for value in Self.values {
            var attribute: [UInt8] = []
            XMLWriter.appendAttribute("storefront", to: &attribute) { $0.append(contentsOf: Array(value.utf8)) }
            #expect(xml.contains(text(attribute)), "\(value)")
        }
        #expect(xml.contains(" offerUrl=\"https://apps.apple.com/win-back/10778326500\""))
        let second = String(decoding: try #require(expected["wb.<second>&.xml"]), as: UTF8.self)
        #expect(second.contains(" offerId=\"wb.&lt;second&gt;&amp;\""))
        #expect(!second.contains(" offerUrl="))
        #expect(xml.contains(" eligibleOfferIds=\"wb.basic.1m.free wb.&lt;second&gt;&amp;\""))
    }

    @Test("a list with no customer is one piece: its XML's root element closed on itself")
    func emptyList() throws {
        let (customers, book, audience) = Self.world(customers: 0)
        let dir = Paths.temporary()
        _ = try SegmentWriter(
            customers: customers, audience: audience, book: book, formats: ["csv", "xml"], pieceRows: 1
        )
        .write(to: dir, threads: 2)
        let xml = String(decoding: try #require(Self.files(dir)["best-offer.xml"]), as: UTF8.self)
        #expect(
            xml == "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                + "<audience xmlns=\"urn:winback:segment:1\" asOf=\"2026-01-01T00:00:00.000Z\" customers=\"0\"/>\n")
        #expect(
            text(Array(try #require(Self.files(dir)["best-offer.csv"])))
                == text(CSVRecord.header(SegmentWriter.columns)))
    }

    @Test("a file's bytes and SHA-256 are those written, in order, whether buffered or past the buffer")
    func bufferedAndDirectWrites() throws {
        let dir = Paths.temporary()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var g = SplitMix64(seed: 7, index: 0)
        // Small, then one as large as the buffer, one larger, small again, and one just short.
        let sizes = [10, OutputFile.flushAt, 3, OutputFile.flushAt * 2 + 5, 1, OutputFile.flushAt - 1, 0, 7]
        let parts = sizes.map { n in (0..<n).map { _ in UInt8(truncatingIfNeeded: g.next()) } }
        let f = try OutputFile(path: dir + "/f.bin")
        for (i, p) in parts.enumerated() {
            if i % 2 == 0 { try f.write(p) } else { try p.withUnsafeBytes { try f.write($0) } }
        }
        let (n, sha) = try f.finish()
        let all = parts.flatMap { $0 }
        #expect(n == all.count)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/f.bin")) == Data(all))
        #expect(sha == (try ReadSupport.sha256sum(dir + "/f.bin")))
        // An XML writer's raw pieces, of one byte and past the buffer, come out in order too.
        let x = try XMLWriter(path: dir + "/f.xml")
        try x.start("e")
        let big = [UInt8](repeating: UInt8(ascii: "a"), count: OutputFile.flushAt + 3)
        for piece in [[UInt8(ascii: "\n")], big, [UInt8(ascii: "b")], []] { try x.raw(piece) }
        try x.end()
        _ = try x.finish()
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: dir + "/f.xml")), as: UTF8.self)
        #expect(
            text == "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<e>\n" + String(repeating: "a", count: big.count)
                + "b</e>\n")
    }

    @Test(
        "pieces handed over from several threads are written in order by one at a time, the others going on; a piece too far ahead waits for room",
        arguments: [(1, 4), (3, 4), (8, 2), (2, 1)])
    func piecesFromThreads(ahead: Int, threads: Int) throws {
        let dir = Paths.temporary()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let n = 300
        // Pieces of 0 to 5,000 bytes: some formatted long after the ones behind them.
        var g = SplitMix64(seed: UInt64(ahead * 10 + threads), index: 0)
        let parts = (0..<n).map { i in
            (0..<Int(g.next() % 5_000)).map { k in UInt8(truncatingIfNeeded: i &* 31 &+ k) }
        }
        // Each piece formatted into a buffer handed back by a piece written before: one handed
        // out again while its piece still waited would be overwritten before it is written.
        let buffers = PieceBuffers(most: 2)
        let out = SegmentFileOutput(path: dir + "/f.csv", pieces: n, sync: nil, ahead: ahead, buffers: buffers)
        let finished = ResultSlots<(Int, String)>(count: n)
        let spun = ResultSlots<UInt64>(count: n)
        try parallelFor(count: n, threads: threads) { i in
            var bytes = buffers.take(capacity: 5_000)
            // Uneven work before the hand-over, as formatting a piece takes.
            var spin = UInt64(i)
            for k in 0..<(parts[i].count * (i % 3 + 1)) {
                spin = spin &* 6_364_136_223_846_793_005 &+ 1
                if k < parts[i].count { bytes.append(parts[i][k]) }
            }
            spun[i] = spin
            let open: (SegmentFileOutput.Place) throws -> sending SegmentFileOutput.Sink = {
                .csv(try OutputFile(path: $0.path, sync: $0.sync))
            }
            if let stats = try out.put(i, consume bytes, open: open) { finished[i] = stats }
        }
        let all = parts.flatMap { $0 }
        let ends = (0..<n).compactMap { finished[$0] }
        #expect(ends.count == 1, "the file is ended once")
        #expect(ends.first?.0 == all.count)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/f.csv")) == Data(all))
        #expect(ends.first?.1 == (try ReadSupport.sha256sum(dir + "/f.csv")))
    }

    @Test("a piece's buffer handed back is handed out again emptied, its memory kept; no more than the most are kept")
    func pieceBuffersAreReused() {
        let buffers = PieceBuffers(most: 2)
        var a = buffers.take(capacity: 100)
        #expect(a.isEmpty && a.capacity >= 100)
        a.append(contentsOf: [1, 2, 3])
        let storage = a.withUnsafeBufferPointer { $0.baseAddress }
        buffers.give(consume a)
        let again = buffers.take(capacity: 50)
        #expect(again.isEmpty && again.capacity >= 100)
        #expect(again.withUnsafeBufferPointer { $0.baseAddress } == storage, "the same memory")
        // A larger buffer than one kept is made larger; three handed back keep two.
        let larger = buffers.take(capacity: 10_000)
        #expect(larger.capacity >= 10_000)
        buffers.give(again)
        buffers.give(larger)
        buffers.give([UInt8](repeating: 9, count: 7))
        let kept = (0..<3).map { _ in buffers.take(capacity: 1) }
        #expect(kept.allSatisfy { $0.isEmpty })
        #expect(kept.filter { $0.capacity >= 100 }.count == 2, "two kept, the third made anew")
    }

    /// Threads waiting for room are each woken: with one semaphore for every sleeper, a thread
    /// about to sleep could take the signal meant for another, which then slept uncounted and,
    /// once the one that woke it slept too, for ever (both threads waiting, nobody writing).
    /// Many short rounds on two to four threads with one piece of room, each given twenty
    /// seconds to end. The race is a matter of timing; against the build that had it, this test
    /// failed in each of six runs (one round never ended).
    @Test("every thread waiting for room is woken: rounds of pieces with one piece of room end", arguments: [2, 3, 4])
    func everySleeperWakes(threads: Int) throws {
        let dir = Paths.temporary()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for round in 0..<500 {
            let n = 48
            let out = SegmentFileOutput(path: dir + "/f\(round).csv", pieces: n, sync: nil, ahead: 1)
            let done = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                try? parallelFor(count: n, threads: threads) { i in
                    // Uneven work before the hand-over, so that threads meet at every step.
                    var spin = UInt64(i)
                    for _ in 0..<((i * 7 + round) % 5 * 300) { spin = spin &* 6_364_136_223_846_793_005 &+ 1 }
                    let open: (SegmentFileOutput.Place) throws -> sending SegmentFileOutput.Sink = {
                        .csv(try OutputFile(path: $0.path, sync: $0.sync))
                    }
                    _ = try? out.put(i, [UInt8(truncatingIfNeeded: spin | 1)], open: open)
                }
                done.signal()
            }
            guard done.wait(timeout: .now() + 20) == .success else {
                Issue.record("round \(round) on \(threads) threads: a thread waiting for room was never woken")
                return
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/f\(round).csv")).count == n)
        }
    }

    @Test("a file that cannot be written fails with its error; the pieces after it are dropped, not kept")
    func failedFile() throws {
        let dir = Paths.temporary()
        // A folder where the file goes.
        try FileManager.default.createDirectory(atPath: dir + "/blocked.csv", withIntermediateDirectories: true)
        let out = SegmentFileOutput(path: dir + "/blocked.csv", pieces: 3, sync: nil)
        let open: (SegmentFileOutput.Place) throws -> sending SegmentFileOutput.Sink = {
            .csv(try OutputFile(path: $0.path, sync: $0.sync))
        }
        #expect(try out.put(1, Array("b\n".utf8), open: open) == nil)
        #expect(!out.failed)
        #expect(throws: WinBackError.self) { try out.put(0, Array("a\n".utf8), open: open) }
        #expect(out.failed)
        #expect(try out.put(2, Array("c\n".utf8), open: open) == nil)

        let (customers, book, audience) = Self.world(customers: 20)
        let run = Paths.temporary()
        try FileManager.default.createDirectory(
            atPath: run + "/segments/best-offer.xml", withIntermediateDirectories: true)
        let writer = SegmentWriter(
            customers: customers, audience: audience, book: book, formats: ["csv", "xml"], pieceRows: 1)
        if let e = try expectWinBackError(
            exit: 73, "a segment written over a folder", { _ = try writer.write(to: run, threads: 2) })
        {
            #expect("\(e)".contains("best-offer.xml"), "\(e)")
        }
    }
}
