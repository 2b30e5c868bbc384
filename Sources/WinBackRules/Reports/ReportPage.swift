import WinBackModel

/// `reports/report.html`: one self-contained page (inline CSS and SVG, no script, nothing
/// fetched) with each win-back offer's redemption rate by month, the eligibility funnel and the
/// agreement with Apple as bars, for people who would rather look than read the CSVs.
///
/// Pure and deterministic: the same reports give the same bytes (every coordinate is an
/// integer computed from the counts).
public enum ReportPage {
    /// The page for `reports`; `title` names the pipeline. With `first`, the page opens with
    /// tonight's audience (docs/rules.md §4.3), which the run knows once its segments and
    /// destinations' files are written.
    public static func html(_ reports: Reports, title: String, first: FirstScreen? = nil) -> [UInt8] {
        var h = HTML()
        let w = reports.window
        document(title: title, asOf: w.asOf, into: &h)
        h.line("<h1>Win-back reports</h1>")
        let months = w.months.isEmpty ? "" : "; window \(w.label(0)) to \(w.label(w.months.count - 1))"
        h.line(
            "<p class=\"meta\">Pipeline \(escape(title)); as of \(day(w.asOf))\(months)."
                + " Numbers as in the CSV files beside this page.</p>")
        if let first { firstScreen(first, apple: reports.apple, asOf: w.asOf, into: &h) }

        h.line("<h2>Redemption rate by month</h2>")
        h.line(
            "<p class=\"note\">Of the customers eligible for the offer at the first instant of a month, the share"
                + " who redeemed it during that month (winback-redemption-rates.csv). Above each bar: redeemed"
                + " by eligible / eligible; a gray stub: nobody was eligible.</p>")
        let offers = reports.funnel.map(\.offerId)
        for (o, id) in offers.enumerated() {
            let rows = stride(from: o, to: reports.rates.count, by: max(1, offers.count)).map { reports.rates[$0] }
            h.line("<h3>\(escape(id))</h3>")
            guard rows.contains(where: { $0.eligibleAtMonthStart > 0 }) else {
                h.line("<p class=\"note\">No eligible customer in any month.</p>")
                continue
            }
            // Each offer's axis fits its own rates (docs/rules.md §10.10): a 3 % offer is not a sliver.
            rateChart(
                rows, scale: rateScale(rows), offerId: id,
                experimentStart: reports.experiment.map { String(Timestamp.date($0.start).prefix(7)) }, into: &h)
        }

        h.line("<h2>Eligibility funnel at \(Timestamp.date(w.asOf))</h2>")
        h.line(
            "<p class=\"note\">The offer group's customers by state; each churned customer is counted under every"
                + " criterion they fail, so the orange bars may add up to more than the churned (eligibility-funnel.csv).</p>"
        )
        for (id, f) in reports.funnel {
            h.line("<h3>\(escape(id)) <span class=\"tag\">\(f.live ? "live" : "not live")</span></h3>")
            funnelChart(f, offerId: id, into: &h)
        }

        experimentSections(reports, into: &h)
        retentionSection(reports.retention, into: &h)
        moneySection(reports, into: &h)

        let a = reports.apple
        h.line("<h2>Agreement with Apple</h2>")
        let overall =
            a.overall.compared == 0
            ? "No renewal info carries Apple's list, so nobody was compared."
            : "Overall, \(a.overall.both) of \(a.overall.compared) customers compared have exactly Apple's offers:"
                + " an agreement rate of \(a.agreementRate)."
        h.line(
            "<p class=\"note\">Customers whose renewal info carries Apple's eligibleWinBackOfferIds, evaluated again at"
                + " the instant Apple signed it (apple-agreement.csv; each disagreement is in apple-disagreements.csv)."
                + " \(overall)</p>")
        agreementLegend(into: &h)
        for (id, c) in a.offers {
            h.line("<h3>\(escape(id)) <span class=\"tag\">\(c.compared) compared</span></h3>")
            agreementChart(c, offerId: id, into: &h)
        }
        if !a.unknownIds.isEmpty {
            let listed = a.unknownIds.map { "\(escape($0.id)) (\($0.customers))" }.joined(separator: ", ")
            h.line("<p class=\"note\">Apple also listed ids the catalog lacks: \(listed).</p>")
        }
        h.raw("</body>\n</html>\n")
        return h.bytes
    }

    /// The document's head, its style and the start of its body.
    static func document(title: String, asOf: Int64, into h: inout HTML) {
        h.raw(
            """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>winback reports: \(escape(title)), \(Timestamp.date(asOf))</title>
            <style>
            body{font:14px/1.45 "DejaVu Sans",system-ui,sans-serif;margin:24px auto;max-width:900px;padding:0 16px;color:#1d1d1f;background:#fff}
            h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:32px 0 4px;border-bottom:1px solid #d2d2d7;padding-bottom:4px}
            h3{font-size:14px;margin:20px 0 4px}.meta,.note{color:#6e6e73;margin:0 0 12px}
            svg{display:block;max-width:100%;height:auto}svg text{font-size:11px;fill:#3a3a3c}
            .grid{stroke:#e5e5ea}.axis{stroke:#8e8e93}.rate{fill:#0a84ff}.empty{fill:#aeaeb2}
            .total{fill:#1d1d1f}.state{fill:#8e8e93}.drop{fill:#ff9f0a}.eligible{fill:#30d158}
            .tag{font-size:12px;color:#6e6e73;font-weight:normal}
            .both{fill:#30d158}.apple{fill:#0a84ff}.winback{fill:#ff9f0a}.neither{fill:#c7c7cc}
            .zero{stroke:#1d1d1f;stroke-dasharray:4 3}.interval{stroke:#0a84ff;stroke-width:3}.point{fill:#1d1d1f}
            .treatment{fill:#0a84ff}.holdout{fill:#aeaeb2}
            .kind0{fill:#30d158;stroke:#30d158}.kind1{fill:#0a84ff;stroke:#0a84ff}.kind2{fill:#bf5af2;stroke:#bf5af2}
            .kind3{fill:#ff9f0a;stroke:#ff9f0a}.kind4{fill:#ff375f;stroke:#ff375f}.kind5{fill:#8e8e93;stroke:#8e8e93}
            .line{fill:none;stroke-width:2}
            .scroll{overflow-x:auto}table.audience{border-collapse:collapse;margin:8px 0 4px;font-variant-numeric:tabular-nums}
            .audience th,.audience td{padding:3px 4px;border-bottom:1px solid #e5e5ea;text-align:right;white-space:nowrap}
            .audience thead th{font-size:11px;font-weight:600;color:#3a3a3c;vertical-align:bottom;white-space:normal}
            .audience tbody th,.audience th.segment{text-align:left;font-weight:normal}
            .audience th.group{text-align:center;border-bottom:1px solid #8e8e93}.audience .none{color:#aeaeb2}
            .warn{color:#8a3c00;background:#fff4e5;border-left:3px solid #ff9f0a;padding:6px 10px;margin:8px 0}
            .headlines{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0}
            .headline{flex:1 1 260px;border:1px solid #d2d2d7;border-radius:8px;padding:10px 12px}
            .headline .tool{font-weight:600}.headline .big{font-size:28px;font-weight:600;line-height:1.2}
            .headline .small{color:#6e6e73;font-size:12px}
            </style>
            </head>
            <body>

            """)
    }

    // MARK: Charts

    /// A rate scale: the smallest of these at or above every rate (bars use the full height).
    static func rateScale(_ rows: [RedemptionRateRow]) -> (num: Int, den: Int) {
        rateScale(rows.map { ($0.redeemedByEligible, $0.eligibleAtMonthStart) })
    }

    /// The smallest step at or above every fraction n / d (those with d = 0 aside).
    static func rateScale(_ fractions: [(n: Int, d: Int)]) -> (num: Int, den: Int) {
        let steps = [(1, 100), (2, 100), (5, 100), (1, 10), (2, 10), (1, 4), (1, 2), (1, 1)]
        return steps.first { s in fractions.allSatisfy { $0.d == 0 || $0.n * s.1 <= s.0 * $0.d } } ?? (1, 1)
    }

    /// The height of a bar for n / d (d > 0) on a plot of `plot` pixels for `scale`: plot × rate /
    /// scale, rounded half up on integers, at most the plot.
    static func barHeight(_ n: Int, of d: Int, scale: (num: Int, den: Int), plot: Int) -> Int {
        min(plot, (2 * plot * n * scale.den + d * scale.num) / (2 * d * scale.num))
    }

    /// Gridlines at 0, half and full scale from `left` to `right`, labelled in percent.
    static func rateGrid(left: Int, right: Int, top: Int, plot: Int, scale: (num: Int, den: Int), into h: inout HTML) {
        for (k, label) in [(0, "0%"), (1, percent(scale.num, 2 * scale.den)), (2, percent(scale.num, scale.den))] {
            let y = top + plot - plot * k / 2
            h.line(
                "<line class=\"\(k == 0 ? "axis" : "grid")\" x1=\"\(left)\" y1=\"\(y)\" x2=\"\(right)\" y2=\"\(y)\"/>")
            h.line("<text x=\"\(left - 6)\" y=\"\(y + 4)\" text-anchor=\"end\">\(label)</text>")
        }
    }

    /// `experimentStart` (YYYY-MM): the month the experiment starts, marked on the chart when it
    /// is one of its months (docs/rules.md §10.10).
    static func rateChart(
        _ rows: [RedemptionRateRow], scale: (num: Int, den: Int), offerId: String, experimentStart: String? = nil,
        into h: inout HTML
    ) {
        let left = 48
        let top = 22
        let plot = 150
        let bar = 40
        let pitch = 64
        let width = left + max(1, rows.count) * pitch + 8
        let height = top + plot + 36
        h.line(
            "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\""
                + " role=\"img\" aria-label=\"Redemption rate of \(escape(offerId)) by month\">")
        rateGrid(left: left, right: width - 8, top: top, plot: plot, scale: scale, into: &h)
        if let start = experimentStart, let i = rows.firstIndex(where: { $0.month == start }) {
            let x = left + i * pitch
            // The label beside the line, on whichever side holds it inside the picture.
            var label = "experiment starts"
            if x + 4 + 7 * label.count > width - 8 && x - 4 - 7 * label.count < 0 { label = "start" }
            let right = x + 4 + 7 * label.count <= width - 8
            h.line("<line class=\"zero\" x1=\"\(x)\" y1=\"\(top - 16)\" x2=\"\(x)\" y2=\"\(top + plot)\"/>")
            h.line(
                "<text x=\"\(right ? x + 4 : x - 4)\" y=\"\(top - 11)\" text-anchor=\"\(right ? "start" : "end")\">"
                    + "\(label)</text>")
        }
        for (i, r) in rows.enumerated() {
            let x = left + i * pitch + (pitch - bar) / 2
            let cx = x + bar / 2
            let tip =
                "\(r.month): \(r.redeemedByEligible) of \(r.eligibleAtMonthStart) eligible redeemed"
                + (r.eligibleAtMonthStart > 0 ? " (\(percent(r.redeemedByEligible, r.eligibleAtMonthStart)))" : "")
                + ", \(r.redeemedTotal) redeemed in all"
            if r.eligibleAtMonthStart == 0 {
                h.line(
                    "<rect class=\"empty\" x=\"\(x)\" y=\"\(top + plot - 2)\" width=\"\(bar)\" height=\"2\"><title>\(escape(tip))</title></rect>"
                )
                h.line("<text x=\"\(cx)\" y=\"\(top + plot - 6)\" text-anchor=\"middle\">n/a</text>")
            } else {
                let bh = barHeight(r.redeemedByEligible, of: r.eligibleAtMonthStart, scale: scale, plot: plot)
                h.line(
                    "<rect class=\"rate\" x=\"\(x)\" y=\"\(top + plot - bh)\" width=\"\(bar)\" height=\"\(bh)\"><title>\(escape(tip))</title></rect>"
                )
                h.line(
                    "<text x=\"\(cx)\" y=\"\(top + plot - bh - 6)\" text-anchor=\"middle\">\(r.redeemedByEligible)/\(r.eligibleAtMonthStart)</text>"
                )
            }
            h.line("<text x=\"\(cx)\" y=\"\(top + plot + 16)\" text-anchor=\"middle\">\(escape(r.month))</text>")
        }
        h.line("</svg>")
    }

    static func funnelChart(_ f: FunnelRow, offerId: String, into h: inout HTML) {
        // The funnel's columns (``FunnelReport/columns``), drawn from the criteria.
        let bars: [(String, Int, String)] =
            [("customers in group", f.customersInGroup, "total")]
            + Criterion.funnel(.state).map { ($0.words, f[$0], "state") } + [("churned", f.churned, "state")]
            + Criterion.funnel(.drop).map { ($0.words, f[$0], "drop") } + [("eligible", f.eligible, "eligible")]
        let left = 150
        let full = 560
        let pitch = 20
        let bar = 14
        let width = left + full + 60
        let height = bars.count * pitch + 6
        let most = max(1, f.customersInGroup)
        h.line(
            "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\""
                + " role=\"img\" aria-label=\"Eligibility funnel of \(escape(offerId))\">")
        for (i, (label, value, cls)) in bars.enumerated() {
            let y = 3 + i * pitch
            let len = (2 * full * value + most) / (2 * most)
            h.line("<text x=\"\(left - 8)\" y=\"\(y + 11)\" text-anchor=\"end\">\(label)</text>")
            h.line(
                "<rect class=\"\(cls)\" x=\"\(left)\" y=\"\(y)\" width=\"\(max(len, value > 0 ? 1 : 0))\" height=\"\(bar)\"><title>\(label): \(value)</title></rect>"
            )
            h.line("<text x=\"\(left + len + 6)\" y=\"\(y + 11)\">\(value)</text>")
        }
        h.line("</svg>")
    }

    /// The four parts of an offer's agreement bar, in drawing order.
    static func agreementParts(_ c: AppleAgreement.Counts) -> [(label: String, value: Int, cls: String)] {
        [
            ("both eligible", c.both, "both"), ("only Apple", c.appleOnly, "apple"),
            ("only winback", c.winbackOnly, "winback"), ("neither", c.neither, "neither"),
        ]
    }

    static func agreementLegend(into h: inout HTML) {
        let parts = agreementParts(AppleAgreement.Counts())
        let pitch = 150
        let width = parts.count * pitch
        h.line(
            "<svg width=\"\(width)\" height=\"20\" viewBox=\"0 0 \(width) 20\" role=\"img\" aria-label=\"Legend\">")
        for (i, p) in parts.enumerated() {
            h.line("<rect class=\"\(p.cls)\" x=\"\(i * pitch)\" y=\"4\" width=\"12\" height=\"12\"/>")
            h.line("<text x=\"\(i * pitch + 18)\" y=\"14\">\(p.label)</text>")
        }
        h.line("</svg>")
    }

    /// One stacked bar: the offer's compared customers split into the four parts; the parts'
    /// edges are rounded from running totals, so the bar always has its full length.
    static func agreementChart(_ c: AppleAgreement.Counts, offerId: String, into h: inout HTML) {
        let left = 150
        let full = 560
        let bar = 16
        let width = left + full + 110
        let height = bar + 8
        h.line(
            "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\""
                + " role=\"img\" aria-label=\"Agreement with Apple on \(escape(offerId))\">")
        let rate = Rate.format(c.compared - c.appleOnly - c.winbackOnly, c.compared)
        h.line(
            "<text x=\"\(left - 8)\" y=\"\(4 + 12)\" text-anchor=\"end\">"
                + (c.compared == 0 ? "nobody compared" : "agreement \(rate)") + "</text>")
        if c.compared == 0 {
            h.line("<rect class=\"empty\" x=\"\(left)\" y=\"\(4 + bar / 2 - 1)\" width=\"\(full)\" height=\"2\"/>")
        } else {
            var sum = 0
            var x = left
            for p in agreementParts(c) {
                sum += p.value
                let end = left + (2 * full * sum + c.compared) / (2 * c.compared)
                if end > x {
                    h.line(
                        "<rect class=\"\(p.cls)\" x=\"\(x)\" y=\"4\" width=\"\(end - x)\" height=\"\(bar)\">"
                            + "<title>\(p.label): \(p.value) of \(c.compared)</title></rect>")
                }
                x = end
            }
            // The four counts, in the legend's order.
            let counts = agreementParts(c).map { String($0.value) }.joined(separator: " · ")
            h.line("<text x=\"\(left + full + 8)\" y=\"\(4 + 12)\">\(counts)</text>")
        }
        h.line("</svg>")
    }

    // MARK: Text

    /// `n / d` as a percentage with one decimal, rounded half up (d > 0).
    static func percent(_ n: Int, _ d: Int) -> String {
        let tenths = (n * 2000 + d) / (2 * d)
        return "\(tenths / 10).\(tenths % 10)%"
    }

    /// Text safe in HTML content and attribute values.
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// A byte buffer of HTML lines.
    struct HTML {
        var bytes: [UInt8] = []
        mutating func raw(_ s: String) { bytes += Array(s.utf8) }
        mutating func line(_ s: String) {
            raw(s)
            bytes.append(UInt8(ascii: "\n"))
        }
    }
}
