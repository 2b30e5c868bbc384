import Foundation
import WinBackModel
import WinBackSupport

extension Explanation {
    /// The human-readable answer to "why is this customer (not) in the audience?".
    public var text: String {
        let iso = Timestamp.iso
        var out: [String] = []
        out.append("Customer \(originalTransactionId) in subscription group \(subscriptionGroupId), as of \(iso(asOf))")
        if let state, let e = lastSubscribedEnd, let since = monthsSinceLastSubscribed, let paid = paidMonths {
            let stateText: String
            switch state {
            case .active: stateText = "active (subscribed until \(iso(e)))"
            case .billingRetry: stateText = "in billing retry (last period ended \(iso(e)))"
            case .churned:
                stateText =
                    "churned (last subscribed until \(iso(e)), \(counted(since, "whole month")) ago)"
            }
            out.append("  state:        \(stateText)")
            out.append("  product:      \(productId ?? "")")
            out.append("  storefront:   \(storefront ?? "(none)")")
            out.append("  token:        \(appAccountToken ?? "(none)")")
            let runs = periods.last?.run ?? 0
            out.append(
                "  paid months:  \(paid) in the most recent run (run \(runs) of \(runs)"
                    + (paidRunStart.map { ", paid since \(iso($0))" } ?? ", no paid period") + ")")
        } else {
            out.append("  state:        not a subscriber (no access period before the as-of instant)")
        }

        if let signatures { out.append("  signatures:   \(signatures)") }
        // Signed inputs: each row says whether its signature was verified.
        let signature = { (r: Row?) in
            r?.signatureVerified.map { $0 ? "  signature verified" : "  signature not verified" } ?? ""
        }
        let byId = Dictionary(rows.map { ($0.transactionId, $0) }, uniquingKeysWith: { a, _ in a })

        out.append("")
        out.append("Periods (a gap of more than \(consecutiveGapDays) days starts a new run):")
        if periods.isEmpty { out.append("  (none)") }
        for p in periods {
            if let gap = p.gapDays, gap > 0 {
                out.append(
                    String(format: "        gap of %.1f days%@", gap, p.startsNewRun ? " → new run" : ""))
            }
            var notes: [String] = [p.paid ? "paid" : p.refunded ? "unpaid" : "free"]
            if p.refunded { notes.append("refunded") }
            if p.upgraded { notes.append("upgraded") }
            if !p.offer.isEmpty { notes.append(p.offer) }
            out.append(
                "  run \(p.run)  \(iso(p.start)) → \(iso(p.end))  \(p.productId)  \(notes.joined(separator: ", "))  [\(p.transactionId)]"
                    + signature(byId[p.transactionId])
            )
        }
        let ignored = rows.filter { $0.ignored != nil }
        if !ignored.isEmpty {
            out.append("")
            out.append("Rows that give no period:")
            for r in ignored {
                out.append(
                    "  \(r.transactionId)  \(iso(r.purchaseDate)) → \(iso(r.expiresDate))  \(r.productId): \(r.ignored!)"
                        + signature(r)
                )
            }
        }
        if !notes.isEmpty {
            out.append("")
            for n in notes { out.append("Note: " + n) }
        }
        if !rejectedLines.isEmpty {
            out.append("")
            out.append("Rejected lines that name this customer (their rows are not in the timeline above):")
            for r in rejectedLines { out.append("  \(ControlEscape.name(r.file)):\(r.line): \(r.reason)") }
        }

        out.append("")
        out.append("Returns (a period starting at least a whole month after every earlier one ended):")
        if returns.isEmpty { out.append("  (none)") }
        for r in returns {
            let offer = r.offerId.isEmpty ? "" : " \(r.offerId)"
            let horizons = r.retained.map { h in
                "\(h.months)m " + (h.retained.map { $0 ? "retained" : "gone" } ?? "not yet")
            }
            out.append(
                "  \(iso(r.start))  \(r.kind)\(offer), after leaving \(iso(r.reach)); "
                    + horizons.joined(separator: ", ") + (r.counted ? "" : " (before the report's months)"))
            if !r.revenue.isEmpty {
                let currency = r.currency.isEmpty ? "" : " \(r.currency)"
                out.append(
                    "      net revenue: "
                        + r.revenue.map { "\($0.months)m " + ($0.net.map { $0 + currency } ?? "–") }.joined(
                            separator: ", "))
            }
        }
        if !cohortRevenue.isEmpty {
            let currency = moneyCurrency.isEmpty ? "" : " \(moneyCurrency)"
            out.append("")
            out.append("Cohort revenue (net, from each cohort month's start over the money horizon):")
            for c in cohortRevenue {
                out.append("  \(c.month)  " + (c.net.map { $0 + currency } ?? "horizon not passed yet"))
            }
        }

        if let x = experiment {
            out.append("")
            out.append(
                "Experiment \(x.name) (\(x.holdout) held out from \(Timestamp.date(x.start))): bucket \(x.bucket), "
                    + (x.heldOut
                        ? "held out: "
                            + (x.applies ? "in no audience, listed in segments/holdout.csv" : "not yet applied")
                        : "treatment: in the audiences it is eligible for"))
        }

        out.append("")
        out.append("Win-back history:")
        if winBackHistory.isEmpty { out.append("  (no win-back redemption)") }
        for w in winBackHistory { out.append("  \(w.offerId): last redemption ended \(iso(w.end))") }

        out.append("")
        out.append("Offers of group \(subscriptionGroupId):")
        if offers.isEmpty { out.append("  (the catalog has no offer for this group)") }
        let width = offers.map(\.offerId.count).max() ?? 0
        for v in offers {
            let name = v.offerId.padding(toLength: width, withPad: " ", startingAt: 0)
            let plan = v.planType.map { "  (plan \($0))" } ?? ""
            if v.eligible {
                out.append("  \(name)  ELIGIBLE, rank \(v.rank ?? 0)\(plan)")
            } else {
                out.append("  \(name)  not eligible\(plan)")
                for f in v.failures { out.append("    - \(f.reason): \(f.detail)") }
            }
        }
        func list(_ ids: [String]) -> String { ids.isEmpty ? "(none)" : ids.joined(separator: ", ") }
        if let a = apple {
            out.append("")
            out.append("Agreement with Apple, both at the renewal info's signedDate \(iso(a.signedDate)):")
            if let state = a.state, let paid = a.paidMonths, let e = a.lastSubscribedEnd,
                let since = a.monthsSinceLastSubscribed
            {
                let paidText = "\(counted(paid, "paid month")) in the most recent run"
                out.append(
                    "  the customer then:               "
                        + (state == .active
                            ? "active (subscribed until \(iso(e))), \(paidText)"
                            : "\(state.label) (last subscribed until \(iso(e)), \(since) whole month"
                                + "\(since == 1 ? "" : "s") before), \(paidText)"))
            } else {
                out.append("  the customer then:               not a subscriber (no access period yet)")
            }
            out.append("  Apple's eligibleWinBackOfferIds: \(list(a.appleIds))")
            out.append("  winback at that instant:         \(list(a.winbackIds))")
            if a.disagreements.isEmpty { out.append("  they agree") }
            let width = a.disagreements.map(\.offerId.count).max() ?? 0
            for d in a.disagreements {
                let name = d.offerId.padding(toLength: width, withPad: " ", startingAt: 0)
                if !d.apple {
                    out.append("  \(name)  winback: eligible; Apple does not list it")
                } else if !d.inCatalog {
                    out.append("  \(name)  Apple lists it; the catalog has no such offer")
                } else {
                    out.append("  \(name)  Apple lists it; winback: not eligible")
                    for f in d.failures { out.append("    - \(f.reason): \(f.detail)") }
                }
            }
        } else if let ids = appleEligibleWinBackOfferIds {
            out.append("")
            out.append(
                "Apple's eligibleWinBackOfferIds (renewal info without a signedDate, so not compared): \(list(ids))")
        }
        return out.joined(separator: "\n") + "\n"
    }

    /// The same as a JSON-compatible dictionary (timestamps as ISO 8601 strings).
    public var jsonObject: [String: Any] {
        let iso = Timestamp.iso
        var d: [String: Any] = [
            "subscriptionGroupId": subscriptionGroupId, "originalTransactionId": originalTransactionId,
            "asOf": iso(asOf), "state": state?.label ?? "not_subscriber", "eligibleOfferIds": eligibleOfferIds,
        ]
        if let v = lastSubscribedEnd { d["lastSubscribedEnd"] = iso(v) }
        if let v = monthsSinceLastSubscribed { d["monthsSinceLastSubscribed"] = v }
        if let v = paidMonths { d["paidMonths"] = v }
        if let v = paidRunStart { d["paidRunStart"] = iso(v) }
        if let v = productId { d["productId"] = v }
        if let v = storefront { d["storefront"] = v }
        if let v = appAccountToken { d["appAccountToken"] = v }
        if let v = appleEligibleWinBackOfferIds { d["appleEligibleWinBackOfferIds"] = v }
        if let a = apple {
            d["apple"] =
                [
                    "signedDate": iso(a.signedDate), "state": a.state?.label ?? "not_subscriber",
                    // Apple's own field name for what it lists (docs/rules.md §4.5).
                    "eligibleWinBackOfferIds": a.appleIds, "winbackIds": a.winbackIds,
                    "disagreements": a.disagreements.map { x -> [String: Any] in
                        [
                            "offerId": x.offerId, "inCatalog": x.inCatalog, "apple": x.apple ? "eligible" : "not",
                            "winback": x.apple ? "not" : "eligible",
                            "failures": x.failures.map { f -> [String: Any] in
                                var y: [String: Any] = ["reason": f.reason, "detail": f.detail]
                                if let from = f.from { y["from"] = iso(from) }
                                return y
                            },
                        ]
                    },
                ] as [String: Any]
        }
        d["periods"] = periods.map { p -> [String: Any] in
            var x: [String: Any] = [
                "start": iso(p.start), "end": iso(p.end), "paid": p.paid, "refunded": p.refunded, "run": p.run,
                "productId": p.productId, "transactionId": p.transactionId, "startsNewRun": p.startsNewRun,
                "upgraded": p.upgraded,
            ]
            if !p.offer.isEmpty { x["offer"] = p.offer }
            if let g = p.gapDays { x["gapDays"] = (g * 1000).rounded() / 1000 }
            return x
        }
        if let signatures {
            d["signatures"] =
                [
                    "note": signatures, "rows": rows.count,
                    "verifiedRows": rows.filter { $0.signatureVerified == true }.count,
                ] as [String: Any]
        }
        d["ignoredRows"] = rows.compactMap { r -> [String: Any]? in
            guard let why = r.ignored else { return nil }
            return ["transactionId": r.transactionId, "reason": why]
        }
        if let x = experiment {
            d["experiment"] =
                [
                    "name": x.name, "holdout": x.holdout, "start": Timestamp.date(x.start), "bucket": x.bucket,
                    "arm": x.heldOut ? "holdout" : "treatment", "appliesAtAsOf": x.applies,
                ] as [String: Any]
        }
        d["returns"] = returns.map { r -> [String: Any] in
            var x: [String: Any] = [
                "start": iso(r.start), "after": iso(r.reach), "kind": r.kind, "countedInReport": r.counted,
            ]
            if !r.offerId.isEmpty { x["offerId"] = r.offerId }
            for h in r.retained {
                x["retained\(h.months)m"] = h.retained.map { $0 ? "yes" : "no" } ?? "not_yet_observable"
            }
            for h in r.revenue { x["netRevenue\(h.months)m"] = h.net ?? "" }
            if !r.currency.isEmpty { x["currency"] = r.currency }
            return x
        }
        if !cohortRevenue.isEmpty {
            d["cohortRevenue"] = cohortRevenue.map { c -> [String: Any] in
                ["month": c.month, "net": c.net ?? "", "currency": moneyCurrency]
            }
        }
        if !notes.isEmpty { d["notes"] = notes }
        if !rejectedLines.isEmpty {
            d["rejectedLines"] = rejectedLines.map {
                ["file": ControlEscape.name($0.file), "line": $0.line, "reason": $0.reason] as [String: Any]
            }
        }
        d["winBackHistory"] = winBackHistory.map { ["offerId": $0.offerId, "lastRedemptionEnd": iso($0.end)] }
        d["offers"] = offers.map { v -> [String: Any] in
            var x: [String: Any] = ["offerId": v.offerId, "eligible": v.eligible]
            if let plan = v.planType { x["targetSubscriptionPlanType"] = plan }
            if let r = v.rank { x["rank"] = r }
            x["failures"] = v.failures.map { f -> [String: Any] in
                var y: [String: Any] = ["reason": f.reason, "detail": f.detail]
                if let from = f.from { y["from"] = iso(from) }
                return y
            }
            return x
        }
        return d
    }

    /// Pretty, key-sorted JSON of several explanations: `{"customers": [...]}`.
    public static func json(_ list: [Explanation]) -> String {
        let obj: [String: Any] = ["customers": list.map(\.jsonObject)]
        let data = (try? JSONSerialization.data(withJSONObject: obj, options: [.prettyPrinted, .sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
