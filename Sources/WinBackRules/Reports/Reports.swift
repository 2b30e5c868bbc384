import Foundation
import Synchronization
import WinBackModel
import WinBackSupport

/// The four reports of docs/rules.md §4.3 and the agreement with Apple (§4.5), counted in the
/// evaluation's pass over the customers (``evaluate(_:book:renewals:asOf:experiment:settings:threads:)``):
/// each subscriber's rows are walked once they are at hand, their periods at T built once.
///
/// Pure: no files, no clock. Workers tally contiguous pieces of customers, each into a tally of
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

    /// What the pieces of work a thread takes count: the reports' tallies and the agreement with
    /// Apple's, sums; the disagreements with Apple, kept in customer order, are those of one
    /// piece until it ends, then those of every piece in the first tally.
    struct Tally {
        var redemptions: [RedemptionReport.Key: RedemptionRow] = [:]
        /// Months × catalog offers, month-major.
        var rates: [RedemptionRateRow]
        var summary = EligibilitySummaryReport.Tally()
        /// Window months × catalog offers, month-major; empty without an experiment.
        var uplift: [UpliftRow]
        var retention: [RetentionReport.Key: RetentionRow] = [:]
        var revenue: [RevenueReport.Key: RevenueRow] = [:]
        var money = MoneyTally()
        var apple: AppleAgreement.Tally

        init(rates: [RedemptionRateRow], uplift: [UpliftRow], offers: Int) {
            self.rates = rates
            self.uplift = uplift
            apple = AppleAgreement.Tally(offers: Array(repeating: AppleAgreement.Counts(), count: offers))
        }

        /// Adds another thread's tally (its disagreements after these).
        mutating func add(_ o: Tally) {
            redemptions.add(o.redemptions)
            for i in rates.indices { rates[i] = rates[i] + o.rates[i] }
            summary.add(o.summary)
            for i in uplift.indices { uplift[i] = uplift[i] + o.uplift[i] }
            retention.add(o.retention)
            revenue.add(o.revenue)
            money.add(o.money)
            apple.add(o.apple)
        }
    }

    /// Tallies between pieces of work: a worker carries the sums across the pieces it takes.
    final class TallyPool: Sendable {
        private let free = Mutex<[Tally]>([])

        func take() -> Tally? { free.withLock { $0.popLast() } }

        func put(_ t: Tally) { free.withLock { $0.append(t) } }

        var tallies: [Tally] { free.withLock { $0 } }
    }

    /// One piece of work's state in the evaluation's pass: the sums while it counts, its
    /// disagreements with Apple once it ends.
    struct Piece {
        var tally: Tally?
        var scratch = Counter.Scratch()
        var disagreements: [AppleAgreement.Disagreement] = []
    }

    /// What the reports take beside the customers and their evaluation: the pipeline's settings.
    public struct Settings: Sendable {
        /// Complete months before the month containing T.
        public var windowMonths: Int
        /// `consecutiveGapDays`, for the evaluation, the episodes and the monthly reconstructions.
        public var gapDays: Int64
        public var retentionMonths: Int
        /// `money`'s rates (docs/rules.md §13.1); nil keeps amounts per currency.
        public var rates: Rates?
        /// `money.horizonMonths`, the months of a cohort's revenue (§13.3).
        public var horizonMonths: Int

        public init(
            windowMonths: Int, gapDays: Int64, retentionMonths: Int = 24, rates: Rates? = nil, horizonMonths: Int = 3
        ) {
            self.windowMonths = windowMonths
            self.gapDays = gapDays
            self.retentionMonths = retentionMonths
            self.rates = rates
            self.horizonMonths = horizonMonths
        }
    }

    /// Counts one customer after another into a ``Tally``: what every report takes of a
    /// subscriber evaluated at T.
    struct Counter: Sendable {
        let customers: CustomerRows
        let book: OfferBook
        let settings: Settings
        let t: Int64
        let window: ReportWindow
        let converter: AmountConverter
        let money: CohortMoney
        let rateCells: [RedemptionRateRow]
        let upliftCells: [UpliftRow]
        let cohorts: Range<Int>
        let since: Int64
        let emptyId: Int32
        /// Whether the renewal info is compared with Apple's lists (a run without renewal info
        /// compares nobody).
        let comparesApple: Bool

        init(
            customers: CustomerRows, book: OfferBook, settings: Settings, asOf t: Int64, experiment: Experiment?,
            comparesApple: Bool
        ) {
            self.customers = customers
            self.book = book
            self.settings = settings
            self.t = t
            self.comparesApple = comparesApple
            converter = AmountConverter(rates: settings.rates, strings: customers.strings)
            money = CohortMoney(converter: converter, horizonMonths: Int64(settings.horizonMonths))
            let window = ReportWindow(asOf: t, months: settings.windowMonths)
            self.window = window
            rateCells = RedemptionRatesReport.cells(window, book: book)
            upliftCells = UpliftReport.cells(window, book: book, experiment: experiment)
            cohorts = experiment.map { UpliftReport.cohorts(window, $0) } ?? 0..<0
            since = RetentionReport.since(asOf: t, months: settings.retentionMonths)
            // No id is -3: without an interned "" nothing matches.
            emptyId = customers.strings.lookup("") ?? -3
        }

        func tally() -> Tally { Tally(rates: rateCells, uplift: upliftCells, offers: book.offers.count) }

        /// Storage one piece of work reuses from customer to customer.
        struct Scratch {
            var episodes: [Episode] = []
            var returns: [Return] = []
            var seen: [RedemptionReport.Key] = []
            var rates = RedemptionRatesReport.Scratch()
            /// The periods at the signedDate of Apple's list.
            var periods: [Period] = []
        }

        /// Counts subscriber `k`, whose rows are `rows`, whose periods at T are `periods` and whose
        /// renewal info known at T is `renewal`.
        func count(
            _ tally: inout Tally, _ k: Int, rows: [Transaction], renewal: RenewalInfo?, periods: [Period],
            _ result: CustomerResult, scratch s: inout Scratch
        ) {
            let group = customers.groups[k]
            let gapDays = settings.gapDays
            Episode.scan(rows, asOf: t, gapDays: gapDays, into: &s.episodes)
            RedemptionReport.count(
                s.episodes, window: window, emptyId: emptyId, into: &tally.redemptions, seen: &s.seen)
            RedemptionRatesReport.count(
                rows: rows, group: group, episodes: s.episodes, book: book, window: window, gapDays: gapDays,
                scratch: &s.rates, into: &tally.rates, cohorts: cohorts, heldOut: result.heldOut, money: money,
                uplift: &tally.uplift)
            RetentionReport.returns(rows: rows, asOf: t, since: since, periods: periods, into: &s.returns)
            RetentionReport.count(s.returns, into: &tally.retention)
            tally.money.count(rows: rows, asOf: t, converter: converter)
            if !s.returns.isEmpty {
                RevenueReport.count(
                    s.returns, rows: rows, asOf: t, converter: converter, into: &tally.revenue, money: &tally.money)
            }
            if result.timeline.state == .churned {
                EligibilitySummaryReport.count(
                    group: group, result.timeline,
                    lastWinBackEnd: EligibilitySummaryReport.lastWinBackEnd(rows, asOf: t),
                    asOf: t, into: &tally.summary)
            }
            if comparesApple, result.appleAnswered, let renewal {
                AppleAgreement.count(
                    &tally.apple, customer: k, rows: rows, of: customers, result, renewal: renewal, book: book,
                    gapDays: gapDays, periods: &s.periods)
            }
        }

        /// The reports of the tallies of every piece of work, in customer order.
        func reports(_ tallies: [Tally], audience: Audience) -> Reports {
            var tallies = tallies[...]
            var total = tallies.popFirst() ?? tally()
            for s in tallies { total.add(s) }
            let strings = customers.strings
            return Reports(
                window: window,
                redemptions: RedemptionReport.rows(total.redemptions, strings: strings),
                rates: total.rates,
                funnel: FunnelReport.rows(audience, book: book),
                summary: EligibilitySummaryReport.rows(total.summary, strings: strings),
                apple: AppleAgreement(total.apple, book: book),
                experiment: audience.experiment,
                uplift: UpliftReport.rows(total.uplift, window: window, experiment: audience.experiment),
                retention: RetentionReport.rows(total.retention, strings: strings),
                revenue: RevenueReport.rows(total.revenue, strings: strings, reporting: settings.rates?.currency),
                money: total.money.counts(strings: strings), reportingCurrency: settings.rates?.currency,
                horizonMonths: settings.horizonMonths)
        }
    }

    /// Evaluates every customer at `t` (``Audience/evaluate(_:book:renewals:asOf:gapDays:experiment:threads:)``)
    /// and counts every report of the evaluation in the same pass: each subscriber's rows are
    /// walked while they are at hand, and their periods at T are built once.
    ///
    /// - Parameter renewals: the run's renewal info, for the evaluation and the agreement with
    ///   Apple; nil compares nobody.
    public static func evaluate(
        _ customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, asOf t: Int64,
        experiment: Experiment? = nil, settings: Settings, threads: Int
    ) -> (audience: Audience, reports: Reports) {
        let (audience, counted) = count(
            customers, book: book, renewals: renewals, asOf: t, experiment: experiment, settings: settings,
            threads: threads)
        return (audience, counted.reports())
    }

    /// The same, the reports counted but not yet put in rows (``CountedReports/reports()``), so
    /// that a run can do that on a thread of its own beside the segments. With `releasingRows`,
    /// the customers' rows are handed back to the system as they are counted (``Audience``'s
    /// evaluate): none can be read afterwards.
    public static func count(
        _ customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, asOf t: Int64,
        experiment: Experiment? = nil, settings: Settings, threads: Int, releasingRows: Bool = false
    ) -> (audience: Audience, counted: CountedReports) {
        let counter = Counter(
            customers: customers, book: book, settings: settings, asOf: t, experiment: experiment,
            comparesApple: renewals != nil)
        // The sums are handed from piece to piece on a thread, so that about one per thread is
        // added up at the end; the disagreements with Apple stay with their piece, in order.
        let pool = TallyPool()
        let (audience, pieces) = Audience.evaluate(
            customers, book: book, renewals: renewals, asOf: t, gapDays: settings.gapDays, experiment: experiment,
            threads: threads, releasingRows: releasingRows, piece: { Piece(tally: pool.take() ?? counter.tally()) },
            visit: { piece, k, rows, renewal, periods, result in
                counter.count(
                    &piece.tally!, k, rows: rows, renewal: renewal, periods: periods, result, scratch: &piece.scratch)
            },
            ended: { piece in
                piece.disagreements = piece.tally!.apple.disagreements
                piece.tally!.apple.disagreements = []
                pool.put(piece.tally.take()!)
                piece.scratch = Counter.Scratch()
            })
        var tallies = pool.tallies
        if tallies.isEmpty { tallies = [counter.tally()] }
        tallies[0].apple.disagreements = pieces.flatMap(\.disagreements)
        return (audience, CountedReports(counter: counter, tallies: tallies, audience: audience))
    }
}

/// Every report of an evaluation counted, not yet put in rows: ``reports()`` adds the tallies up
/// and sorts each report's rows, work on one thread that a run does beside the segments.
public struct CountedReports: Sendable {
    let counter: Reports.Counter
    /// The tallies of the evaluation's threads, the disagreements with Apple in the first.
    let tallies: [Reports.Tally]
    let audience: Audience

    /// The reports.
    public func reports() -> Reports { counter.reports(tallies, audience: audience) }
}
