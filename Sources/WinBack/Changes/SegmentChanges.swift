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
    /// The exited rows by reason (docs/rules.md §10.5), for the first screen.
    var reasons: [String: Int] = [:]
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
    /// baseline's, each exited row with `reason(group, original, previous offer)`, asked in the
    /// baseline's order. The baseline's file, once read whole, must have the SHA-256 its
    /// manifest recorded (`expectedSHA256`, when it lists the file): a published file changed
    /// since is bad data (65), found before any reason is asked.
    ///
    /// The changed lines and the exited rows wait in two files of the run's own (`spill` +
    /// `.changed` and `.exited`, made anew and removed once read back, each checked whole
    /// before it is read), so a night on which a million customers leave holds none of them in
    /// memory (docs/rules.md §6.2).
    static func write(
        segment: String, mayChange: Bool, baseline: String?, expectedSHA256: String?, tonight: String?,
        to out: OutputFile, spill: String, reason: (SegmentKey) throws -> String
    ) throws -> (count: SegmentChangeCount, rows: Int) {
        var count = SegmentChangeCount(segment: segment)
        // No file tonight (an offer that left the catalog): everyone in the baseline's exits.
        let now = try tonight.map { try SegmentRecords(path: $0, hashed: false) }
        let before = try baseline.map { try SegmentRecords(path: $0) }
        // Entered rows are written as they come (all of tonight's on a first run); changed ones
        // follow them, and exited ones in the baseline's order after those.
        try out.write(CSVRecord.header(columns))
        let changedPath = spill + ".changed"
        let exitedPath = spill + ".exited"
        defer {
            System.unlinkIfPresent(changedPath)
            System.unlinkIfPresent(exitedPath)
        }
        let changed = try IntermediateWriter(path: changedPath)
        let exited = try IntermediateWriter(path: exitedPath)
        var key: [UInt8] = []
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
        var hasB = try now?.advance() ?? false
        while hasA || hasB {
            let c = !hasA ? 1 : !hasB ? -1 : SegmentKey.compare(before!.current, now!.current)
            if c < 0 {
                key.removeAll(keepingCapacity: true)
                for field in [before!.current.group, before!.current.original, before!.current.offer] {
                    SpilledKeys.append(field, to: &key)
                }
                try exited.write(key)
                count.exited += 1
                hasA = try before!.advance()
            } else if c > 0 {
                line(Self.entered, now!.current, offer: now!.current.offer, previous: [], reason: "")
                try out.write(rec.bytes)
                count.entered += 1
                hasB = try now!.advance()
            } else {
                if mayChange && before!.current.offer != now!.current.offer {
                    line(
                        Self.changed, now!.current, offer: now!.current.offer, previous: before!.current.offer,
                        reason: ""
                    )
                    try changed.write(rec.bytes)
                    count.changed += 1
                }
                hasA = try before!.advance()
                hasB = try now!.advance()
            }
        }
        if let before, let expected = expectedSHA256, before.sha256() != expected {
            throw WinBackError(
                .badData,
                "the baseline's segment file differs from the one its manifest recorded (changed since it was "
                    + "published): remove that run or restore the file",
                path: before.path)
        }
        let (changedBytes, _, changedSHA) = try changed.finish()
        let copy = try IntermediateReader(path: changedPath, bytes: changedBytes, sha256: changedSHA)
        var left = changedBytes
        while left > 0 {
            let n = min(left, 64 << 10)
            try out.write(Array(try copy.bytes(n)))
            left -= n
        }
        let (exitedBytes, _, exitedSHA) = try exited.finish()
        let keys = try IntermediateReader(path: exitedPath, bytes: exitedBytes, sha256: exitedSHA)
        for _ in 0..<count.exited {
            let k = SegmentKey(
                group: try SpilledKeys.next(keys), original: try SpilledKeys.next(keys),
                offer: try SpilledKeys.next(keys))
            let why = try reason(k)
            count.reasons[why, default: 0] += 1
            line(Self.exited, k, offer: [], previous: k.offer, reason: why)
            try out.write(rec.bytes)
        }
        return (count, count.entered + count.changed + count.exited)
    }

}

/// The exited rows' keys as a segment's changes spill them: each field a 4-byte length (little
/// endian) and its bytes.
enum SpilledKeys {
    static func append(_ field: [UInt8], to out: inout [UInt8]) {
        for shift in [0, 8, 16, 24] { out.append(UInt8(truncatingIfNeeded: field.count >> shift)) }
        out.append(contentsOf: field)
    }

    static func next(_ r: IntermediateReader) throws -> [UInt8] {
        let b = Array(try r.bytes(4))
        let n = Int(b[0]) | Int(b[1]) << 8 | Int(b[2]) << 16 | Int(b[3]) << 24
        return Array(try r.bytes(n))
    }
}
