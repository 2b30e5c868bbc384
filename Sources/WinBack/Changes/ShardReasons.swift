import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The reasons of the exited rows past one machine (docs/rules.md §10.5, §8.1). A shard holds
/// its customers only, so each shard reads the baseline's segment files, keeps the rows whose
/// customer falls in it by the shard key (``ShardKey``), and writes, for those of its customers
/// who left a segment, a small file of (segment, group, originalTransactionId, reason). Its
/// size and SHA-256 go into the shard's marker, so the merge checks it before it trusts it, as
/// it checks the shard's other files; the merge then joins the segments as a run in memory does
/// and takes each exited row's reason from these files.
enum ShardReasons {
    /// The file, in a shard's folder.
    static let file = "changes-reasons.csv"
    static let columns = ["segment", "subscription_group_id", "original_transaction_id", "reason"]

    /// Writes shard `shard`'s reasons into `directory` (empty but for its header without a
    /// baseline, or when the run writes no changes); returns the file written.
    static func write(
        _ p: ResolvedPipeline, baseline: Baseline?, shard: Int, shards: Int, reasoner: (Baseline) -> ExitReasoner,
        to directory: String
    ) throws -> OutputStats {
        let out = try OutputFile(path: directory + "/" + file)
        try out.write(CSVRecord.header(columns))
        var rows = 0
        if Changes.written(p), let baseline {
            let reasoner = reasoner(baseline)
            let recorded = try BaselineFiles(baseline)
            var rec = CSVRecord()
            for (name, kind) in Changes.segments(p) {
                let rel = "segments/\(name).csv"
                guard let path = try recorded.path(of: rel) else { continue }
                let records = try SegmentRecords(path: path)
                while let row = try records.next() {
                    let mine = row.group.withUnsafeBytes { g in
                        row.original.withUnsafeBytes { o in ShardKey.shard(group: g, original: o, shards: shards) }
                    }
                    guard mine == shard,
                        let reason = reasoner.reasonIfExited(
                            kind, group: row.group, original: row.original, offer: row.offer)
                    else { continue }
                    rec.reset()
                    rec.field(name)
                    rec.field(bytes: row.group)
                    rec.field(bytes: row.original)
                    rec.field(reason)
                    rec.end()
                    try out.write(rec.bytes)
                    rows += 1
                }
                if let expected = recorded.sha256[rel], records.sha256() != expected {
                    throw WinBackError(
                        .badData,
                        "the baseline's segment file differs from the one its manifest recorded (changed since it "
                            + "was published): remove that run or restore the file", path: path)
                }
            }
        }
        let (bytes, sha) = try out.finish()
        return OutputStats(path: file, bytes: bytes, rows: rows, sha256: sha)
    }

    /// Every shard's reasons, by segment and customer. The files were checked against their
    /// markers already (``Merge/checkOutputs(_:_:work:shards:)``); one that is not of this form
    /// is bad data (65) all the same, and a customer given twice, or by a shard it does not fall
    /// in, too.
    static func load(_ paths: [String]) throws -> [String: [SegmentKey: String]] {
        var reasons: [String: [SegmentKey: String]] = [:]
        for (k, path) in paths.enumerated() {
            let records = try SegmentRecords(path: path, columns: columns)
            while let f = try records.nextFields() {
                guard f.count == columns.count else {
                    throw WinBackError(.badData, "row \(records.rows) is not \(columns.count) CSV fields", path: path)
                }
                let key = SegmentKey(group: f[1], original: f[2], offer: [])
                let mine = f[1].withUnsafeBytes { g in
                    f[2].withUnsafeBytes { o in ShardKey.shard(group: g, original: o, shards: paths.count) }
                }
                let segment = String(decoding: f[0], as: UTF8.self)
                guard mine == k,
                    reasons[segment, default: [:]].updateValue(String(decoding: f[3], as: UTF8.self), forKey: key)
                        == nil
                else {
                    throw WinBackError(
                        .badData, "row \(records.rows) names a customer of another shard, or one already given",
                        path: path)
                }
            }
        }
        return reasons
    }
}
