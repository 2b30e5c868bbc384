import WinBackRules

/// A shard's report rows: sums over disjoint sets of customers, so the run's reports are the
/// sums of the shards' by key (docs/rules.md §8.1). Every list is of ``SummableRow``s: each row
/// type owns its key and its `+`, and ``merged(with:)`` calls them, so a merge of shards is a
/// fold of ``merged(with:)`` and a report added here needs no edit in ``Merge``.
struct ShardReports: Codable {
    struct Funnel: Codable, SummableRow {
        var offerId: String
        var funnel: FunnelRow

        var key: String { offerId }

        static func + (a: Funnel, b: Funnel) -> Funnel {
            var sum = a
            sum.funnel.add(b.funnel)
            return sum
        }
    }

    /// The counts of apple-agreement.csv (the disagreements are a sorted file of their own).
    struct Apple: Codable {
        struct Offer: Codable, SummableRow {
            var offerId: String
            var counts: AppleAgreement.Counts

            var key: String { offerId }

            static func + (a: Offer, b: Offer) -> Offer { Offer(offerId: a.offerId, counts: a.counts + b.counts) }
        }
        struct Unknown: Codable, SummableRow {
            var id: String
            var customers: Int

            var key: String { id }

            static func + (a: Unknown, b: Unknown) -> Unknown {
                Unknown(id: a.id, customers: a.customers + b.customers)
            }
        }
        var offers: [Offer]
        var unknownIds: [Unknown]
        var overall: AppleAgreement.Counts
        var topAgreement: Int

        /// The counts of both; nil unless both are of the same catalog.
        func merged(with o: Apple) -> Apple? {
            guard let offers = offers.summed(lineByLine: o.offers) else { return nil }
            return Apple(
                offers: offers, unknownIds: unknownIds.summed(byKey: o.unknownIds), overall: overall + o.overall,
                topAgreement: topAgreement + o.topAgreement)
        }
    }

    var redemptions: [RedemptionRow]
    var rates: [RedemptionRateRow]
    var funnel: [Funnel]
    var summary: [EligibilitySummaryRow]
    var apple: Apple
    /// The uplift's cells (cohort months × catalog offers) and retention's rows (docs/rules.md
    /// §9): counts, summed before any rate or interval is computed.
    var uplift: [UpliftRow]
    var retention: [RetentionRow]
    /// Revenue after a return and what the manifest says of amounts (docs/rules.md §13): sums
    /// in milliunits, exact, so every shard count publishes the same report.
    var revenue: [RevenueRow]
    var money: MoneyCounts
    var reportingCurrency: String?
    var horizonMonths: Int
    /// Segment rows `audience.requireApple` left out, per catalog offer, then best-offer.
    var droppedByApple: [Int]
    /// Segment rows the experiment held out, per catalog offer, then best-offer (docs/rules.md §9.1).
    var heldOut: [Int]

    init(_ r: Reports, droppedByApple: [Int], heldOut: [Int]) {
        uplift = r.uplift
        retention = r.retention
        revenue = r.revenue
        money = r.money
        reportingCurrency = r.reportingCurrency
        horizonMonths = r.horizonMonths
        self.heldOut = heldOut
        redemptions = r.redemptions
        rates = r.rates
        funnel = r.funnel.map { Funnel(offerId: $0.offerId, funnel: $0.funnel) }
        summary = r.summary
        apple = Apple(
            offers: r.apple.offers.map { .init(offerId: $0.offerId, counts: $0.counts) },
            unknownIds: r.apple.unknownIds.map { .init(id: $0.id, customers: $0.customers) },
            overall: r.apple.overall, topAgreement: r.apple.topAgreement)
        self.droppedByApple = droppedByApple
    }

    /// The report rows of both shards' customers: rows summed by key, those in catalog or
    /// window order line by line. Nil unless the two are of the same catalog and window (their
    /// line-by-line lists do not line up).
    func merged(with o: ShardReports) -> ShardReports? {
        guard let rates = rates.summed(lineByLine: o.rates), let funnel = funnel.summed(lineByLine: o.funnel),
            let apple = apple.merged(with: o.apple), droppedByApple.count == o.droppedByApple.count,
            let uplift = uplift.summed(lineByLine: o.uplift), heldOut.count == o.heldOut.count,
            reportingCurrency == o.reportingCurrency, horizonMonths == o.horizonMonths
        else { return nil }
        var sum = self
        sum.redemptions = redemptions.summed(byKey: o.redemptions)
        sum.rates = rates
        sum.funnel = funnel
        sum.summary = summary.summed(byKey: o.summary)
        sum.apple = apple
        sum.droppedByApple = zip(droppedByApple, o.droppedByApple).map(+)
        sum.uplift = uplift
        sum.retention = retention.summed(byKey: o.retention)
        sum.revenue = revenue.summed(byKey: o.revenue)
        sum.money = money + o.money
        sum.heldOut = zip(heldOut, o.heldOut).map(+)
        return sum
    }

    /// The run's reports from the summed rows, each in its report's own order (docs/rules.md
    /// §4.3, §4.5); the disagreements, a file of their own, are not among them.
    func reports(window: ReportWindow, experiment: Experiment?) -> Reports {
        Reports(
            window: window, redemptions: RedemptionReport.sorted(redemptions), rates: rates,
            funnel: funnel.map { ($0.offerId, $0.funnel) }, summary: EligibilitySummaryReport.sorted(summary),
            apple: AppleAgreement(
                offers: apple.offers.map { ($0.offerId, $0.counts) },
                unknownIds: AppleAgreement.sorted(unknownIds: apple.unknownIds.map { ($0.id, $0.customers) }),
                overall: apple.overall, topAgreement: apple.topAgreement, disagreements: []),
            experiment: experiment, uplift: uplift, retention: RetentionReport.sorted(retention),
            revenue: RevenueReport.sorted(revenue), money: money, reportingCurrency: reportingCurrency,
            horizonMonths: horizonMonths)
    }
}
