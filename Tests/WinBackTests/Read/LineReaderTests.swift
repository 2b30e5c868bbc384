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

extension ReadStageTests {
    /// Splitting decompressed bytes into lines: CR stripping, blank lines, chunk boundaries.
    @Suite struct LineReaderTests {
        static let text = "first\r\n\r\n \t \nsecond\rmid\n\n" + String(repeating: "y", count: 100) + "\r\nlast"

        static let expected: [(Int, String)] = [
            (1, "first"), (2, ""), (3, " \t "), (4, "second\rmid"), (5, ""), (6, String(repeating: "y", count: 100)),
            (7, "last"),
        ]

        @Test(arguments: [1, 2, 3, 7, 64, 1 << 20])
        func linesAreTheSameWhateverTheChunkSize(chunkSize: Int) throws {
            try ReadSupport.withTempDir { dir in
                for gzip in [false, true] {
                    let url = dir.appendingPathComponent(gzip ? "l.jsonl.gz" : "l.jsonl")
                    let path =
                        gzip
                        ? try ReadSupport.write(ReadSupport.gzip(Self.text), to: url)
                        : try ReadSupport.write(Self.text, to: url)
                    let lines = try ReadSupport.lines(path, chunkSize: chunkSize)
                    #expect(lines.map(\.0) == Self.expected.map(\.0))
                    #expect(lines.map(\.1) == Self.expected.map(\.1))
                }
            }
        }

        @Test func aFinalNewlineAddsNoEmptyLine() throws {
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write("a\nb\n", to: dir.appendingPathComponent("n.jsonl"))
                #expect(try ReadSupport.lines(path).map(\.1) == ["a", "b"])
                let crlf = try ReadSupport.write("a\r\nb\r\n", to: dir.appendingPathComponent("r.jsonl"))
                #expect(try ReadSupport.lines(crlf).map(\.1) == ["a", "b"])
            }
        }

        @Test(arguments: [
            ("", true), (" ", true), ("\t \t", true), ("\r", true), (" \r\n", true), (" x ", false), ("{}", false),
            ("\u{0B}", false),
        ])
        func blankMeansOnlySpacesAndTabs(line: String, blank: Bool) {
            #expect(Array(line.utf8).withUnsafeBytes { Whitespace.isBlank($0) } == blank)
        }

        @Test func blankLinesAreNotCountedButKeepTheLineNumbers() throws {
            try ReadSupport.withTempDir { dir in
                let text = "\n" + TxLine(id: "a").json + "\r\n   \r\n\t\n" + "{bad}\r\n\n" + TxLine(id: "b").json
                let path = try ReadSupport.write(ReadSupport.gzip(text), to: dir.appendingPathComponent("b.jsonl.gz"))
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                #expect(set.counters.rowsRead == 3)
                #expect(set.inputs[0].rows == 3)
                #expect(set.rows.count == 2)
                #expect(set.rejects.map(\.line) == [5])
                #expect(set.rejects.first?.excerpt == "{bad}")
                #expect(set.rejects.first?.file == path)
            }
        }

        @Test func rejectExcerptsAreCutTo200ScalarsWithReplacementCharacters() throws {
            try ReadSupport.withTempDir { dir in
                let long = "{\"a\":\"" + String(repeating: "é", count: 300)
                var bytes = Array("{\u{FF}".utf8)
                bytes = [0x7B, 0xFF, 0x7D, 0x0A] + Array(long.utf8)
                let path = try ReadSupport.write(bytes, to: dir.appendingPathComponent("x.jsonl"))
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                #expect(set.rejects.count == 2)
                #expect(set.rejects.first?.excerpt == "{\u{FFFD}}")
                #expect(set.rejects.last?.excerpt.unicodeScalars.count == 200)
                #expect(set.rejects.last?.excerpt.hasPrefix("{\"a\":\"éé") == true)
            }
        }
    }
}
