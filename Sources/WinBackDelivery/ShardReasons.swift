import Foundation
import WinBackHistory
import WinBackModel
import WinBackPipeline
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
package enum ShardReasons {
    /// The file, in a shard's folder.
    package static let file = "changes-reasons.csv"
    package static let columns = ShardReasonFiles.columns

    /// Writes shard `shard`'s reasons into `directory` (empty but for its header without a
    /// baseline, or when the run writes no changes); returns the file written.
    package static func write(
        _ p: ResolvedPipeline, baseline: Baseline?, shard: Int, shards: Int, reasoner: (Baseline) -> ExitReasoner,
        to directory: String
    ) throws -> OutputStats {
        let out = try OutputFile(path: directory + "/" + file)
        try out.write(CSVRecord.header(columns))
        var rows = 0
        if Changes.written(p), let baseline {
            let reasoner = reasoner(baseline)
            let recorded = try BaselineFiles(baseline, memory: p.memoryLimit)
            var rec = CSVRecord()
            for (name, kind) in Changes.segments(p) {
                let rel = "segments/\(name).csv"
                guard let path = try recorded.path(of: rel) else { continue }
                let records = try SegmentRecords(path: path)
                while let row = try records.next() {
                    let mine = ShardKey.shard(group: row.group, original: row.original, shards: shards)
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

}
