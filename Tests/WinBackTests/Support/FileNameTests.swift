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

/// Names are data (docs/rules.md §6.2): a name's bytes are kept whatever they are, and shown
/// and written escaped.
@Suite("File names: held as their bytes, shown escaped (docs/rules.md §6.2)")
struct FileNameTests {
    /// Random bytes 1–255 (a name holds no NUL), biased towards what breaks decoders: bytes
    /// past 0x7F, controls, backslashes and the markers' own bytes.
    static func randomName(_ g: inout SplitMix64) -> [UInt8] {
        let pieces: [[UInt8]] = [
            [0xF4, 0x8F, 0xBA, 0x80], [0xF4, 0x8F, 0xBB, 0xBF], [0xF4, 0x8F], [0xC3, 0xA9], [0xE2, 0x82, 0xAC],
            [0xF0, 0x9F, 0x98, 0x80], Array("\\x41".utf8), Array("\\xff".utf8), [0x5C], [0x0A], [0x7F], [0xFF],
            [0xED, 0xA0, 0x80], [0xC0, 0xAF],
        ]
        var out: [UInt8] = []
        for _ in 0..<g.int(0...12) {
            if g.chance(0.5) {
                out += pieces[g.int(0...pieces.count - 1)]
            } else {
                out.append(UInt8(g.int(1...255)))
            }
        }
        return out
    }

    @Test("any bytes round-trip through the name encoding; valid UTF-8 without markers is unchanged")
    func roundTrip() {
        var g = SplitMix64(seed: 62)
        for _ in 0..<20_000 {
            let bytes = Self.randomName(&g)
            let name = FileName.string(fromBytes: bytes)
            #expect(FileName.bytes(name) == bytes, "\(bytes)")
            let cString = FileName.withCString(name) { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) }
            #expect(cString == bytes)
            if let text = String(validating: bytes, as: UTF8.self),
                !text.unicodeScalars.contains(where: FileName.isMarker)
            {
                #expect(name == text)
            }
        }
        // A real marker scalar in a name (valid UTF-8) is kept as its four bytes.
        let marker = "a\u{10FE80}b"
        let name = FileName.string(fromBytes: marker.utf8)
        #expect(name != marker)
        #expect(FileName.bytes(name) == Array(marker.utf8))
        #expect(FileName.fromText(marker) == name)
        #expect(FileName.fromText("/data/in/é*.ndjson") == "/data/in/é*.ndjson")
    }

    @Test("names sort by their bytes, whatever they hold")
    func order() {
        var g = SplitMix64(seed: 7)
        let names = (0..<2_000).map { _ in Self.randomName(&g) }
        let sorted = names.map { FileName.string(fromBytes: $0) }.sorted(by: FileName.precedes).map(FileName.bytes)
        #expect(sorted == names.sorted { $0.lexicographicallyPrecedes($1) })
        // 0xFF sorts after every UTF-8 lead byte, é (0xC3 0xA9) before it.
        let ff = FileName.string(fromBytes: [0x61, 0xFF])
        #expect(FileName.precedes("aé", ff))
        #expect(!FileName.precedes(ff, "aé"))
        #expect(!FileName.precedes(ff, ff))
    }

    @Test("a name is shown with controls, DEL and bytes that are not UTF-8 as \\xHH; other text kept")
    func shown() {
        #expect(ControlEscape.name("/in/transactions-2026-01.ndjson.gz") == "/in/transactions-2026-01.ndjson.gz")
        #expect(ControlEscape.name("/in/été/日本.ndjson") == "/in/été/日本.ndjson")
        #expect(ControlEscape.name("a\nb\u{1B}c\u{8}d\u{7F}e\te\r") == "a\\x0Ab\\x1Bc\\x08d\\x7Fe\\x09e\\x0D")
        let bytes: [UInt8] = [0x61, 0xFF, 0x62, 0xC3, 0x28, 0xED, 0xA0, 0x80, 0xC3, 0xA9]
        #expect(ControlEscape.name(FileName.string(fromBytes: bytes)) == "a\\xFFb\\xC3(\\xED\\xA0\\x80é")
        // A real marker scalar is written as its bytes: the text never holds a marker.
        #expect(ControlEscape.name(FileName.fromText("x\u{10FEFF}")) == "x\\xF4\\x8F\\xBB\\xBF")
        // Backslashes stay, but not where they would read as an escape.
        #expect(ControlEscape.name("C:\\in\\x.csv") == "C:\\in\\x.csv")
        #expect(ControlEscape.name("a\\xFFb") == "a\\x5CxFFb")
        #expect(ControlEscape.name("a\\x4") == "a\\x4")
    }

    @Test("a name shown escaped is one line of printable text that gives its exact bytes back")
    func shownIsUnambiguous() {
        var g = SplitMix64(seed: 1862)
        var seen: [String: [UInt8]] = [:]
        for _ in 0..<20_000 {
            let bytes = Self.randomName(&g)
            let shown = ControlEscape.name(FileName.string(fromBytes: bytes))
            #expect(!shown.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || FileName.isMarker($0) })
            #expect(ControlEscape.nameBytes(shown) == bytes, "\(shown)")
            // Messages escape again with `escaped`: a shown name is left as it is.
            #expect(ControlEscape.escaped(shown) == shown)
            if let other = seen[shown] { #expect(other == bytes, "two names shown as \(shown)") }
            seen[shown] = bytes
        }
    }

    @Test("escaped(_:) writes a name's bytes that are not UTF-8 as \\xHH and stays idempotent")
    func messagesShowBytes() {
        let name = FileName.string(fromBytes: Array("/in/a".utf8) + [0xFF, 0x0A] + Array("b.gz".utf8))
        let e = WinBackError(.noInput, "cannot open: No such file or directory", path: name)
        #expect(e.description == "/in/a\\xFF\\x0Ab.gz: cannot open: No such file or directory")
        let once = ControlEscape.escaped(name + " \u{7F} é \u{0}")
        #expect(once == "/in/a\\xFF\\x0Ab.gz \\x7F é \\x00")
        #expect(ControlEscape.escaped(once) == once)
    }

    @Test("a reject's excerpt keeps a private-use character as text; only its controls are escaped")
    func excerptKeepsText() {
        let line = Array("{\"id\": \"\u{10FE80}\u{10FEFF}\t\"}".utf8)
        let r = line.withUnsafeBytes { Reject(file: "f", line: 1, reason: "bad", bytes: $0) }
        #expect(r.excerpt == "{\"id\": \"\u{10FE80}\u{10FEFF}\\x09\"}")
        #expect(ControlEscape.escapedText("a\u{10FEFF}\u{1B}") == "a\u{10FEFF}\\x1B")
    }

    @Test("a file whose name is not UTF-8 is found by glob, sorted by bytes, opened, sized and read")
    func systemCalls() throws {
        let dir = Paths.temporary()
        let raw: [[UInt8]] = [
            Array("t-".utf8) + [0xFF] + Array(".ndjson".utf8),
            Array("t-".utf8) + [0xC3, 0xA9] + Array(".ndjson".utf8),
            Array("t-".utf8) + [0xF4, 0x8F, 0xBA, 0x80, 0x0A, 0x1B] + Array(".ndjson".utf8),
            Array("t-a\\xFF.ndjson".utf8),
        ]
        for (i, r) in raw.enumerated() {
            let path = dir + "/" + FileName.string(fromBytes: r)
            let fd = try System.createForWriting(path)
            try Array(repeating: UInt8(ascii: "x"), count: i + 1).withUnsafeBytes { try System.writeAll(fd, $0) }
            try System.close(fd)
        }
        // Made with the bytes themselves, not a repaired string.
        let listed = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(listed.count == raw.count)
        let found = try InputFiles.resolve(["t-*.ndjson"], base: dir)
        let expected = raw.sorted { $0.lexicographicallyPrecedes($1) }.map { Array((dir + "/").utf8) + $0 }
        #expect(found.map(FileName.bytes) == expected)
        for path in found {
            let i = raw.firstIndex { Array((dir + "/").utf8) + $0 == FileName.bytes(path) }!
            #expect(System.kind(path) == .file)
            #expect(System.fileSize(path) == i + 1)
            #expect(System.notRegular(path) == nil)
            let (fd, size) = try System.openRegularFile(path, followLinks: false)
            #expect(size == i + 1)
            System.closeQuietly(fd)
        }
        // A literal path with the marker scalar itself names that file (its UTF-8 bytes).
        let literal = try InputFiles.resolve(["t-\u{10FE80}\n\u{1B}.ndjson"], base: dir)
        #expect(literal.map(FileName.bytes) == [Array((dir + "/").utf8) + raw[2]])
    }

    @Test("rejects.csv: one line per reject whatever its file's name holds, the name escaped")
    func rejectsOneLine() {
        let name = FileName.string(fromBytes: Array("/in/a\n\u{1B}\u{8}\u{7F}".utf8) + [0xFF] + Array(".csv".utf8))
        let rejects = RejectList([
            Reject(file: name, line: 2, reason: "bad", excerpt: "x"),
            Reject(file: "/in/b.csv", line: 1, reason: "bad", excerpt: "y"),
        ])
        let text = String(decoding: RejectsWriter.bytes(rejects, relativeTo: "/in"), as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4, "\(lines)")  // header, two rows, ""
        #expect(lines[1] == "a\\x0A\\x1B\\x08\\x7F\\xFF.csv,2,bad,x")
        #expect(lines[2] == "b.csv,1,bad,y")
    }
}
