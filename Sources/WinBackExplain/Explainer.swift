import Foundation
import WinBackModel
import WinBackRules
import WinBackSupport

/// Builds ``Explanation``s: from customers already grouped (tests, agreement checks), or by
/// reading only one customer's rows with the run's own reader (`winback explain`).
public enum Explainer {
    /// Explains customer `k` of `customers` at `t`.
    ///
    /// With an experiment, the customer's bucket and arm; returns are marked counted when they
    /// began within `retentionMonths` months before T's month (docs/rules.md §9.3).
    public static func explain(
        _ k: Int, customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, asOf t: Int64, gapDays: Int64,
        experiment: Experiment? = nil, retentionMonths: Int = 24, rates: Rates? = nil, horizonMonths: Int = 3,
        windowMonths: Int = 12
    ) -> Explanation {
        let s = customers.strings
        let rows = customers.rows(of: k)
        let renewal = renewals?.known(at: t, originalTransactionId: customers.originalTransactionIds[k])
        var periods: [Period] = []
        let tl = CustomerTimeline.build(rows: rows, asOf: t, gapDays: gapDays, renewal: renewal, periods: &periods)
        let group = customers.groups[k]

        func offerLabel(_ r: Transaction) -> String {
            guard r.offerType != 0 else { return "" }
            let label = OfferType.label(r.offerType, strings: s)
            return r.offerIdentifier >= 0 ? "\(label) \(s.string(r.offerIdentifier))" : label
        }
        let used = Set(periods.map(\.row))
        let rowViews: [Explanation.Row] = rows.enumerated().map { i, r in
            var ignored: String?
            if !r.isKnownPurchase(at: t) {
                ignored =
                    r.purchaseDate >= t
                    ? "purchased at or after the as-of instant"
                    : r.ownership == .familyShared ? "family shared: never counts" : "unknown ownership type"
            } else if !used.contains(Int32(i)) {
                ignored =
                    r.isRevoked(at: t)
                    ? "refunded before it began" : "empty period (cut by the next one or zero length)"
            }
            return Explanation.Row(
                transactionId: s.string(r.transactionId), productId: s.string(r.productId),
                purchaseDate: r.purchaseDate,
                expiresDate: r.expiresDate, offer: offerLabel(r),
                discountType: r.offerDiscountType >= 0 ? s.string(r.offerDiscountType) : "",
                revocationDate: r.revocationDate == Transaction.never ? nil : r.revocationDate,
                isUpgraded: r.isUpgraded,
                ignored: ignored)
        }
        var reach = Int64.min
        let periodViews: [Explanation.PeriodView] = periods.enumerated().map { i, p in
            let r = rows[Int(p.row)]
            let gap: Double? = i == 0 ? nil : Double(p.start - reach) / Double(MonthMath.day)
            let newRun = i > 0 && p.run != periods[i - 1].run
            reach = max(reach, p.end)
            return Explanation.PeriodView(
                start: p.start, end: p.end, paid: p.paid, refunded: p.revoked, run: Int(p.run) + 1,
                productId: s.string(r.productId), transactionId: s.string(r.transactionId), offer: offerLabel(r),
                gapDays: gap, startsNewRun: newRun, upgraded: r.isUpgraded)
        }

        var e = Explanation(
            subscriptionGroupId: s.string(group), originalTransactionId: s.string(customers.originalTransactionIds[k]),
            asOf: t, consecutiveGapDays: gapDays, state: tl?.state, lastSubscribedEnd: tl?.lastSubscribedEnd,
            monthsSinceLastSubscribed: tl?.monthsSinceLastSubscribed, paidMonths: tl?.paidMonths,
            paidRunStart: tl?.paidRunStart, productId: tl.map { s.string($0.productId) },
            storefront: tl.flatMap { $0.storefront >= 0 ? s.string($0.storefront) : nil },
            appAccountToken: tl.flatMap { $0.appAccountToken.string(in: s) },
            rows: rowViews, periods: periodViews,
            winBackHistory: tl?.winBackEnds.map { (s.string($0.offerId), $0.end) } ?? [], offers: [],
            renewalSignedDate: renewal.map(\.signedDate), appleEligibleWinBackOfferIds: renewal?.eligibleWinBackOfferIds
        )

        e.offers = verdicts(tl, group: group, book: book, periods: periods, renewal: renewal, asOf: t, strings: s)
        if let experiment {
            var scratch: [UInt8] = []
            let bucket = experiment.assignment.bucket(customer: k, of: customers, scratch: &scratch)
            e.experiment = Explanation.ExperimentView(
                name: experiment.name, holdout: experiment.percent, start: experiment.start, bucket: bucket,
                heldOut: bucket < experiment.basisPoints, applies: experiment.applies(at: t))
        }
        addReturns(
            to: &e, rows: rows, periods: &periods, asOf: t, experiment: experiment, retentionMonths: retentionMonths,
            rates: rates, horizonMonths: horizonMonths, windowMonths: windowMonths, strings: s)
        if let renewal {
            e.apple = appleView(rows: rows, group: group, renewal: renewal, book: book, gapDays: gapDays, strings: s)
        }
        return e
    }

    /// Each offer of the customer's group, eligible (with its rank) or not (with why), in
    /// catalog order.
    package static func verdicts(
        _ tl: CustomerTimeline?, group: Int32, book: OfferBook, periods: [Period], renewal: RenewalInfo?, asOf t: Int64,
        strings s: StringTable
    ) -> [Explanation.Verdict] {
        var verdicts: [Int: Explanation.Verdict] = [:]
        if let tl {
            var rank = 0
            book.evaluate(group: group, tl, asOf: t) { _, i, failed in
                let o = book.offers[i]
                if failed.isEmpty {
                    rank += 1
                    verdicts[i] = Explanation.Verdict(
                        offerId: o.offer.offerId, eligible: true, rank: rank, failures: [])
                } else {
                    verdicts[i] = Explanation.Verdict(
                        offerId: o.offer.offerId, eligible: false, rank: nil,
                        failures: details(failed, o, tl, periods: periods, renewal: renewal, asOf: t, strings: s))
                }
            }
        } else {
            for i in book.rankedByGroup[group] ?? [] {
                verdicts[i] = Explanation.Verdict(
                    offerId: book.offers[i].offer.offerId, eligible: false, rank: nil,
                    failures: [
                        Explanation.Failure(
                            reason: "not_subscriber", detail: "no access period before the as-of instant", from: nil)
                    ])
            }
        }
        // Listed in catalog order; the rank says the order of preference.
        return verdicts.keys.sorted().map { i in
            var v = verdicts[i]!
            v.planType = book.offers[i].offer.targetSubscriptionPlanType
            return v
        }
    }

    /// The customer's returns (docs/rules.md §9.3), their revenue, and with an experiment the
    /// cohort revenue of each cohort month (§13).
    package static func addReturns(
        to e: inout Explanation, rows: [Transaction], periods: inout [Period], asOf t: Int64, experiment: Experiment?,
        retentionMonths: Int, rates: Rates?, horizonMonths: Int, windowMonths: Int, strings s: StringTable
    ) {
        var returns: [Return] = []
        RetentionReport.returns(rows: rows, asOf: t, since: .min, periods: &periods, into: &returns)
        let since = RetentionReport.since(asOf: t, months: retentionMonths)
        e.returns = returns.map { r in
            Explanation.ReturnView(
                start: r.start, reach: r.reach, kind: r.kind(strings: s),
                offerId: r.reportedOffer >= 0 ? s.string(r.reportedOffer) : "", counted: r.start >= since,
                retained: RetentionReport.horizons.indices.map {
                    (RetentionReport.horizons[$0], r.observable[$0] ? r.retained[$0] : nil)
                })
        }
        // Money (docs/rules.md §13): each return's revenue as the report sums it, and the
        // cohort revenue of each cohort month.
        let converter = AmountConverter(rates: rates, strings: s)
        e.moneyCurrency = rates?.currency ?? ""
        for (i, r) in returns.enumerated() {
            var tally: [RevenueReport.Key: RevenueRow] = [:]
            var counts = MoneyTally()
            RevenueReport.count([r], rows: rows, asOf: t, converter: converter, into: &tally, money: &counts)
            // Without money, a return whose row has no amount has no revenue (docs/rules.md §13.2).
            guard let row = tally.first else { continue }
            e.returns[i].currency =
                rates?.currency ?? (row.key.currency >= 0 ? s.string(row.key.currency) : "")
            e.returns[i].revenue = RetentionReport.horizons.indices.map { h in
                (RetentionReport.horizons[h], r.observable[h] ? row.value.net[h].units : nil)
            }
        }
        if let experiment {
            let window = ReportWindow(asOf: t, months: windowMonths)
            let money = CohortMoney(converter: converter, horizonMonths: Int64(horizonMonths))
            e.cohortRevenue = UpliftReport.cohorts(window, experiment).map { m in
                let x = money.revenue(rows: rows, from: window.months[m], asOf: t)
                return (window.label(m), x.map { Milliunits.units($0) })
            }
        }
    }

    /// The customer evaluated again at S beside Apple's list, each disagreement with winback's
    /// failing criteria at S and their numbers (docs/rules.md §4.5).
    package static func appleView(
        rows: [Transaction], group: Int32, renewal: RenewalInfo, book: OfferBook, gapDays: Int64,
        strings s: StringTable
    ) -> Explanation.AppleView? {
        var periods: [Period] = []
        guard
            let c = AppleComparison.compare(
                rows: rows, group: group, renewal: renewal, book: book, gapDays: gapDays, periods: &periods)
        else { return nil }
        let at = c.signedDate
        let disagreements = c.disagreements.map { d -> Explanation.AppleDisagreement in
            var failures: [Explanation.Failure] = []
            if let i = d.offer, d.apple {
                if let tl = c.timeline {
                    failures = details(
                        d.reasons, book.offers[i], tl, periods: periods, renewal: renewal, asOf: at, strings: s)
                } else {
                    failures = [
                        Explanation.Failure(
                            reason: "not_subscriber", detail: "no access period before \(Timestamp.iso(at))", from: nil)
                    ]
                }
            }
            return Explanation.AppleDisagreement(
                offerId: d.offerId, inCatalog: d.offer != nil, apple: d.apple, failures: failures)
        }
        return Explanation.AppleView(
            signedDate: at, state: c.timeline?.state, paidMonths: c.timeline?.paidMonths,
            lastSubscribedEnd: c.timeline?.lastSubscribedEnd,
            monthsSinceLastSubscribed: c.timeline?.monthsSinceLastSubscribed, appleIds: c.appleIds,
            winbackIds: c.winback.map { book.offers[$0].offer.offerId },
            disagreements: disagreements)
    }

    package static func details(
        _ failed: Reasons, _ o: CompiledOffer, _ tl: CustomerTimeline, periods: [Period], renewal: RenewalInfo?,
        asOf t: Int64, strings s: StringTable
    ) -> [Explanation.Failure] {
        let offer = o.offer
        var out: [Explanation.Failure] = []
        let iso = Timestamp.iso
        let range = "\(offer.minMonthsSince)–\(offer.maxMonthsSince)"
        let months = "\(counted(tl.monthsSinceLastSubscribed, "month")) ago"
        let since = tl.state == .churned ? "churned \(months)" : "last period ended \(months)"
        for c in Criterion.allCases where failed.contains(c.reason) {
            switch c {
            case .active:
                let running = periods.first { $0.start <= t && t < $0.end }
                out.append(
                    .init(
                        reason: c.label, detail: "subscribed until \(running.map { iso($0.end) } ?? "?")",
                        from: running?.end))
            case .billingRetry:
                let e = tl.lastSubscribedEnd
                if let g = renewal?.gracePeriodExpiresDate, g > t {
                    out.append(.init(reason: c.label, detail: "in a billing grace period until \(iso(g))", from: g))
                } else {
                    let window = CustomerTimeline.billingRetryWindow
                    let until = e + window
                    out.append(
                        .init(
                            reason: c.label,
                            detail:
                                "Apple is retrying billing since \(iso(e)) (at most \(window / MonthMath.day) days, until \(iso(until)))",
                            from: until))
                }
            case .otherProduct:
                out.append(
                    .init(
                        reason: c.label,
                        detail: "last subscribed to \(s.string(tl.productId)); the offer is for \(offer.productId)",
                        from: nil))
            case .offerNotLive:
                let start = offer.startDay.map { Timestamp.date($0 * MonthMath.day) } ?? "always"
                let end = offer.endDay.map { Timestamp.date($0 * MonthMath.day) } ?? "open"
                let from = offer.startDay.flatMap { $0 * MonthMath.day > t ? $0 * MonthMath.day : nil }
                out.append(.init(reason: c.label, detail: "the offer runs \(start) – \(end)", from: from))
            case .territory:
                let have = tl.storefront >= 0 ? "storefront \(s.string(tl.storefront))" : "no storefront"
                out.append(
                    .init(
                        reason: c.label,
                        detail: "\(have); the offer is sold in \(offer.territories.joined(separator: ", "))", from: nil)
                )
            case .paidDuration:
                out.append(
                    .init(
                        reason: c.label,
                        detail:
                            "paid \(counted(tl.paidMonths, "month")) in the latest run; the offer needs \(offer.paidMonths)",
                        from: nil))
            case .tooRecent:
                let from = MonthMath.addMonths(tl.lastSubscribedEnd, Int64(offer.minMonthsSince))
                let ended = tl.lastSubscribedEnd > t ? "subscribed until \(iso(tl.lastSubscribedEnd))" : since
                out.append(
                    .init(
                        reason: c.label, detail: "\(ended); the offer needs \(range) → from \(iso(from))", from: from))
            case .tooLongAgo:
                out.append(.init(reason: c.label, detail: "\(since); the offer needs \(range)", from: nil))
            case .waitBetweenOffers:
                guard let wait = offer.waitMonths, let end = tl.lastRedemptionEnd(of: o.offerIdentifier) else {
                    continue
                }
                let from = MonthMath.addMonths(end, Int64(wait))
                out.append(
                    .init(
                        reason: c.label,
                        detail:
                            "redeemed this offer until \(iso(end)), wait \(wait) months → eligible from \(iso(from))",
                        from: from))
            case .notSubscriber: continue
            }
        }
        return out
    }
}
