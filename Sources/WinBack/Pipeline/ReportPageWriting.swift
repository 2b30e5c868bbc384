import WinBackDelivery
import WinBackModel
import WinBackRules
import WinBackSupport
import WinBackWrite

extension Manifest {
    /// The first screen of report.html (docs/rules.md §4.3) from what this run counted and wrote:
    /// the funnel's eligible, the rows the experiment and Apple's word left out, the segment
    /// files' rows (in `outputs`), what each destination received, and who entered, changed
    /// offer and exited each segment since the baseline run. A run in memory and a merge record
    /// the same, so they write the same page.
    ///
    /// best-offer's eligible are the customers eligible for some offer: its rows, the held-out
    /// rows of holdout and those Apple's word left out.
    func firstScreen(_ p: ResolvedPipeline, outputs: [OutputStats]) -> FirstScreen {
        let format = p.config.formats.first ?? "csv"
        func segmentRows(_ list: String) -> Int {
            outputs.first { $0.path == "segments/\(list).\(format)" }?.rows ?? 0
        }
        func count(_ pairs: [(String, Int)], _ list: String) -> Int { pairs.first { $0.0 == list }?.1 ?? 0 }
        let rows = (p.catalog.offers.map(\.offerId) + ["best-offer"]).enumerated().map { k, list in
            let best = k == p.catalog.offers.count
            let held = count(heldOut, list)
            let dropped = count(droppedByApple, list)
            let inSegment = segmentRows(list)
            return FirstScreen.Row(
                segment: list, eligible: best ? held + dropped + inSegment : count(eligible, list), heldOut: held,
                leftOutByApple: dropped, inSegment: inSegment,
                deliveries: destinations.map { d in
                    guard (d.audience == .bestOffer) == best else { return nil }
                    return FirstScreen.Delivery(
                        addressable: d.rowsByList[list] ?? 0, unaddressable: d.unaddressableByList[list] ?? 0,
                        folded: d.foldedByList[list] ?? 0, withoutLink: d.withoutLinkByList[list] ?? 0)
                }, changes: changes(of: list))
        }
        return FirstScreen(
            destinations: destinations.map {
                FirstScreen.Destination(name: $0.type.rawValue, bestOffer: $0.audience == .bestOffer)
            }, rows: rows, requireApple: requireApple != .off, baseline: changes?.baseline?.date,
            headlines: destinations.map {
                FirstScreen.Headline(
                    name: $0.type.rawValue, lists: $0.audience == .bestOffer ? "best-offer" : "per offer",
                    reachable: $0.rows, exited: $0.exited, unaddressable: $0.unaddressable, folded: $0.folded,
                    withoutLink: $0.withoutLink)
            },
            offersWithoutLink: destinations.isEmpty
                ? [] : p.catalog.offers.filter { ($0.appleId ?? "").isEmpty }.map(\.offerId))
    }

    /// The segment changes of `list` since the baseline run (docs/rules.md §10.5); nil without
    /// a baseline, or when the run wrote no changes.
    func changes(of list: String) -> FirstScreen.Changes? {
        guard let summary = changes, summary.baseline != nil,
            let c = summary.segments.first(where: { $0.segment == list })
        else { return nil }
        let reasons = c.reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
        return FirstScreen.Changes(
            entered: c.entered, changed: c.changed, exited: c.exited,
            reasons: reasons.map { (reason: $0.key, customers: $0.value) })
    }
}

extension Stage {
    /// Writes report.html once the segments and the destinations' files are written, since its
    /// first screen counts them (docs/rules.md §4.3); its entry goes in `outputs` at `index`,
    /// right after the other report files', where it always was.
    static func writePage(
        _ reports: Reports, _ p: ResolvedPipeline, manifest: Manifest, outputs: inout [OutputStats], at index: Int,
        to directory: String, sync: DiskSync
    ) throws {
        let first = manifest.firstScreen(p, outputs: outputs)
        let page = try ReportWriter(reports: reports, title: p.config.name, firstScreen: first).writePage(
            to: directory, sync: sync)
        outputs.insert(page, at: index)
    }
}
