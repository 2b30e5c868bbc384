import Foundation
import Synchronization
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The shards' reasons as the merge asks for them (docs/rules.md §10.5), never held whole: a
/// segment's exited rows are asked in the baseline's order, and each shard wrote its own in
/// that order, segment by segment (``ShardReasons/write(_:baseline:shard:shards:reasoner:to:)``),
/// so each row's reason is the next record of its shard's file for that segment. A record that
/// is not the row asked for, or is left over once every segment is written, is bad data (65):
/// a customer given by a shard it does not fall in, given twice, or out of order. The files
/// were checked against their markers already (``Merge/checkOutputs(_:_:work:shards:)``).
package final class ShardReasonFiles: Sendable {
    /// The columns of a shard's `changes-reasons.csv`.
    package static let columns = ["segment", "subscription_group_id", "original_transaction_id", "reason"]

    package let paths: [String]
    /// Per segment, per shard: the cursor of that segment's records (segments are written on
    /// several threads, each segment by one), made under the lock.
    private let cursors = Mutex<[String: [Cursor?]]>([:])

    package init(_ paths: [String]) { self.paths = paths }

    /// One shard's records of one segment, in order.
    package final class Cursor: Sendable {
        let segment: [UInt8]
        /// The file and how many of the segment's records were taken: read by the one thread
        /// writing the segment, so the lock is not contended.
        private struct State {
            let records: SegmentRecords
            var taken = 0
        }
        private let state: Mutex<State>

        init(path: String, segment: String) throws {
            state = Mutex(State(records: try SegmentRecords(path: path, columns: ShardReasonFiles.columns)))
            self.segment = Array(segment.utf8)
        }

        var taken: Int { state.withLock { $0.taken } }

        /// The fields of the next record of the segment and the row of the file it is, nil at
        /// the end of the file.
        func next() throws -> (fields: [[UInt8]], row: Int)? {
            try state.withLock { s throws -> (fields: [[UInt8]], row: Int)? in
                while let f = try s.records.nextFields() {
                    guard f.count == ShardReasonFiles.columns.count else {
                        throw WinBackError(
                            .badData, "row \(s.records.rows) is not \(ShardReasonFiles.columns.count) CSV fields",
                            path: s.records.path)
                    }
                    if f[0] == segment {
                        s.taken += 1
                        return (f, s.records.rows)
                    }
                }
                return nil
            }
        }
    }

    private func cursor(_ segment: String, shard: Int) throws -> Cursor {
        try cursors.withLock { cursors throws -> Cursor in
            var row = cursors[segment] ?? Array(repeating: nil, count: paths.count)
            if let c = row[shard] { return c }
            let c = try Cursor(path: paths[shard], segment: segment)
            row[shard] = c
            cursors[segment] = row
            return c
        }
    }

    /// The reason of `row`, which left `segment`: the next record its shard gave for it.
    package func reason(segment: String, _ row: SegmentKey) throws -> String {
        let shard = ShardKey.shard(group: row.group, original: row.original, shards: paths.count)
        let c = try cursor(segment, shard: shard)
        guard let (f, at) = try c.next() else {
            throw WinBackError(
                .software,
                "no shard gave the reason of a customer who left \(segment): "
                    + ControlEscape.escaped(String(decoding: row.group + Array("/".utf8) + row.original, as: UTF8.self)),
                path: paths[shard])
        }
        guard f[1] == row.group, f[2] == row.original else {
            throw WinBackError(
                .badData,
                "row \(at) names a customer of another shard, one already given, or one out of order",
                path: paths[shard])
        }
        return String(decoding: f[3], as: UTF8.self)
    }

    /// Checks that every record of every shard was asked for: read once more, counted by
    /// segment, against what was taken.
    package func finish() throws {
        let cursors = self.cursors.withLock { $0 }
        for (k, path) in paths.enumerated() {
            let records = try SegmentRecords(path: path, columns: ShardReasonFiles.columns)
            var given: [[UInt8]: Int] = [:]
            while let f = try records.nextFields() {
                guard f.count == ShardReasonFiles.columns.count else {
                    throw WinBackError(
                        .badData, "row \(records.rows) is not \(ShardReasonFiles.columns.count) CSV fields", path: path)
                }
                given[f[0], default: 0] += 1
            }
            for (segment, n) in given where n != (cursors[String(decoding: segment, as: UTF8.self)]?[k]?.taken ?? 0) {
                throw WinBackError(
                    .badData,
                    "the reasons of \(ControlEscape.escaped(String(decoding: segment, as: UTF8.self))) name a customer "
                        + "of another shard, one given twice, or one who did not leave",
                    path: path)
            }
        }
    }
}
