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
    /// Gzip and plain sources (docs/rules.md §2.1 file kinds, §6 corrupt and truncated files).
    @Suite struct GzipFileSourceTests {
        /// Text large enough for dynamic Huffman blocks and several 256 KiB input refills.
        static func sampleText(lines: Int, seed: UInt64 = 1) -> String {
            var rng = SplitMix64(seed: seed)
            var out = ""
            for i in 0..<lines {
                out +=
                    TxLine(
                        id: "\(1_000_000 + i)", original: "\(rng.next() % 5000)", signed: Int64(rng.next() % 1_000_000)
                    )
                    .with("note", "\"\(rng.next())-\(rng.next())\"").json
                out += "\n"
            }
            return out
        }

        private func expectBadData(
            _ path: String, containing: String? = nil, inflater: Inflater,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            do {
                _ = try ReadSupport.readAll(path, inflater: inflater)
                Issue.record("read \(path) without an error", sourceLocation: sourceLocation)
            } catch let e as WinBackError {
                #expect(e.code == .badData, "\(e)", sourceLocation: sourceLocation)
                #expect(e.description.contains(path), "\(e)", sourceLocation: sourceLocation)
                if let containing {
                    #expect(e.message.contains(containing), "\(e)", sourceLocation: sourceLocation)
                }
                // "… at compressed byte offset N", N within the file.
                let size = InputFiles.size(path)
                let offset = e.message.split(separator: " ").last.flatMap { Int($0) }
                #expect(e.message.contains("byte offset"), "\(e)", sourceLocation: sourceLocation)
                #expect(offset.map { $0 >= 0 && $0 <= size } == true, "\(e)", sourceLocation: sourceLocation)
            } catch {
                Issue.record("not a WinBackError: \(error)", sourceLocation: sourceLocation)
            }
        }

        @Test(arguments: Inflater.available, [1, 100, 4096, 1 << 20])
        func aSingleMemberReadsBack(inflater: Inflater, readSize: Int) throws {
            try ReadSupport.withTempDir { dir in
                let text = Self.sampleText(lines: 300)
                let path = try ReadSupport.write(ReadSupport.gzip(text), to: dir.appendingPathComponent("a.jsonl.gz"))
                #expect(try ReadSupport.readAll(path, chunk: readSize, inflater: inflater) == Array(text.utf8))
            }
        }

        @Test(arguments: Inflater.available)
        func aFileLargerThanTheInputBufferReadsBack(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let text = Self.sampleText(lines: 20000, seed: 7)
                let gz = ReadSupport.gzip(Array(text.utf8), level: 1)
                #expect(gz.count > 2 * GzipFileSource.inputSize)
                let path = try ReadSupport.write(gz, to: dir.appendingPathComponent("big.jsonl.gz"))
                #expect(try ReadSupport.readAll(path, chunk: 1 << 20, inflater: inflater) == Array(text.utf8))
            }
        }

        @Test(arguments: Inflater.available)
        func everyMemberOfAMultiMemberFileIsRead(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let parts = ["{\"a\":1}\n", "", "{\"b\":2}\n{\"c\":3}", "\n"]
                let bytes = parts.flatMap { ReadSupport.gzip($0) }
                let path = try ReadSupport.write(bytes, to: dir.appendingPathComponent("multi.jsonl.gz"))
                #expect(try ReadSupport.readAll(path, chunk: 3, inflater: inflater) == Array(parts.joined().utf8))
                let lines = try ReadSupport.lines(path, inflater: inflater).map(\.1)
                #expect(lines == ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"])
            }
        }

        @Test(arguments: Inflater.available)
        func manyLargeMembersAcrossRefillsAreRead(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let texts = (0..<4).map { Self.sampleText(lines: 4000, seed: UInt64($0) + 10) }
                let bytes = texts.flatMap { ReadSupport.gzip(Array($0.utf8), level: 1) }
                let path = try ReadSupport.write(bytes, to: dir.appendingPathComponent("multi.jsonl.gz"))
                #expect(try ReadSupport.readAll(path, chunk: 65536, inflater: inflater) == Array(texts.joined().utf8))
            }
        }

        @Test func theCommittedTwoMemberFixtureReads() throws {
            let url = try #require(
                Bundle.module.url(forResource: "Fixtures/read/two-members.jsonl", withExtension: "gz"))
            let set = try TransactionReader.read(inputs: [url.path].map(InputStores.lookUp), threads: 1)
            #expect(set.counters.rowsRead == 4)
            #expect(set.counters.nonSubscription == 1)
            #expect(set.counters.sandbox == 1)
            #expect(set.counters.rejected == 0)
            #expect(set.rows.count == 2)
            let winBack = try #require(set.rows.last)
            #expect(set.strings.string(winBack.transactionId) == "2000000000000102")
            #expect(winBack.offerType == 4)
            #expect(winBack.isFreeTrial)
            #expect(set.strings.string(winBack.storefront) == "CAN")
            #expect(set.inputs[0].sha256 == (try ReadSupport.sha256sum(url.path)))
        }

        @Test(arguments: [
            "rows.jsonl", "rows.ndjson", "rows.ndjson.gz", "rows.jsonl.gz", "rows.JSONL.GZ", "rows.ndjson.Gz",
        ])
        func everyFileKindReadsTheSameRows(name: String) throws {
            try ReadSupport.withTempDir { dir in
                let text = TxLine(id: "t1").json + "\r\n\n" + TxLine(id: "t2").json
                let url = dir.appendingPathComponent(name)
                let path =
                    name.lowercased().hasSuffix(".gz")
                    ? try ReadSupport.write(ReadSupport.gzip(text), to: url) : try ReadSupport.write(text, to: url)
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                #expect(set.rows.map { set.strings.string($0.transactionId) } == ["t1", "t2"])
                #expect(set.counters.rowsRead == 2)
                #expect(set.inputs[0].uncompressedBytes == text.utf8.count)
            }
        }

        /// Some editors and exporters start a file with a UTF-8 byte order mark: it is not data.
        /// One further on is (that line is not JSON).
        @Test(arguments: [false, true])
        func aByteOrderMarkAtTheStartIsSkipped(gzip: Bool) throws {
            try ReadSupport.withTempDir { dir in
                let text = "\u{FEFF}" + TxLine(id: "t1").json + "\n\u{FEFF}" + TxLine(id: "t2").json + "\n"
                let url = dir.appendingPathComponent(gzip ? "bom.jsonl.gz" : "bom.jsonl")
                let path =
                    gzip ? try ReadSupport.write(ReadSupport.gzip(text), to: url) : try ReadSupport.write(text, to: url)
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                #expect(set.rows.map { set.strings.string($0.transactionId) } == ["t1"])
                #expect(set.rejects.map(\.line) == [2])
                #expect(set.inputs[0].uncompressedBytes == text.utf8.count)
                let onlyMark = try ReadSupport.write("\u{FEFF}", to: dir.appendingPathComponent("mark.jsonl"))
                #expect(try ReadSupport.lines(onlyMark).isEmpty)
            }
        }

        @Test(arguments: Inflater.available)
        func flippedBytesInTheDeflateDataFailWithTheFileAndOffset(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                var gz = ReadSupport.gzip(Self.sampleText(lines: 2000))
                let mid = gz.count / 2
                for i in mid..<(mid + 16) { gz[i] ^= 0xFF }
                let path = try ReadSupport.write(gz, to: dir.appendingPathComponent("corrupt.jsonl.gz"))
                expectBadData(path, containing: "corrupt", inflater: inflater)
                // The damage cannot be seen before it is read: the offset is at or past it.
                do {
                    _ = try ReadSupport.readAll(path, inflater: inflater)
                } catch let e as WinBackError {
                    let offset = e.message.split(separator: " ").last.flatMap { Int($0) } ?? -1
                    #expect(offset >= mid, "\(e)")
                }
                // Through the reader too, with the file named.
                #expect {
                    _ = try TransactionReader.read(
                        inputs: [path].map(InputStores.lookUp), threads: 2, inflater: inflater)
                } throws: { e in
                    (e as? WinBackError)?.code == .badData && (e as? WinBackError)?.path == path
                }
            }
        }

        @Test(arguments: Inflater.available)
        func aBadChecksumIsCorrupt(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                var gz = ReadSupport.gzip("{\"a\":1}\n")
                gz[gz.count - 8] ^= 0x01  // CRC-32 in the trailer
                let path = try ReadSupport.write(gz, to: dir.appendingPathComponent("crc.jsonl.gz"))
                expectBadData(path, containing: "corrupt", inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available)
        func aWrongSizeInTheTrailerIsCorrupt(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                var gz = ReadSupport.gzip("{\"a\":1}\n")
                gz[gz.count - 4] ^= 0x01  // ISIZE in the trailer
                let path = try ReadSupport.write(gz, to: dir.appendingPathComponent("isize.jsonl.gz"))
                expectBadData(path, containing: "corrupt", inflater: inflater)
            }
        }

        /// ISA-L is optional: where it is missing, asking for it is a usage error that says what
        /// to install; where CI installs it, it must be there (so its tests above run).
        @Test func isalIsUsableOrRefusedWithAClearMessage() throws {
            if ProcessInfo.processInfo.environment["WINBACK_REQUIRE_ISAL"] == "1" {
                #expect(Inflater.isal.isAvailable)
                #expect(Inflater.available == [.zlib, .isal])
            }
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write(ReadSupport.gzip("{}\n"), to: dir.appendingPathComponent("a.jsonl.gz"))
                if Inflater.isal.isAvailable {
                    #expect(try ReadSupport.readAll(path, inflater: .isal) == Array("{}\n".utf8))
                } else {
                    #expect {
                        _ = try ReadSupport.readAll(path, inflater: .isal)
                    } throws: { e in
                        (e as? WinBackError)?.code == .usage && "\(e)".contains("libisal")
                    }
                }
            }
        }

        @Test(arguments: Inflater.available, [1, 4, 8, 9, 20, 200])
        func aTruncatedFileFailsAsTruncated(inflater: Inflater, cut: Int) throws {
            try ReadSupport.withTempDir { dir in
                let gz = ReadSupport.gzip(Self.sampleText(lines: 200))
                let path = try ReadSupport.write(
                    Array(gz.dropLast(cut)), to: dir.appendingPathComponent("cut.jsonl.gz"))
                expectBadData(path, containing: "truncated", inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available, [1, 2, 10])
        func aFileCutInsideTheHeaderFails(inflater: Inflater, keep: Int) throws {
            try ReadSupport.withTempDir { dir in
                let gz = ReadSupport.gzip(Self.sampleText(lines: 20))
                let path = try ReadSupport.write(
                    Array(gz.prefix(keep)), to: dir.appendingPathComponent("head.jsonl.gz"))
                expectBadData(path, inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available)
        func aTruncatedSecondMemberFails(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let second = ReadSupport.gzip(Self.sampleText(lines: 50, seed: 3))
                let bytes = ReadSupport.gzip(Self.sampleText(lines: 50)) + second.dropLast(20)
                let path = try ReadSupport.write(bytes, to: dir.appendingPathComponent("cut2.jsonl.gz"))
                expectBadData(path, containing: "truncated", inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available)
        func plainTextNamedGzFails(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write(TxLine().json + "\n", to: dir.appendingPathComponent("plain.jsonl.gz"))
                expectBadData(path, containing: "not gzip", inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available)
        func aBadSecondMagicByteFails(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                var gz = ReadSupport.gzip("{}\n")
                gz[1] = 0x00
                let path = try ReadSupport.write(gz, to: dir.appendingPathComponent("magic.jsonl.gz"))
                expectBadData(path, inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available)
        func anEmptyGzFileFails(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write([UInt8](), to: dir.appendingPathComponent("empty.jsonl.gz"))
                expectBadData(path, containing: "empty", inflater: inflater)
            }
        }

        @Test(arguments: Inflater.available)
        func garbageAfterTheLastMemberFails(inflater: Inflater) throws {
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write(
                    ReadSupport.gzip("{}\n") + Array("garbage".utf8), to: dir.appendingPathComponent("trail.jsonl.gz"))
                expectBadData(path, containing: "trailing", inflater: inflater)
            }
        }

        @Test func anEmptyPlainFileHasNoLines() throws {
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write("", to: dir.appendingPathComponent("empty.jsonl"))
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                #expect(set.counters.rowsRead == 0)
                #expect(set.inputs[0].sha256 == (try ReadSupport.sha256sum(path)))
            }
        }

        @Test(arguments: ["missing.jsonl.gz", "missing.jsonl"])
        func aMissingFileIsNoInput(name: String) throws {
            try ReadSupport.withTempDir { dir in
                let path = dir.appendingPathComponent(name).path
                #expect {
                    _ = try openSource(path: path)
                } throws: { e in
                    (e as? WinBackError)?.code == .noInput && (e as? WinBackError)?.path == path
                }
                #expect {
                    _ = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                } throws: { e in
                    (e as? WinBackError)?.code == .noInput
                }
            }
        }

        @Test func aDirectoryIsNoInput() throws {
            try ReadSupport.withTempDir { dir in
                let sub = dir.appendingPathComponent("folder.jsonl.gz")
                try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
                #expect {
                    _ = try openSource(path: sub.path)
                } throws: { e in
                    (e as? WinBackError)?.code == .noInput
                }
            }
        }

        @Test(arguments: [false, true])
        func aLineLongerThanTheChunkStillParses(gzip: Bool) throws {
            try ReadSupport.withTempDir { dir in
                let blob = String(repeating: "x", count: 3 << 20)
                let text =
                    TxLine(id: "before").json + "\n" + TxLine(id: "long").with("blob", "\"\(blob)\"").json + "\n"
                    + TxLine(id: "after").json + "\n" + "{broken\n"
                let url = dir.appendingPathComponent(gzip ? "long.jsonl.gz" : "long.jsonl")
                let path =
                    gzip ? try ReadSupport.write(ReadSupport.gzip(text), to: url) : try ReadSupport.write(text, to: url)
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                #expect(set.rows.map { set.strings.string($0.transactionId) } == ["before", "long", "after"])
                #expect(set.rejects.map(\.line) == [4])
                #expect(set.inputs[0].uncompressedBytes == text.utf8.count)
            }
        }

        @Test(arguments: [false, true])
        func statsGiveTheFileSizeSHA256AndDecompressedSize(gzip: Bool) throws {
            try ReadSupport.withTempDir { dir in
                // CRLF line ends and no final newline: the decompressed size counts every byte.
                let text =
                    Self.sampleText(lines: 3000).replacingOccurrences(of: "\n", with: "\r\n") + TxLine(id: "last").json
                let url = dir.appendingPathComponent(gzip ? "s.jsonl.gz" : "s.jsonl")
                let path =
                    gzip ? try ReadSupport.write(ReadSupport.gzip(text), to: url) : try ReadSupport.write(text, to: url)
                let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                let stats = try #require(set.inputs.first)
                #expect(stats.path == path)
                #expect(stats.sha256 == (try ReadSupport.sha256sum(path)))
                #expect(stats.sha256.count == 64)
                #expect(stats.bytes == InputFiles.size(path))
                #expect(stats.uncompressedBytes == text.utf8.count)
                #expect(stats.rows == 3001)
                #expect(stats.rejected == 0)
            }
        }
    }
}
