import WinBackModel
import WinBackSupport

/// The section of `report.html` that answers "did the discount pay?" (docs/rules.md §13.4): the
/// incremental revenue per targeted customer against the holdout, per offer and in total, as a
/// forest plot in the reporting currency; and revenue after a return per kind at each horizon.
/// Every coordinate is an integer, so the same reports give the same bytes.
extension ReportPage {
    static func moneySection(_ reports: Reports, into h: inout HTML) {
        h.line("<h2>Did the discount pay?</h2>")
        if reports.experiment == nil {
            h.line(
                "<p class=\"note\">Revenue against a holdout needs an experiment: add an <code>experiment:</code>"
                    + " block to the pipeline file (README, \"Did the discount pay?\").</p>")
        } else if let currency = RevenueUpliftReport.currency(reports) {
            let all = RevenueUpliftReport.figures(reports.uplift, offerIds: reports.funnel.map(\.offerId))
            let overall = all.filter { $0.month == "*" }
            h.line(
                "<p class=\"note\">Revenue per targeted customer over the \(reports.horizonMonths) months from each"
                    + " cohort month's start, net of refunds, in \(escape(currency)) (winback-revenue-uplift.csv):"
                    + " the treatment's less the holdout's, with a 95 % interval. It nets out the discount given"
                    + " and the customers who would have paid full price anyway; an interval that holds zero has"
                    + " not shown that the offer earns more. Only cohort months whose horizon has passed count.</p>")
            // Each offer on an axis of its own: one offer's large figures never flatten the others'
            // (docs/rules.md §10.10).
            for row in overall { revenueForestPlot([row], currency: currency, into: &h) }
        } else {
            h.line(
                "<p class=\"note\">The rows are priced in several currencies (\(escape(reports.money.currencies.sorted().joined(separator: ", "))))"
                    + " and the pipeline has no <code>money:</code> block to convert them, so revenue against the"
                    + " holdout is not computed.</p>")
        }
        revenueAfterReturn(reports, into: &h)
    }

    /// One row per offer and overall: incremental revenue per targeted customer as a point, its
    /// interval as a bar, zero marked; the scale 1, 2 or 5 × 10ⁿ units, the smallest that holds
    /// every lift and the overall interval.
    static func revenueForestPlot(_ rows: [RevenueUpliftReport.Figures], currency: String, into h: inout HTML) {
        let figures = rows.map { f in
            var text = "no figure (an arm has nobody, or no horizon has passed)"
            if f.lift != nil {
                let interval = f.interval.map {
                    " [\(Milliunits.display(double: $0.low, currency: currency)), "
                        + "\(Milliunits.display(double: $0.high, currency: currency))]"
                }
                text =
                    "\(Milliunits.display(f.liftText, currency: currency))\(interval ?? "") \(currency) · "
                    + "\(Milliunits.display(f.incrementalText, currency: currency)) \(currency) in all"
            }
            return ForestRow(
                offerId: f.offerId, point: f.lift, interval: f.interval, text: text,
                tip: "\(ForestRow.label(f.offerId)): \(text); treatment \(f.treatmentCustomers), holdout"
                    + " \(f.holdoutCustomers) customers")
        }
        forestPlot(
            figures, unit: 1000,
            ariaLabel: "Incremental revenue per targeted customer per offer, with 95 % intervals",
            scale: { reach in
                var scale = 0.01
                var mantissa = 1
                while scale < reach && scale < 1e15 {
                    scale *= mantissa == 2 ? 2.5 : 2
                    mantissa = mantissa == 1 ? 2 : mantissa == 2 ? 5 : 1
                }
                return scale
            }, axis: { "\(Milliunits.display(double: $0 * 1000, currency: currency)) \(escape(currency))" },
            into: &h)
    }

    /// Net revenue per return at 1, 3, 6 and 12 months, per kind and currency (offers summed).
    static func revenueAfterReturn(_ reports: Reports, into h: inout HTML) {
        h.line("<h3>Revenue after a return</h3>")
        var byKind: [RevenueRow] = []
        for r in reports.revenue {
            if let last = byKind.last, last.kind == r.kind, last.currency == r.currency {
                byKind[byKind.count - 1] = last + r
            } else {
                byKind.append(RevenueRow(kind: r.kind, offerId: "", currency: r.currency) + r)
            }
        }
        // Offer ids were summed away: kind, then currency, in report order.
        byKind = RevenueReport.sorted(byKind)
        guard !byKind.isEmpty else {
            h.line(
                "<p class=\"note\">No return with an amount yet (revenue-after-return.csv): rows need"
                    + " <code>price</code> and <code>currency</code>.</p>")
            return
        }
        h.line(
            "<p class=\"note\">Net revenue per return (after refunds) from the return until each horizon, over the"
                + " returns whose horizon has passed (revenue-after-return.csv).</p>")
        h.line("<div class=\"scroll\"><table class=\"audience\">")
        var head = "<thead><tr><th class=\"segment\">kind</th><th>currency</th><th>returns</th>"
        for k in RetentionReport.horizons { head += "<th>\(counted(k, "month"))</th>" }
        h.line(head + "</tr></thead><tbody>")
        for r in byKind {
            var row =
                "<tr><td class=\"segment\">\(escape(r.kind))</td><td>\(escape(r.currency))</td><td>\(r.returns)</td>"
            for k in RetentionReport.horizons.indices {
                let v = r.netPerReturn(k)
                row += "<td>\(v.isEmpty ? "–" : escape(Milliunits.display(v, currency: r.currency)))</td>"
            }
            h.line(row + "</tr>")
        }
        h.line("</tbody></table></div>")
    }
}
