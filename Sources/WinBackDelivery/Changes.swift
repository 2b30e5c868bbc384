import Crypto
import Foundation
import WinBackHistory
import WinBackModel
import WinBackPipeline
import WinBackSupport
import WinBackWrite

/// What a run's changes were computed against and what they counted (docs/rules.md §10.5): the
/// manifest's `changes`, the metrics' `winback_segment_changes` and the log's line.
package struct ChangesSummary: Sendable {
    /// The published run compared with; nil: none (everyone entered).
    package var baseline: Baseline?
    /// Per segment file written, in the order of the segments.
    package var segments: [SegmentChangeCount]

    /// The log line's fields (`--log-format json`): per segment, never summed over segments
    /// that overlap (a customer is in an offer's segment and in best-offer; docs/rules.md §10.10).
    package var fields: [String: Any] {
        [
            "baseline": baseline?.date ?? "",
            "segments": segments.map {
                ["segment": $0.segment, "entered": $0.entered, "exited": $0.exited, "changed": $0.changed]
                    as [String: Any]
            },
        ]
    }

    /// The log's line: best-offer first (each customer once), then every other segment with a
    /// change.
    package var line: String {
        let against = baseline.map { "against \($0.date)" } ?? "(no earlier run: everyone entered)"
        func counts(_ s: SegmentChangeCount) -> String {
            "\(s.segment) \(s.entered) entered, \(s.exited) exited"
                + (s.changed > 0 ? ", \(s.changed) changed offer" : "")
        }
        let best = segments.filter { $0.segment == "best-offer" }
        let others = segments.filter { $0.segment != "best-offer" && ($0.entered + $0.exited + $0.changed) > 0 }
        let quiet = segments.count - best.count - others.count
        return "changes \(against): " + (best + others).map(counts).joined(separator: "; ")
            + (quiet > 0 ? "; \(counted(quiet, "other segment")) unchanged" : "")
    }
}

/// What changed since the last published run (docs/rules.md §10.5): for every segment file a
/// run writes, `segments/changes/<S>.csv`, computed from tonight's segment lists (as a run holds
/// them, or as a merge merges them: ``SegmentSource``) and the baseline's published files, so
/// runs in memory, memory-bounded runs, array jobs and incremental nights write the same bytes. The reasons of the rows that left come from
/// tonight's evaluation: of the run's customers (``ExitReasoner``), or, past one machine, from
/// the shards that hold them (``ShardReasons``).
package enum Changes {
    /// The folder of the changes, in a run's folder.
    package static let folder = "segments/changes"

    /// The baseline of a run of `p` (``Baseline/find(root:before:)``).
    package static func baseline(_ p: ResolvedPipeline) throws -> Baseline? {
        try Baseline.find(
            root: p.outputDirectory + "/" + p.config.name, name: p.config.name, before: Timestamp.date(p.asOf),
            memory: p.memoryLimit)
    }

    /// The segment files a run of `p` writes, by name, with their kinds.
    package static func segments(_ p: ResolvedPipeline) -> [(name: String, kind: SegmentKind)] {
        let ids = p.catalog.offers.map(\.offerId)
        var named: [(name: String, kind: SegmentKind)] = []
        for (i, id) in ids.enumerated() where !named.contains(where: { $0.name == id }) {
            named.append((id, .offer(i)))
        }
        named.append(("best-offer", .best))
        if p.config.experiment != nil { named.append((SegmentWriter.holdout, .holdout)) }
        return named
    }

    /// Whether a run of `p` writes changes: its segments in CSV, the format they are joined in.
    package static func written(_ p: ResolvedPipeline) -> Bool { p.config.formats.contains("csv") }

    /// Writes the changes of every segment of `tonight` into `directory` against `baseline`;
    /// `reason(segment, kind, row)` gives an exited row's reason. Returns the files written and
    /// what they counted.
    package static func write(
        _ p: ResolvedPipeline, tonight source: SegmentSource, baseline: Baseline?, to directory: String,
        sync: DiskSync?, reason: @escaping @Sendable (String, SegmentKind, SegmentKey) throws -> String
    ) throws -> (outputs: [OutputStats], summary: ChangesSummary) {
        guard written(p) else { return ([], ChangesSummary(baseline: baseline, segments: [])) }
        try OutputFile.makeFolder(directory + "/" + folder)
        let tonight = self.segments(p)
        let recorded = try baseline.map { try BaselineFiles($0, memory: p.memoryLimit) }
        // Offers that left the catalog since the baseline: everyone in their segment exits
        // (docs/rules.md §6.3), after tonight's segments.
        let removed = recorded.map { removedOffers($0, tonight: tonight.map(\.name)) } ?? []
        let segments: [(name: String, kind: SegmentKind?)] =
            tonight.map { ($0.name, $0.kind) } + removed.map { ($0, nil) }
        let slots = ResultSlots<(OutputStats, SegmentChangeCount)>(count: segments.count)
        // The largest segment first (best-offer, most nights): the others fill in beside it.
        let sizes = segments.map { System.fileSize(directory + "/segments/\($0.name).csv") ?? 0 }
        let order = segments.indices.sorted { sizes[$0] != sizes[$1] ? sizes[$0] > sizes[$1] : $0 < $1 }
        try parallelFor(count: segments.count, threads: p.threads, order: order) { j in
            let (name, kind) = segments[j]
            let rel = "segments/\(name).csv"
            let before = try recorded?.path(of: rel)
            let out = try OutputFile(path: directory + "/\(folder)/\(name).csv", sync: sync)
            let (count, rows) = try SegmentChanges.write(
                segment: name, mayChange: kind?.offerMayChange ?? false, baseline: before,
                expectedSHA256: recorded?.sha256[rel], tonight: kind == nil ? nil : source, to: out
            ) { row in
                guard let kind else { return offerRemoved }
                return try reason(name, kind, row)
            }
            let (bytes, sha) = try out.finish()
            slots[j] = (OutputStats(path: "\(folder)/\(name).csv", bytes: bytes, rows: rows, sha256: sha), count)
        }
        let all = slots.all
        return (all.map(\.0), ChangesSummary(baseline: baseline, segments: all.map(\.1)))
    }

    /// The reason of every row of a segment whose offer left the catalog (docs/rules.md §6.3).
    package static let offerRemoved = "offer_removed"

    /// The offers whose segment the baseline published and tonight's run does not (retired or
    /// renamed: docs/rules.md §6.3), by name: `segments/<offer>.csv` its manifest lists, other
    /// than best-offer and the holdout.
    package static func removedOffers(_ baseline: BaselineFiles, tonight: [String]) -> [String] {
        baseline.sha256.keys.compactMap { path -> String? in
            guard path.hasPrefix("segments/"), path.hasSuffix(".csv") else { return nil }
            let name = String(path.dropFirst("segments/".count).dropLast(4))
            guard !name.isEmpty, !name.contains("/"), !tonight.contains(name), name != "best-offer",
                name != SegmentWriter.holdout
            else { return nil }
            return name
        }.sorted()
    }

    /// Writes the changes of a run in memory against `baseline` (``baseline(_:)``, found once
    /// per run): the reasons from its customers and their evaluation.
    package static func write(
        _ p: ResolvedPipeline, tonight: SegmentSource, baseline: Baseline?, reasoner: (Baseline) -> ExitReasoner,
        to directory: String, sync: DiskSync?
    ) throws -> (outputs: [OutputStats], summary: ChangesSummary) {
        let r = baseline.map(reasoner)
        return try write(p, tonight: tonight, baseline: baseline, to: directory, sync: sync) { _, kind, row in
            guard let r else { throw WinBackError(.software, "an exited row without a baseline") }
            return r.reason(kind, group: row.group, original: row.original, offer: row.offer)
        }
    }
}
