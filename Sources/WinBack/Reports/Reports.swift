/// The four reports of SPEC §4.3, computed in one parallel pass over the customers already in
/// memory: the rows the segments were built from, and the audience evaluated at T.
///
/// Pure: no files, no clock. Each worker tallies a contiguous shard of customers into its own
/// slot; tallies are sums and every report is sorted on a total order at the end, so the result
/// is the same for any thread count.
public struct Reports: Sendable {
    public var window: ReportWindow
    public var redemptions: [RedemptionRow]
    public var rates: [RedemptionRateRow]
    /// (offer id, funnel) in catalog order.
    public var funnel: [(offerId: String, funnel: FunnelRow)]
    public var summary: [EligibilitySummaryRow]

    /// What one worker counts over its shard.
    struct Tally {
        var redemptions: [RedemptionReport.Key: RedemptionReport.Counts] = [:]
        /// Months × catalog offers, month-major.
        var rates: [RedemptionRatesReport.Counts]
        var summary: [EligibilitySummaryReport.Key: Int] = [:]

        init(cells: Int) { rates = Array(repeating: .init(), count: cells) }

        mutating func add(_ o: Tally) {
            for (k, c) in o.redemptions { redemptions[k, default: .init()].add(c) }
            for i in rates.indices { rates[i].add(o.rates[i]) }
            for (k, n) in o.summary { summary[k, default: 0] += n }
        }
    }

    /// Computes every report at `audience.asOf`.
    ///
    /// - Parameters:
    ///   - customers: the run's rows by customer (the same the audience was evaluated on).
    ///   - audience: the evaluation at T, with renewal info as in the run.
    ///   - windowMonths: complete months before the month containing T.
    ///   - gapDays: `consecutiveGapDays`, for episodes and for the monthly reconstructions.
    public static func compute(
        customers: CustomerRows, audience: Audience, book: OfferBook, windowMonths: Int, gapDays: Int64,
        threads: Int
    ) -> Reports {
        let t = audience.asOf
        let window = ReportWindow(asOf: t, months: windowMonths)
        let results = audience.results
        let cells = window.months.count * book.offers.count
        // No id is -3: without an interned "" nothing matches.
        let emptyId = customers.strings.lookup("") ?? -3
        let pieces = chunks(results.count, pieces: max(1, threads) * 8)
        let slots = ResultSlots<Tally>(count: pieces.count)
        try? parallelFor(count: pieces.count, threads: threads) { p in
            var tally = Tally(cells: cells)
            var episodes: [Episode] = []
            var seen: [RedemptionReport.Key] = []
            var scratch = RedemptionRatesReport.Scratch()
            for i in pieces[p] {
                let r = results[i]
                let k = Int(r.customer)
                let rows = customers.rows(of: k)
                let group = customers.groups[k]
                Episode.scan(rows, asOf: t, gapDays: gapDays, into: &episodes)
                RedemptionReport.count(
                    episodes, window: window, emptyId: emptyId, into: &tally.redemptions, seen: &seen)
                RedemptionRatesReport.count(
                    rows: rows, group: group, episodes: episodes, book: book, window: window, gapDays: gapDays,
                    scratch: &scratch, into: &tally.rates)
                if r.timeline.state == .churned {
                    EligibilitySummaryReport.count(
                        group: group, r.timeline, lastWinBackEnd: EligibilitySummaryReport.lastWinBackEnd(rows, asOf: t),
                        asOf: t, into: &tally.summary)
                }
            }
            slots[p] = tally
        }
        var total = Tally(cells: cells)
        for s in slots.all { total.add(s) }
        return Reports(
            window: window,
            redemptions: RedemptionReport.rows(total.redemptions, strings: customers.strings),
            rates: RedemptionRatesReport.rows(total.rates, book: book, window: window),
            funnel: FunnelReport.rows(audience, book: book),
            summary: EligibilitySummaryReport.rows(total.summary, strings: customers.strings))
    }
}
