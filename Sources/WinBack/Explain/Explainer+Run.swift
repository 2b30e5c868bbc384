import Foundation
import WinBackExplain
import WinBackHistory
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport

extension Explainer {
    /// The latest published run of `p` (`<output>/<name>/latest`), its date and as-of; nil when
    /// none is published. Its manifest is read as a baseline's is (docs/rules.md §6.3).
    static func latestPublished(_ p: ResolvedPipeline) throws -> (date: String, asOf: Int64)? {
        let root = p.outputDirectory + "/" + p.config.name
        let latest = root + "/latest"
        guard System.linkKind(latest) == System.symbolicLinkType,
            let date = System.linkTarget(latest),
            Timestamp.parseDate(date) != nil,
            let run = try Baseline.read(root: root, date: date, name: p.config.name, memory: nil)
        else { return nil }
        return (date, run.asOf)
    }

    /// `winback explain`: the run's stages, reading only the rows of customers with this
    /// originalTransactionId or appAccountToken, and each such customer explained (one per
    /// group). Throws exit 66 when no customer matches.
    public static func explain(_ options: RunOptions, customer id: String) throws -> [Explanation] {
        var p = try ResolvedPipeline.resolve(options)
        // Without --as-of, at the as-of of the latest published run, when there is one: the run
        // whose files the reader is asking about (docs/rules.md §10.10).
        var notes: [String] = []
        if options.asOf == nil, let latest = try latestPublished(p) {
            p.asOf = latest.asOf
            notes.append(
                "explained at the as-of of the latest published run, \(latest.date) (\(Timestamp.iso(latest.asOf))); "
                    + "--as-of explains at another")
        }
        // A value of the identities file (an email, the team's user id) stands for the
        // customers its rows map to (docs/rules.md §10.7).
        var ids = [id]
        var superseded: Set<String> = []
        if let source = p.config.identities {
            let matches = try IdentityReader.matches(
                id, path: p.config.resolve(source.path), key: source.key, inflater: p.inflater, limits: p.limits)
            ids += matches.map(\.key).filter { $0 != id }
            superseded = Set(matches.filter(\.superseded).map(\.key))
        }
        var inputs = try Stage.read(p, .only(ids))
        // Matched by token: read again for all rows of those customers, tokens or not.
        let set = inputs.transactions
        let originals = Set(set.rows.map { set.strings.string($0.originalTransactionId) })
        if !originals.isEmpty && !originals.isSubset(of: Set(ids)) {
            inputs = try Stage.read(p, .only(ids + originals.subtracting(ids).sorted()))
        }
        guard !inputs.transactions.rows.isEmpty else {
            throw WinBackError(
                .noInput,
                "no customer has originalTransactionId or appAccountToken '\(id)' in the inputs"
                    + (p.config.identities == nil
                        ? "" : ", nor a row of the identities file holding it (\(ids.count - 1) found)"))
        }
        let customers = Stage.group(inputs, threads: 1)
        let book = Stage.offers(p, strings: inputs.strings)
        return (0..<customers.count).map {
            var e = explain(
                $0, customers: customers, book: book, renewals: inputs.renewals, asOf: p.asOf,
                gapDays: p.config.consecutiveGapDays, experiment: p.config.experiment,
                retentionMonths: p.config.retentionMonths, rates: p.rates,
                horizonMonths: p.config.money?.horizonMonths ?? 3, windowMonths: p.config.windowMonths)
            if let signed = p.signed { e.markSignatures(signed) }
            var ids = [e.originalTransactionId]
            if let token = e.appAccountToken { ids.append(token) }
            e.rejectedLines = RejectedLines.mentioning(ids, in: inputs.rejects.listed, limits: p.limits)
            e.notes = notes
            if ids.contains(where: superseded.contains) {
                e.notes.append(
                    "'\(ControlEscape.escaped(id))' was superseded by a later row of the identities file for this "
                        + "customer: the destination files use that row's values, not this one (docs/rules.md §10.1)")
            }
            return e
        }
    }
}
