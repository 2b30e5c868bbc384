import WinBackModel

/// The sections of `report.html` that measure the campaign (docs/rules.md §9.4): the lift of
/// the holdout experiment as a forest plot, the two arms' monthly return rates, and retention
/// after a return by kind. Every coordinate is an integer, so the same reports give the same bytes.
extension ReportPage {
    /// The experiment's sections; a note saying how to set one up when there is none.
    static func experimentSections(_ reports: Reports, into h: inout HTML) {
        h.line("<h2>Did the campaign work?</h2>")
        guard let e = reports.experiment else {
            h.line(
                "<p class=\"note\">No experiment is configured. Add an <code>experiment:</code> block (name, holdout,"
                    + " start) to the pipeline file to hold out a random share of customers and measure the lift"
                    + " the win-back campaign adds (README, \"Measuring a campaign\").</p>")
            return
        }
        let offers = reports.funnel.map(\.offerId)
        let table = UpliftReport.table(reports.uplift, offerIds: offers)
        let overall = table.filter { $0.month == "*" }
        let months = table.filter { $0.month != "*" && $0.offerId == "*" }
        h.line(
            "<p class=\"note\">Experiment \(escape(e.name)): \(e.percent) of customers held out of every audience"
                + " since \(Timestamp.date(e.start)) (winback-uplift.csv). Each cohort month counts the customers"
                + " eligible for an offer at its first instant under their best offer; the lift is the treatment's"
                + " return rate less the holdout's, with Newcombe's 95 % interval: the campaign's effect on everyone"
                + " it targeted (intent-to-treat). An interval that holds zero has not shown an effect yet.</p>")
        if months.isEmpty {
            h.line(
                "<p class=\"note\">No complete month of the report window starts on or after the experiment's start"
                    + " yet: the first cohort month is the first whole month after it.</p>")
        }
        h.line("<h3>Lift in return rate, every cohort month</h3>")
        forestPlot(overall, into: &h)
        if !months.isEmpty {
            h.line("<h3>Return rate by cohort month</h3>")
            if months.contains(where: { $0.treatment.customers > 0 || $0.holdout.customers > 0 }) {
                armChart(months, into: &h)
            } else {
                h.line("<p class=\"note\">No eligible customer in any cohort month.</p>")
            }
        }
    }

    /// One row per offer and overall: the lift as a point, its interval as a bar, zero marked;
    /// the scale the smallest step of 1, 2 or 5 hundredths up to 1 that holds every lift.
    static func forestPlot(_ rows: [UpliftRow], into h: inout HTML) {
        let figures = rows.map { r in
            let tip = r.lift.map { l in
                "\(ForestRow.label(r.offerId)): lift \(points(l.lift)) [\(points(l.low)), \(points(l.high))];"
                    + " treatment \(r.treatment.returned)/\(r.treatment.customers),"
                    + " holdout \(r.holdout.returned)/\(r.holdout.customers)"
            }
            return ForestRow(
                offerId: r.offerId, point: r.lift?.lift, interval: r.lift.map { ($0.low, $0.high) },
                text: forestText(r), tip: tip ?? "")
        }
        forestPlot(
            figures, unit: 1, ariaLabel: "Lift in return rate per offer, with 95 % intervals",
            scale: { reach in [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0].first { reach <= $0 } ?? 1.0 }, axis: points,
            into: &h)
    }

    /// The numbers right of a forest plot's row.
    static func forestText(_ r: UpliftRow) -> String {
        guard let l = r.lift else { return "no interval (an arm has nobody)" }
        return "\(points(l.lift)) [\(points(l.low)), \(points(l.high))] · \(signed(r.incrementalReturns ?? 0)) returns"
    }

    /// A generous width in pixels of `s` in the charts' 11 px text: no text is wider, so a
    /// chart sized by it never clips a label or a legend.
    static func textWidth(_ s: String) -> Int { 7 * s.count }

    /// Per cohort month, the treatment's and the holdout's return rates side by side.
    static func armChart(_ rows: [UpliftRow], into h: inout HTML) {
        let left = 48
        let top = 22
        let plot = 150
        let bar = 18
        let pitch = 64
        let legend = [("treatment", "treatment (in the audiences)"), ("holdout", "holdout (left out)")]
        // The legend on one line when the bars leave room for it, else one entry a line, the
        // chart as wide as its longest entry: never clipped, whatever the number of months.
        let bars = left + rows.count * pitch + 8
        let side = left + 220 + 18 + textWidth(legend[1].1) + 8 <= bars
        let width = side ? bars : max(bars, left + 18 + legend.map { textWidth($0.1) }.max()! + 8)
        let height = top + plot + 56 + (side ? 0 : 18 * (legend.count - 1))
        let scale = rateScale(
            rows.flatMap {
                [($0.treatment.returned, $0.treatment.customers), ($0.holdout.returned, $0.holdout.customers)]
            })
        h.line(
            "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\""
                + " role=\"img\" aria-label=\"Return rate of treatment and holdout by cohort month\">")
        rateGrid(left: left, right: bars - 8, top: top, plot: plot, scale: scale, into: &h)
        for (i, r) in rows.enumerated() {
            for (j, (arm, name)) in [(r.treatment, "treatment"), (r.holdout, "holdout")].enumerated() {
                let x = left + i * pitch + pitch / 2 - bar + j * bar
                let tip =
                    "\(r.month) \(name): \(arm.returned) of \(arm.customers) returned"
                    + (arm.customers > 0 ? " (\(percent(arm.returned, arm.customers)))" : "")
                guard arm.customers > 0 else {
                    h.line(
                        "<rect class=\"empty\" x=\"\(x)\" y=\"\(top + plot - 2)\" width=\"\(bar)\" height=\"2\"><title>\(escape(tip))</title></rect>"
                    )
                    continue
                }
                let bh = barHeight(arm.returned, of: arm.customers, scale: scale, plot: plot)
                h.line(
                    "<rect class=\"\(name)\" x=\"\(x)\" y=\"\(top + plot - bh)\" width=\"\(bar)\" height=\"\(bh)\"><title>\(escape(tip))</title></rect>"
                )
            }
            h.line(
                "<text x=\"\(left + i * pitch + pitch / 2)\" y=\"\(top + plot + 16)\" text-anchor=\"middle\">\(escape(r.month))</text>"
            )
        }
        for (k, (cls, label)) in legend.enumerated() {
            let lx = side ? left + 220 * k : left
            let ly = top + plot + 34 + (side ? 0 : 18 * k)
            h.line("<rect class=\"\(cls)\" x=\"\(lx)\" y=\"\(ly)\" width=\"12\" height=\"12\"/>")
            h.line("<text x=\"\(lx + 18)\" y=\"\(ly + 10)\">\(label)</text>")
        }
        h.line("</svg>")
    }

    /// Retention after a return, per kind: the share of returns still subscribed 1, 3, 6 and 12
    /// months after they began, among those whose horizon has passed.
    static func retentionSection(_ rows: [RetentionRow], into h: inout HTML) {
        h.line("<h2>Do returning customers stay?</h2>")
        var byKind: [RetentionRow] = []
        for r in rows {
            if let i = byKind.firstIndex(where: { $0.kind == r.kind }) {
                byKind[i] = byKind[i] + r
            } else {
                byKind.append(RetentionRow(kind: r.kind, offerId: "") + r)
            }
        }
        h.line(
            "<p class=\"note\">Every return of the last months (a subscription starting at least a whole month after"
                + " the customer's last one ended), by how it began; of the returns whose horizon has passed, the"
                + " share subscribed at it (retention-after-return.csv). A point needs at least one observable"
                + " return.</p>")
        guard !byKind.isEmpty else {
            h.line("<p class=\"note\">No return in the period.</p>")
            return
        }
        let left = 60
        let top = 14
        let plot = 160
        let span = 440
        let legend = byKind.map { "\($0.kind) (\($0.returns) returns)" }
        let width = max(left + span + 230, left + span + 34 + (legend.map(textWidth).max() ?? 0) + 8)
        let height = top + plot + 36
        let hs = RetentionReport.horizons
        func x(_ k: Int) -> Int { left + Int(hs[k] - 1) * span / Int(hs[hs.count - 1] - 1) }
        h.line(
            "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\""
                + " role=\"img\" aria-label=\"Retention after a return by kind\">")
        for k in [0, 1, 2, 3, 4] {
            let y = top + plot - plot * k / 4
            h.line(
                "<line class=\"\(k == 0 ? "axis" : "grid")\" x1=\"\(left)\" y1=\"\(y)\" x2=\"\(left + span)\" y2=\"\(y)\"/>"
            )
            h.line("<text x=\"\(left - 6)\" y=\"\(y + 4)\" text-anchor=\"end\">\(25 * k)%</text>")
        }
        for k in hs.indices {
            h.line("<text x=\"\(x(k))\" y=\"\(top + plot + 16)\" text-anchor=\"middle\">\(hs[k]) mo</text>")
        }
        for (n, r) in byKind.enumerated() {
            let cls = "kind\(RetentionReport.kindRank(r.kind))"
            var pts: [(Int, Int)] = []
            for k in hs.indices where r.observable[k] > 0 {
                let y = top + plot - (2 * plot * r.retained[k] + r.observable[k]) / (2 * r.observable[k])
                pts.append((x(k), y))
                let tip = "\(r.kind), \(hs[k]) months: \(r.retained[k]) of \(r.observable[k]) retained"
                h.line(
                    "<circle class=\"\(cls)\" cx=\"\(x(k))\" cy=\"\(y)\" r=\"4\"><title>\(escape(tip))</title></circle>"
                )
            }
            if pts.count > 1 {
                let path = pts.map { "\($0.0),\($0.1)" }.joined(separator: " ")
                h.line("<polyline class=\"\(cls) line\" points=\"\(path)\"/>")
            }
            let ly = top + 6 + n * 18
            h.line("<rect class=\"\(cls)\" x=\"\(left + span + 16)\" y=\"\(ly)\" width=\"12\" height=\"12\"/>")
            h.line(
                "<text x=\"\(left + span + 34)\" y=\"\(ly + 10)\">\(escape(legend[n]))</text>")
        }
        h.line("</svg>")
    }

    /// A count with its sign (`+4`, `−3`, `0`).
    static func signed(_ n: Int) -> String { n > 0 ? "+\(n)" : n < 0 ? "−\(-n)" : "0" }

    /// A difference of rates in percentage points with one decimal and its sign.
    static func points(_ v: Double) -> String {
        let tenths = Int((v * 1000).rounded(.toNearestOrAwayFromZero))
        let sign = tenths > 0 ? "+" : tenths < 0 ? "−" : ""
        return "\(sign)\(abs(tenths) / 10).\(abs(tenths) % 10) pp"
    }
}
