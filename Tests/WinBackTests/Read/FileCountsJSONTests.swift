import Foundation
import Testing

@testable import WinBack
@testable import WinBackRead

/// One record of a file's counts (``FileCounts``) in an incremental state's ledger and in a
/// partition task's marker: both keep the JSON they had when each held its own copy of the
/// fields, so that an existing state and an existing work folder still load (docs/rules.md §8.1,
/// §12).
@Suite("A file's counts in the ledger and the partition markers: the same JSON as before")
struct FileCountsJSONTests {
    /// The ledger's file entry as it was written before it held a ``FileCounts``.
    struct EarlierLedgerFile: Codable {
        var path: String
        var etag: String?
        var identity: [Int64]?
        var stats: InputStats
        var nonSubscription: Int
        var extraRows: Int
        var rows: Int
    }

    /// A partition marker's input as it was written before it held a ``FileCounts``.
    struct EarlierMarkerInput: Codable {
        var file: Int
        var stats: InputStats
        var nonSubscription: Int
        var extraRows: Int
        var rows: Int?
    }

    static let stats = InputStats(
        path: "in/b.ndjson.gz", bytes: 1234, uncompressedBytes: 5678, sha256: String(repeating: "ab", count: 32),
        rows: 41, rejected: 3)
    static let counts = FileCounts(stats: stats, rows: 44, nonSubscription: 2, extraRows: 5)

    /// As ``WorkFolder/writeJSON(_:to:)`` encodes.
    static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    @Test("a ledger entry is written as before, and one written before reads back the same", arguments: [false, true])
    func ledgerFile(object: Bool) throws {
        let earlier = EarlierLedgerFile(
            path: Self.stats.path, etag: object ? "\"9b2cf535f27731c974343645a3985328\"" : nil,
            identity: object ? nil : [2049, 1_311_768, 1_700_000_000, 1234], stats: Self.stats, nonSubscription: 2,
            extraRows: 5, rows: 44)
        let now = StateLedger.File(
            path: earlier.path, etag: earlier.etag, identity: earlier.identity, counts: Self.counts)
        #expect(try Self.json(now) == Self.json(earlier))
        let read = try JSONDecoder().decode(StateLedger.File.self, from: Data(try Self.json(earlier).utf8))
        #expect(read == now)
    }

    @Test("a partition marker's input is written as before, and one written before reads back the same")
    func markerInput() throws {
        let earlier = EarlierMarkerInput(file: 7, stats: Self.stats, nonSubscription: 2, extraRows: 5, rows: 44)
        let now = FileRead(file: 7, counts: Self.counts)
        #expect(try Self.json(now) == Self.json(earlier))
        let read = try JSONDecoder().decode(FileRead.self, from: Data(try Self.json(earlier).utf8))
        #expect(read.file == 7 && read.counts == Self.counts)
    }

    @Test("an entry missing a count, or its own key, does not read")
    func missingKey() throws {
        // One object both read: the ledger's entry with a marker's file index beside.
        let whole = try Self.json(StateLedger.File(path: "a", etag: nil, identity: nil, counts: Self.counts))
        var object = try #require(try JSONSerialization.jsonObject(with: Data(whole.utf8)) as? [String: Any])
        object["file"] = 1
        func reads(_ o: [String: Any]) throws -> (ledger: Bool, marker: Bool) {
            let data = try JSONSerialization.data(withJSONObject: o)
            return (
                (try? JSONDecoder().decode(StateLedger.File.self, from: data)) != nil,
                (try? JSONDecoder().decode(FileRead.self, from: data)) != nil
            )
        }
        #expect(try reads(object) == (true, true))
        for key in ["rows", "stats", "nonSubscription", "extraRows"] {
            var without = object
            without[key] = nil
            #expect(try reads(without) == (false, false), "\(key)")
        }
        var without = object
        without["path"] = nil
        #expect(try reads(without) == (false, true))
        without = object
        without["file"] = nil
        #expect(try reads(without) == (true, false))
    }
}
