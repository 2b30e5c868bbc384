import Foundation
import WinBackModel
import WinBackSupport
import WinBackWrite

/// How many customers entered, left and changed offer in one segment (docs/rules.md §10.5).
package struct SegmentChangeCount: Equatable, Sendable {
    package var segment: String
    package var entered = 0
    package var exited = 0
    package var changed = 0
    /// The exited rows by reason (docs/rules.md §10.5), for the first screen.
    package var reasons: [String: Int] = [:]
}

/// The changes of one segment file (docs/rules.md §10.5): the merge-join of the baseline's file
/// and tonight's, both in customer order, written as `segments/changes/<S>.csv`.
package enum SegmentChanges {
    package static let columns = [
        "change", "subscription_group_id", "original_transaction_id", "offer_id", "previous_offer_id", "reason",
    ]

    /// The `change` column's values, as a field's bytes.
    package static let entered = CSVRecord.escaped("entered")
    package static let changed = CSVRecord.escaped("changed")
    package static let exited = CSVRecord.escaped("exited")

    /// Joins `baseline` (nil: no baseline file, everyone entered) with tonight's rows of list
    /// `segment` in `tonight` (nil: an offer that left the catalog, no rows) and writes the
    /// changes to `out`: `entered`, then `changed`, in tonight's order, then `exited` in the
    /// baseline's, each exited row with `reason(group, original, previous offer)`, asked in the
    /// baseline's order. The baseline's file, read whole, must have the SHA-256 its manifest
    /// recorded (`expectedSHA256`, when it lists the file): a published file changed since is
    /// bad data (65), found before any reason is asked.
    ///
    /// Nothing is held and nothing written aside: the join is walked once for the entered rows
    /// and the counts, again for the changed rows when there are any, and again for the exited
    /// ones, so a night on which a million customers leave holds none of them in memory
    /// (docs/rules.md §6.2), and the run reads back no file it wrote.
    package static func write(
        segment: String, mayChange: Bool, baseline: String?, expectedSHA256: String?, tonight: SegmentSource?,
        to out: OutputFile, reason: (SegmentKey) throws -> String
    ) throws -> (count: SegmentChangeCount, rows: Int) {
        var count = SegmentChangeCount(segment: segment)
        let join = SegmentJoin(segment: segment, baseline: baseline, expectedSHA256: expectedSHA256, tonight: tonight)
        try out.write(CSVRecord.header(columns))
        var rec = CSVRecord()
        func line(
            _ change: [UInt8], group: [UInt8], original: [UInt8], offer: [UInt8], previous: [UInt8], reason: String
        ) {
            rec.reset()
            rec.field(escaped: change)
            rec.field(bytes: group)
            rec.field(bytes: original)
            rec.field(bytes: offer)
            rec.field(bytes: previous)
            rec.field(reason)
            rec.end()
        }
        // Entered rows as they come (all of tonight's on a first run); the others counted.
        try join.walk(
            entered: { row in
                line(Self.entered, group: row.group, original: row.original, offer: row.offer, previous: [], reason: "")
                try out.write(rec.bytes)
                count.entered += 1
            },
            both: { before, row in if mayChange && before.offer != row.offer { count.changed += 1 } },
            exited: { _ in count.exited += 1 })
        if count.changed > 0 {
            try join.walk(
                entered: { _ in },
                both: { before, row in
                    guard before.offer != row.offer else { return }
                    line(
                        Self.changed, group: row.group, original: row.original, offer: row.offer,
                        previous: before.offer, reason: "")
                    try out.write(rec.bytes)
                }, exited: { _ in })
        }
        if count.exited > 0 {
            try join.walk(
                entered: { _ in }, both: { _, _ in },
                exited: { k in
                    let why = try reason(k)
                    count.reasons[why, default: 0] += 1
                    line(Self.exited, group: k.group, original: k.original, offer: [], previous: k.offer, reason: why)
                    try out.write(rec.bytes)
                })
        }
        return (count, count.entered + count.changed + count.exited)
    }
}

/// The merge-join of a baseline's segment file and tonight's rows of the same list, both in
/// customer order (docs/rules.md §10.5), walked as often as the changes need: each walk reads
/// the baseline's file anew and checks it whole against its manifest's SHA-256, and checks
/// tonight's rows to be in customer order, strictly.
package struct SegmentJoin {
    package let segment: String
    package let baseline: String?
    package let expectedSHA256: String?
    package let tonight: SegmentSource?

    /// Calls `entered` for a row of tonight's only, `both` for a customer in both (the
    /// baseline's row first), `exited` for a row of the baseline's only, in customer order.
    package func walk(
        entered: (SegmentRow) throws -> Void, both: (SegmentKey, SegmentRow) throws -> Void,
        exited: (SegmentKey) throws -> Void
    ) throws {
        let before = try baseline.map { try SegmentRecords(path: $0) }
        var hasA = try before?.advance() ?? false
        // Tonight's row before this one (its arrays refilled in place); none yet before the first.
        var last = SegmentRow()
        var first = true
        try tonight?.forEachRow(of: segment, keysOnly: true) { row in
            guard first || SegmentRow.compare(group: last.group, last.original, group: row.group, row.original) < 0
            else {
                throw WinBackError(
                    .badData, "tonight's rows of segment \(segment) are not in customer order (docs/rules.md §4.1)")
            }
            first = false
            last.group.replaceSubrange(last.group.indices, with: row.group)
            last.original.replaceSubrange(last.original.indices, with: row.original)
            while hasA, let a = before?.current,
                SegmentRow.compare(group: a.group, a.original, group: row.group, row.original) < 0
            {
                try exited(a)
                hasA = try before!.advance()
            }
            if hasA, let a = before?.current,
                SegmentRow.compare(group: a.group, a.original, group: row.group, row.original) == 0
            {
                try both(a, row)
                hasA = try before!.advance()
            } else {
                try entered(row)
            }
        }
        while hasA {
            try exited(before!.current)
            hasA = try before!.advance()
        }
        if let before, let expected = expectedSHA256, before.sha256() != expected {
            throw WinBackError(
                .badData,
                "the baseline's segment file differs from the one its manifest recorded (changed since it was "
                    + "published): remove that run or restore the file",
                path: before.path)
        }
    }
}
