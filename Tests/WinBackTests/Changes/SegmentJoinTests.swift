import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackDelivery
@testable import WinBackModel
@testable import WinBackSupport
@testable import WinBackWrite

/// The merge-join of two segment files (docs/rules.md §10.5) on files written by hand: ids that
/// need quoting, a line break inside a field, and files that are not what they claim.
@Suite("Segment changes: the join of two segment files")
struct SegmentJoinTests {
    /// A segment CSV of `rows` (group, id, offer), the other columns filled.
    static func segment(_ rows: [(String, String, String)]) -> String {
        var rec = CSVRecord()
        var out = CSVRecord.header(SegmentWriter.columns)
        for (g, o, f) in rows {
            rec.reset()
            for v in [g, o, "", "USA", "p", "3", "", "", "2", f, "1", f, "", ""] { rec.field(v) }
            rec.end()
            out += rec.bytes
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func file(_ text: String) throws -> String {
        let path = Paths.temporary() + "/\(UUID().uuidString).csv"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func join(baseline: String?, tonight: String, mayChange: Bool = true) throws -> [[String]] {
        let out = Paths.temporary() + "/changes-\(UUID().uuidString).csv"
        let f = try OutputFile(path: out)
        _ = try SegmentChanges.write(
            segment: "best-offer", mayChange: mayChange, baseline: try baseline.map(file), expectedSHA256: nil,
            tonight: FileRows(path: try file(tonight)), to: f
        ) { "r:" + String(decoding: $0.original, as: UTF8.self) }
        _ = try f.finish()
        let records = try SegmentRecords(path: out, columns: SegmentChanges.columns)
        var rows: [[String]] = []
        while let r = try records.nextFields() { rows.append(r.map { String(decoding: $0, as: UTF8.self) }) }
        return rows
    }

    /// Tonight's rows of every list read from one segment file, as written by hand.
    struct FileRows: SegmentSource {
        let path: String
        func forEachRow(of name: String, keysOnly: Bool, _ body: (SegmentRow) throws -> Void) throws {
            let records = try SegmentRecords(path: path, hashed: false)
            var row = SegmentRow()
            while let fields = try records.nextFields() {
                row.fill(fields: fields)
                try body(row)
            }
        }
    }

    @Test("tonight's rows out of customer order, or a customer twice, are 65: the join would be wrong")
    func tonightOutOfOrder() throws {
        for bad in [
            Self.segment([("g", "2", "a"), ("g", "1", "a")]), Self.segment([("g", "1", "a"), ("g", "1", "b")]),
            Self.segment([("h", "1", "a"), ("g", "9", "a")]),
        ] {
            #expect {
                try Self.join(baseline: Self.segment([("g", "1", "a")]), tonight: bad)
            } throws: { e in
                (e as? WinBackError)?.code == .badData
            }
        }
    }

    @Test("RFC 4180 fields: commas, doubled quotes and line breaks inside quotes; a stray quote is refused")
    func split() {
        #expect(
            SegmentRecords.split(Array("a,\"b,\"\"c\"\"\nd\",,e".utf8))?.map { String(decoding: $0, as: UTF8.self) }
                == ["a", "b,\"c\"\nd", "", "e"])
        #expect(SegmentRecords.split(Array("a,b\"c".utf8)) == nil)
        #expect(SegmentRecords.split(Array("\"a\"b".utf8)) == nil)
        #expect(SegmentRecords.split(Array("\"open".utf8)) == nil)
    }

    @Test("entered and changed in tonight's order, exited in the baseline's, ids that need quoting kept whole")
    func hostileIds() throws {
        let odd = "7,\"x\"\nline"
        let baseline = Self.segment([("g", "1", "a"), ("g", "3", "a"), ("g", "5", "a"), ("g", odd, "a")])
        let tonight = Self.segment([("g", "1", "b"), ("g", "2", "a"), ("g", "5", "a"), ("h", "0", "a")])
        let rows = try Self.join(baseline: baseline, tonight: tonight)
        #expect(
            rows == [
                ["entered", "g", "2", "a", "", ""], ["entered", "h", "0", "a", "", ""],
                ["changed", "g", "1", "b", "a", ""],
                ["exited", "g", "3", "", "a", "r:3"], ["exited", "g", odd, "", "a", "r:\(odd)"],
            ])
        // A per-offer segment: the same offer on both nights, never changed.
        #expect(try Self.join(baseline: baseline, tonight: tonight, mayChange: false).allSatisfy { $0[0] != "changed" })
        // No baseline: everyone entered; nothing changed: the header alone.
        #expect(try Self.join(baseline: nil, tonight: tonight).map { $0[0] } == Array(repeating: "entered", count: 4))
        #expect(try Self.join(baseline: tonight, tonight: tonight).isEmpty)
    }

    @Test("a baseline not in customer order, with a customer twice, another header or a short row is 65")
    func notASegment() throws {
        let tonight = Self.segment([("g", "1", "a")])
        for bad in [
            Self.segment([("g", "2", "a"), ("g", "1", "a")]), Self.segment([("g", "1", "a"), ("g", "1", "b")]),
            "subscription_group_id,original_transaction_id\ng,1\n", Self.segment([]) + "g,1,a\n", "",
            Self.segment([]) + "g,\"1\n",
            // Out of order across a quoted row and a plain one, each way.
            Self.segment([("g", "7,\"x\"", "a"), ("g", "1", "a")]),
            Self.segment([("g", "8", "a"), ("g", "7,\"x\"", "a")]),
        ] {
            #expect {
                try Self.join(baseline: bad, tonight: tonight)
            } throws: { e in
                (e as? WinBackError)?.code == .badData && (e as? WinBackError)?.path != nil
            }
        }
    }

    @Test("the shards' reasons, read as asked: a customer given by another shard, twice or out of order is 65")
    func shardReasons() throws {
        func reasons(_ rows: [[String]]) throws -> String {
            var out = CSVRecord.header(ShardReasons.columns)
            var rec = CSVRecord()
            for r in rows {
                rec.reset()
                for v in r { rec.field(v) }
                rec.end()
                out += rec.bytes
            }
            return try Self.file(String(decoding: out, as: UTF8.self))
        }
        func key(_ id: String) -> SegmentKey { SegmentKey(group: Array("g".utf8), original: Array(id.utf8), offer: []) }
        func badData(_ body: () throws -> Void) {
            #expect {
                try body()
            } throws: { e in
                (e as? WinBackError)?.code == .badData
            }
        }
        let ids = (0..<100).map(String.init).filter { ShardKey.shard(group: "g", original: $0, shards: 2) == 1 }
        let (id, other) = (ids[0], ids[1])
        let empty = try reasons([])
        // Two segments, each in the baseline's order: asked as the merge asks, then nothing left.
        let good = try reasons([
            ["best-offer", "g", id, "returned"], ["best-offer", "g", other, "too_long_ago"],
            ["wb.a", "g", id, "returned"],
        ])
        let files = ShardReasonFiles([empty, good])
        #expect(try files.reason(segment: "wb.a", key(id)) == "returned")
        #expect(try files.reason(segment: "best-offer", key(id)) == "returned")
        #expect(try files.reason(segment: "best-offer", key(other)) == "too_long_ago")
        try files.finish()
        // Given by the shard it does not fall in: never asked of that shard, left over.
        badData { try ShardReasonFiles([good, empty]).finish() }
        // Given twice: the second is left over.
        let twice = ShardReasonFiles([
            empty, try reasons([["best-offer", "g", id, "a"], ["best-offer", "g", id, "b"]]),
        ])
        #expect(try twice.reason(segment: "best-offer", key(id)) == "a")
        badData { try twice.finish() }
        // Out of the baseline's order: the record is not the row asked for.
        let swapped = ShardReasonFiles([
            empty, try reasons([["best-offer", "g", other, "a"], ["best-offer", "g", id, "b"]]),
        ])
        badData { _ = try swapped.reason(segment: "best-offer", key(id)) }
        // A row no shard gave: the run's own fault (70).
        #expect {
            _ = try ShardReasonFiles([empty, empty]).reason(segment: "best-offer", key(id))
        } throws: { e in
            (e as? WinBackError)?.code == .software
        }
    }
}
