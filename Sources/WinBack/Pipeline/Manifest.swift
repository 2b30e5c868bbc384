import Foundation
import WinBackHistory
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackWrite

/// `manifest.json` (docs/rules.md §4.4): what a run read, counted, wrote and how long each stage took.
/// Paths are written escaped (``ControlEscape/name(_:)``, §6.2): a name's control bytes and
/// bytes that are not UTF-8 as `\xHH`, so the manifest is valid JSON that names each file.
public struct Manifest {
    public var pipeline = ""
    public var asOf: Int64 = 0
    public var started = Date()
    public var finished = Date()
    public var status = "succeeded"
    public var error: String?
    public var threads = 1
    /// The library that inflated `.gz` inputs.
    public var inflater = "zlib"
    public var inputs: [InputStats] = []
    public var renewalInputs: [InputStats] = []
    public var counters = ReadCounters()
    public var renewalRejected = 0
    public var states = CustomerStates()
    public var eligible: [(String, Int)] = []
    /// `audience.requireApple`, and the segment rows it left out: per catalog offer, then the
    /// best-offer list (docs/rules.md §4.5).
    public var requireApple = AppleRequirement.off
    public var droppedByApple: [(String, Int)] = []
    /// The experiment, and the segment rows it held out: per catalog offer, then best-offer
    /// (docs/rules.md §9.1).
    public var experiment: Experiment?
    public var heldOut: [(String, Int)] = []
    /// `money:` and what the reports found of amounts (docs/rules.md §13.1).
    public var money: MoneySettings?
    public var amounts = MoneyCounts()
    /// The catalog's `targetSubscriptionPlanType` by offer id, where given (docs/rules.md §13.4).
    public var planTypes: [String: String] = [:]
    /// What each destination received, and what the identities file held (docs/rules.md §10).
    public var destinations: [DestinationCount] = []
    public var identities: IdentityCount?
    public var outputs: [OutputStats] = []
    public var stages: [(String, Double)] = []
    /// The transactions' format, and for signed inputs how they were verified.
    public var format = InputFormat.appstoreNDJSON
    public var signed: SignedReading?
    /// A memory-bounded run: its limit, the shards it chose, and the peak resident memory the
    /// process kept (docs/rules.md §8.1).
    public var memory: (limit: Int, shards: Int, peakResidentBytes: Int)?
    /// An incremental run: how it used its state, files read and taken from it, rows kept
    /// (docs/rules.md §12).
    public var incremental: IncrementalSummary?
    /// What changed since the baseline run, per segment (docs/rules.md §10.5); nil: no changes
    /// were written (a run whose segments are not in CSV).
    var changes: ChangesSummary?
    /// What `output.keep` removes of the runs before this one (docs/rules.md §10.6); nil: every
    /// run is kept.
    var pruned: PrunePlan?

    public init() {}

    /// A manifest for a run of `p` that started at `started`.
    init(_ p: ResolvedPipeline, started: Date) {
        pipeline = p.config.name
        asOf = p.asOf
        self.started = started
        threads = p.threads
        inflater = p.inflater.rawValue
        format = p.config.format
        signed = p.signed
        experiment = p.config.experiment
        money = p.config.money
        etags = Dictionary(
            (p.transactionInputs + p.renewalInputs).compactMap { i in i.identity.etag.map { (i.path, $0) } },
            uniquingKeysWith: { a, _ in a })
    }

    /// Each object input's ETag as it was resolved, by its URI (docs/rules.md §11).
    var etags: [String: String] = [:]

    /// After a failure: the manifest says why, and it and the rejects are kept in the failed
    /// folder (docs/rules.md §6) while the published runs stay as they were.
    mutating func failed(_ error: Error, rejects: RejectList, folder: String, publisher: Publisher) {
        status = "failed"
        self.error = SystemError.words(error)
        finished = Date()
        publisher.fail(keeping: [
            ("rejects.csv", RejectsWriter.bytes(rejects, relativeTo: folder)), ("manifest.json", json()),
        ])
    }

    /// What the read stage read and counted.
    mutating func record(_ inputs: Inputs) {
        self.inputs = inputs.transactions.inputs
        counters = inputs.transactions.counters
        renewalInputs = inputs.renewalStats
        renewalRejected = inputs.renewalRejects.total
    }

    /// What the evaluate stage found, and what Apple's word leaves out of the segments.
    mutating func record(_ audience: Audience, catalog: OfferCatalog, requireApple: AppleRequirement = .off) {
        states = audience.counts
        eligible = zip(catalog.offers, audience.eligibleCounts).map { ($0.offerId, $1) }
        planTypes = Dictionary(
            catalog.offers.compactMap { o in o.targetSubscriptionPlanType.map { (o.offerId, $0) } },
            uniquingKeysWith: { a, _ in a })
        self.requireApple = requireApple
        let dropped = audience.droppedByApple(requireApple, offers: catalog.offers.count)
        droppedByApple = zip(catalog.offers, dropped.perOffer).map { ($0.offerId, $1) } + [("best-offer", dropped.best)]
        let held = audience.heldOut(requireApple, offers: catalog.offers.count)
        heldOut = zip(catalog.offers, held.perOffer).map { ($0.offerId, $1) } + [("best-offer", held.best)]
    }

    /// What the reports found of amounts: rows without one, rows whose currency had no rate.
    mutating func record(amountsOf reports: Reports) { amounts = reports.money }

    /// What the destinations received (docs/rules.md §10.2).
    mutating func record(_ delivered: (outputs: [OutputStats], counts: [DestinationCount], identities: IdentityCount?))
    {
        destinations = delivered.counts
        identities = delivered.identities
    }

    static func iso(_ d: Date) -> String { Timestamp.iso(Int64((d.timeIntervalSince1970 * 1000).rounded())) }

    func input(_ s: InputStats) -> [String: Any] {
        var d: [String: Any] = [
            "path": ControlEscape.name(s.path), "bytes": s.bytes, "uncompressedBytes": s.uncompressedBytes,
            "sha256": s.sha256,
            "rows": s.rows, "rejected": s.rejected,
        ]
        // An object in S3 (docs/rules.md §11): its ETag too.
        if let etag = etags[s.path] { d["etag"] = etag }
        return d
    }

    public func json() -> [UInt8] {
        var d: [String: Any] = [
            "tool": "winback", "toolVersion": ToolVersion.current, "pipeline": pipeline,
            "asOf": Timestamp.iso(asOf), "started": Manifest.iso(started), "finished": Manifest.iso(finished),
            "status": status, "threads": threads, "inflater": inflater,
            "inputs": inputs.map(input), "renewalInputs": renewalInputs.map(input),
            "counters": [
                "rowsRead": counters.rowsRead, "duplicates": counters.duplicates, "sandbox": counters.sandbox,
                "otherEnvironment": counters.otherEnvironment, "lines": counters.lines,
                "nonSubscription": counters.nonSubscription, "familyShared": counters.familyShared,
                "rejected": counters.rejected, "renewalRejected": renewalRejected, "customers": states.customers,
                "active": states.active, "billingRetry": states.billingRetry, "churned": states.churned,
                "notSubscriber": states.notSubscriber,
            ] as [String: Any],
            "eligible": eligible.map { e in
                var entry: [String: Any] = ["offerId": e.0, "customers": e.1]
                if let plan = planTypes[e.0] { entry["targetSubscriptionPlanType"] = plan }
                return entry
            },
            "requireApple": requireApple.rawValue,
            "droppedByRequireApple": droppedByApple.map { ["segment": $0.0, "rows": $0.1] as [String: Any] },
            "outputs": outputs.map {
                ["path": ControlEscape.name($0.path), "bytes": $0.bytes, "rows": $0.rows, "sha256": $0.sha256]
                    as [String: Any]
            },
            "stageSeconds": stages.map { ["stage": $0.0, "seconds": ($0.1 * 1000).rounded() / 1000] as [String: Any] },
        ]
        addBlocks(to: &d)
        // Through JSONEncoder: JSONSerialization's bytes for these keys (docs/rules.md §4.4),
        // at a fraction of its cost at the end of every run.
        let data = JSONValue(any: d).flatMap { try? $0.prettySorted() } ?? Data()
        // Every run of the tests holds it to the writer it replaced.
        assert(
            data == (try? JSONSerialization.data(withJSONObject: d, options: [.prettyPrinted, .sortedKeys])),
            "the manifest's JSON differs from JSONSerialization's")
        return Array(data) + [UInt8(ascii: "\n")]
    }

    /// The blocks a run has or not: error, incremental, changes, pruned, memory, experiment,
    /// money, identities, destinations, format and signatures (keys are sorted when written).
    private func addBlocks(to d: inout [String: Any]) {
        if let error { d["error"] = error }
        if let incremental {
            var block: [String: Any] = [
                "state": incremental.state, "filesRead": incremental.filesRead,
                "filesFromState": incremental.filesFromState, "rowsInState": incremental.rowsInState,
                "read": incremental.read.map(ControlEscape.name),
            ]
            if let reason = incremental.reason { block["reason"] = ControlEscape.escaped(reason) }
            d["incremental"] = block
        }
        if let changes {
            let baseline: Any =
                changes.baseline.map { ["date": $0.date, "manifestSHA256": $0.manifestSHA256] as [String: Any] }
                ?? NSNull()
            d["changes"] =
                [
                    "baseline": baseline,
                    "segments": changes.segments.map {
                        ["segment": $0.segment, "entered": $0.entered, "exited": $0.exited, "changed": $0.changed]
                            as [String: Any]
                    },
                ] as [String: Any]
        }
        if let pruned {
            d["pruned"] =
                ["keepDays": pruned.keepDays, "dates": pruned.dates, "failedRuns": pruned.failed] as [String: Any]
        }
        if let memory {
            d["memory"] = [
                "limitBytes": memory.limit, "shards": memory.shards, "peakResidentBytes": memory.peakResidentBytes,
            ]
        }
        if let experiment {
            d["experiment"] =
                [
                    "name": experiment.name, "holdoutBasisPoints": experiment.basisPoints,
                    "start": Timestamp.date(experiment.start), "appliesAtAsOf": experiment.applies(at: asOf),
                    "heldOut": heldOut.map { ["segment": $0.0, "rows": $0.1] as [String: Any] },
                ] as [String: Any]
        }
        var money: [String: Any] = [
            "unpriced": amounts.unpriced, "unconverted": amounts.unconverted,
            "rowsInAnotherCurrency": amounts.otherCurrency, "currencies": amounts.currencies.sorted(),
        ]
        if let m = self.money {
            money["currency"] = m.currency
            money["rates"] = ControlEscape.name(m.ratesPath)
            money["horizonMonths"] = m.horizonMonths
        }
        d["money"] = money
        if let identities {
            d["identities"] =
                [
                    "path": ControlEscape.name(identities.path), "rows": identities.rows,
                    "duplicates": identities.duplicates,
                    "rejected": identities.rejected,
                ] as [String: Any]
        }
        if !destinations.isEmpty {
            d["destinations"] = destinations.map {
                [
                    "type": $0.type.rawValue, "audience": $0.audience.rawValue, "files": $0.files, "rows": $0.rows,
                    "unaddressable": $0.unaddressable, "exited": $0.exited, "folded": $0.folded,
                    "without_link": $0.withoutLink,
                ] as [String: Any]
            }
        }
        d["format"] = format.rawValue
        if let signed {
            d["signatures"] =
                [
                    "verified": signed.verifies,
                    "roots": signed.roots.map { ["path": ControlEscape.name($0.path), "sha256": $0.sha256] },
                ] as [String: Any]
        }
    }
}
