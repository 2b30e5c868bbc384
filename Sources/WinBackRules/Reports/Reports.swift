import Foundation
import Synchronization
import WinBackModel
import WinBackSupport

/// The four reports of docs/rules.md §4.3 and the agreement with Apple (§4.5), computed in one parallel pass over the customers already in
/// memory: the rows the segments were built from, and the audience evaluated at T.
///
/// Pure: no files, no clock. Workers tally contiguous shards of customers, each into a tally of
/// its own; tallies are sums and every report is sorted on a total order at the end, so the result
/// is the same for any thread count.
public struct Reports: Sendable {
    package init(
        window: ReportWindow, redemptions: [RedemptionRow], rates: [RedemptionRateRow],
        funnel: [(offerId: String, funnel: FunnelRow)], summary: [EligibilitySummaryRow], apple: AppleAgreement,
        experiment: Experiment? = nil, uplift: [UpliftRow] = [], retention: [RetentionRow] = [],
        revenue: [RevenueRow] = [], money: MoneyCounts = MoneyCounts(), reportingCurrency: String? = nil,
        horizonMonths: Int = 3
    ) {
        self.horizonMonths = horizonMonths
        self.revenue = revenue
        self.money = money
        self.reportingCurrency = reportingCurrency
        self.experiment = experiment
        self.uplift = uplift
        self.retention = retention
        self.window = window
        self.redemptions = redemptions
        self.rates = rates
        self.funnel = funnel
        self.summary = summary
        self.apple = apple
    }

    public var window: ReportWindow
    public var redemptions: [RedemptionRow]
    public var rates: [RedemptionRateRow]
    /// (offer id, funnel) in catalog order.
    public var funnel: [(offerId: String, funnel: FunnelRow)]
    public var summary: [EligibilitySummaryRow]
    /// Apple's `eligibleWinBackOfferIds` beside winback's evaluation at their signedDate (§4.5).
    public var apple: AppleAgreement
    /// The run's experiment (docs/rules.md §9); nil = none, and no uplift.
    public var experiment: Experiment?
    /// The uplift's counted rows: per cohort month, one per catalog offer in catalog order
    /// (``UpliftReport/table(_:offerIds:)`` adds the `*` rows).
    public var uplift: [UpliftRow]
    /// Retention after a return, by kind and offer, in report order, without the `*` row.
    public var retention: [RetentionRow]
    /// Revenue after a return (docs/rules.md §13.2), in report order, without the `*` rows.
    public var revenue: [RevenueRow]
    /// What the manifest says of amounts (docs/rules.md §13.1).
    public var money: MoneyCounts
    /// `money.currency`; nil = amounts per currency.
    public var reportingCurrency: String?
    /// `money.horizonMonths` (docs/rules.md §13.3).
    public var horizonMonths: Int

    /// What one worker counts over its shard.
    struct Tally {
        var redemptions: [RedemptionReport.Key: RedemptionRow] = [:]
        /// Months × catalog offers, month-major.
        var rates: [RedemptionRateRow]
        var summary: [EligibilitySummaryReport.Key: Int] = [:]
        /// Window months × catalog offers, month-major; empty without an experiment.
        var uplift: [UpliftRow]
        var retention: [RetentionReport.Key: RetentionRow] = [:]
        var revenue: [RevenueReport.Key: RevenueRow] = [:]
        var money = MoneyTally()

        init(rates: [RedemptionRateRow], uplift: [UpliftRow]) {
            self.rates = rates
            self.uplift = uplift
        }

        mutating func add(_ o: Tally) {
            redemptions.add(o.redemptions)
            for i in rates.indices { rates[i] = rates[i] + o.rates[i] }
            for (k, n) in o.summary { summary[k, default: 0] += n }
            for i in uplift.indices { uplift[i] = uplift[i] + o.uplift[i] }
            retention.add(o.retention)
            revenue.add(o.revenue)
            money.add(o.money)
        }
    }

    /// Tallies between pieces of work. Tallies are sums, so a worker carries one across the
    /// pieces it takes, and only about one per thread is merged at the end.
    final class TallyPool: Sendable {
        private let free = Mutex<[Tally]>([])

        func take() -> Tally? {
            free.withLock { $0.popLast() }
        }

        func put(_ t: Tally) {
            free.withLock { $0.append(t) }
        }

        var tallies: [Tally] {
            free.withLock { $0 }
        }
    }

    /// Computes every report at `audience.asOf`.
    ///
    /// - Parameters:
    ///   - customers: the run's rows by customer (the same the audience was evaluated on).
    ///   - audience: the evaluation at T, with renewal info as in the run.
    ///   - windowMonths: complete months before the month containing T.
    ///   - gapDays: `consecutiveGapDays`, for episodes and for the monthly reconstructions.
    ///   - renewals: the run's renewal info, for the agreement with Apple; nil compares nobody.
    ///   - rates: `money`'s rates (docs/rules.md §13.1); nil keeps amounts per currency.
    ///   - horizonMonths: `money.horizonMonths`, the months of a cohort's revenue (§13.3).
    public static func compute(
        customers: CustomerRows, audience: Audience, book: OfferBook, windowMonths: Int, gapDays: Int64,
        retentionMonths: Int = 24, renewals: RenewalIndex? = nil, rates: Rates? = nil, horizonMonths: Int = 3,
        threads: Int
    ) -> Reports {
        let converter = AmountConverter(rates: rates, strings: customers.strings)
        let money = CohortMoney(converter: converter, horizonMonths: Int64(horizonMonths))
        let t = audience.asOf
        let window = ReportWindow(asOf: t, months: windowMonths)
        let results = audience.results
        let rateCells = RedemptionRatesReport.cells(window, book: book)
        let experiment = audience.experiment
        let upliftCells = UpliftReport.cells(window, book: book, experiment: experiment)
        let cohorts = experiment.map { UpliftReport.cohorts(window, $0) } ?? 0..<0
        let since = RetentionReport.since(asOf: t, months: retentionMonths)
        // No id is -3: without an interned "" nothing matches.
        let emptyId = customers.strings.lookup("") ?? -3
        let pieces = chunks(results.count, pieces: max(1, threads) * 8)
        let pool = TallyPool()
        try? parallelFor(count: pieces.count, threads: threads) { p in
            var tally = pool.take() ?? Tally(rates: rateCells, uplift: upliftCells)
            var episodes: [Episode] = []
            var periods: [Period] = []
            var returns: [Return] = []
            var seen: [RedemptionReport.Key] = []
            var scratch = RedemptionRatesReport.Scratch()
            // A result's fields are read where it is stored: a copy of the whole result took a
            // reference to each of its arrays, per customer.
            for i in pieces[p] {
                let k = Int(results[i].customer)
                let rows = customers.rows(of: k)
                let group = customers.groups[k]
                Episode.scan(rows, asOf: t, gapDays: gapDays, into: &episodes)
                RedemptionReport.count(
                    episodes, window: window, emptyId: emptyId, into: &tally.redemptions, seen: &seen)
                RedemptionRatesReport.count(
                    rows: rows, group: group, episodes: episodes, book: book, window: window, gapDays: gapDays,
                    scratch: &scratch, into: &tally.rates, cohorts: cohorts, heldOut: results[i].heldOut, money: money,
                    uplift: &tally.uplift)
                RetentionReport.returns(rows: rows, asOf: t, since: since, periods: &periods, into: &returns)
                RetentionReport.count(returns, into: &tally.retention)
                tally.money.count(rows: rows, asOf: t, converter: converter)
                if !returns.isEmpty {
                    RevenueReport.count(
                        returns, rows: rows, asOf: t, converter: converter, into: &tally.revenue, money: &tally.money)
                }
                if results[i].timeline.state == .churned {
                    EligibilitySummaryReport.count(
                        group: group, results[i].timeline,
                        lastWinBackEnd: EligibilitySummaryReport.lastWinBackEnd(rows, asOf: t),
                        asOf: t, into: &tally.summary)
                }
            }
            pool.put(tally)
        }
        var tallies = pool.tallies
        var total = tallies.popLast() ?? Tally(rates: rateCells, uplift: upliftCells)
        for s in tallies { total.add(s) }
        return Reports(
            window: window,
            redemptions: RedemptionReport.rows(total.redemptions, strings: customers.strings),
            rates: total.rates,
            funnel: FunnelReport.rows(audience, book: book),
            summary: EligibilitySummaryReport.rows(total.summary, strings: customers.strings),
            apple: AppleAgreement.compute(
                customers: customers, audience: audience, book: book, renewals: renewals, gapDays: gapDays,
                threads: threads),
            experiment: experiment, uplift: UpliftReport.rows(total.uplift, window: window, experiment: experiment),
            retention: RetentionReport.rows(total.retention, strings: customers.strings),
            revenue: RevenueReport.rows(total.revenue, strings: customers.strings, reporting: rates?.currency),
            money: total.money.counts(strings: customers.strings), reportingCurrency: rates?.currency,
            horizonMonths: horizonMonths)
    }
}
