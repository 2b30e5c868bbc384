import Foundation
import WinBackModel
import WinBackSupport
import WinBackWrite

/// How many customers entered, left and changed offer in one segment (docs/rules.md §10.5).
struct SegmentChangeCount: Equatable, Sendable {
    var segment: String
    var entered = 0
    var exited = 0
    var changed = 0
}

/// The changes of one segment file (docs/rules.md §10.5): the merge-join of the baseline's file
/// and tonight's, both in customer order, written as `segments/changes/<S>.csv`.
enum SegmentChanges {
    static let columns = [
        "change", "subscription_group_id", "original_transaction_id", "offer_id", "previous_offer_id", "reason",
    ]

    /// The `change` column's values, as a field's bytes.
    static let entered = CSVRecord.escaped("entered")
    static let changed = CSVRecord.escaped("changed")
    static let exited = CSVRecord.escaped("exited")

    /// Joins `baseline` (nil: no baseline file, everyone entered) with `tonight` and writes the
    /// changes to `out`: `entered`, then `changed`, in tonight's order, then `exited` in the
    /// baseline's, each exited row with `reason(group, original, previous offer)`. The baseline's
    /// file, once read whole, must have the SHA-256 its manifest recorded (`expectedSHA256`,
    /// when it lists the file): a published file changed since is bad data (65).
    static func write(
        segment: String, mayChange: Bool, baseline: String?, expectedSHA256: String?, tonight: String,
        to out: OutputFile, reason: (SegmentKey) throws -> String
    ) throws -> (count: SegmentChangeCount, rows: Int) {
        var count = SegmentChangeCount(segment: segment)
        let now = try SegmentRecords(path: tonight, hashed: false)
        let before = try baseline.map { try SegmentRecords(path: $0) }
        // Entered rows are written as they come (all of tonight's on a first run); changed ones
        // follow them, and exited ones in the baseline's order after those.
        try out.write(CSVRecord.header(columns))
        var changed: [UInt8] = []
        var exited: [SegmentKey] = []
        var rec = CSVRecord()
        func line(_ change: [UInt8], _ k: SegmentKey, offer: [UInt8], previous: [UInt8], reason: String) {
            rec.reset()
            rec.field(escaped: change)
            rec.field(bytes: k.group)
            rec.field(bytes: k.original)
            rec.field(bytes: offer)
            rec.field(bytes: previous)
            rec.field(reason)
            rec.end()
        }
        var hasA = try before?.advance() ?? false
        var hasB = try now.advance()
        while hasA || hasB {
            let c = !hasA ? 1 : !hasB ? -1 : SegmentKey.compare(before!.current, now.current)
            if c < 0 {
                exited.append(before!.current)
                hasA = try before!.advance()
            } else if c > 0 {
                line(Self.entered, now.current, offer: now.current.offer, previous: [], reason: "")
                try out.write(rec.bytes)
                count.entered += 1
                hasB = try now.advance()
            } else {
                if mayChange && before!.current.offer != now.current.offer {
                    line(
                        Self.changed, now.current, offer: now.current.offer, previous: before!.current.offer, reason: ""
                    )
                    changed += rec.bytes
                    count.changed += 1
                }
                hasA = try before!.advance()
                hasB = try now.advance()
            }
        }
        if let before, let expected = expectedSHA256, before.sha256() != expected {
            throw WinBackError(
                .badData,
                "the baseline's segment file differs from the one its manifest recorded (changed since it was "
                    + "published): remove that run or restore the file",
                path: before.path)
        }
        try out.write(changed)
        for k in exited {
            line(Self.exited, k, offer: [], previous: k.offer, reason: try reason(k))
            try out.write(rec.bytes)
        }
        count.exited = exited.count
        return (count, count.entered + count.changed + count.exited)
    }

}
