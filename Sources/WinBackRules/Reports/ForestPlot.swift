/// The forest plots of `report.html` (docs/rules.md §9.4, §13.4): the lift in return rate and
/// the incremental revenue, per offer and overall. Every coordinate is an integer, so the same
/// reports give the same bytes.
extension ReportPage {
    /// One row of a forest plot.
    struct ForestRow {
        /// A catalog offer's id, or `*` for all offers (in bold).
        var offerId: String
        /// The figure; nil when there is none (the row shows only `text`).
        var point: Double?
        /// The figure's 95 % interval, drawn as a bar.
        var interval: (low: Double, high: Double)?
        /// The numbers right of the row.
        var text: String
        /// The title of the point and of the bar.
        var tip: String

        /// What the row is called on the plot.
        static func label(_ offerId: String) -> String { offerId == "*" ? "all offers" : offerId }
    }

    /// One row per offer and overall: the figure as a point, its interval as a bar, zero marked.
    ///
    /// Figures are in `unit`s of the axis (1000 for milliunits). The axis is the same either
    /// side of zero: `scale(reach)` axis units, `reach` the largest figure or bound of the last
    /// (overall) row's interval. An offer with few customers has a wide interval; it is cut at
    /// the edge, with an arrowhead, rather than squeezing every other row. `axis` is the text
    /// under a grid line (HTML).
    static func forestPlot(
        _ rows: [ForestRow], unit: Double, ariaLabel: String, scale: (Double) -> Double,
        axis: (Double) -> String, into h: inout HTML
    ) {
        // Wide enough for every label and every row's numbers (a long offer id widens it).
        let left = max(180, rows.map { textWidth(ForestRow.label($0.offerId)) + 16 }.max() ?? 0)
        let plot = 360
        let right = max(320, rows.map { textWidth($0.text) + 16 }.max() ?? 0)
        let pitch = 26
        let top = 8
        let width = left + plot + right
        let height = top + rows.count * pitch + 28
        let overall = rows.last?.interval.map { max(abs($0.low), abs($0.high)) } ?? 0
        let scale = scale(rows.compactMap(\.point).map(abs).reduce(overall, max) / unit)
        func x(_ figure: Double) -> Int {
            let v = figure / unit
            return left + Int((Double(plot) * (min(max(v, -scale), scale) + scale) / (2 * scale)).rounded())
        }
        h.line(
            "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\""
                + " role=\"img\" aria-label=\"\(ariaLabel)\">")
        let bottom = top + rows.count * pitch
        for (v, cls) in [(-scale, "grid"), (0, "zero"), (scale, "grid")] {
            h.line(
                "<line class=\"\(cls)\" x1=\"\(x(v * unit))\" y1=\"\(top)\" x2=\"\(x(v * unit))\" y2=\"\(bottom)\"/>")
            h.line("<text x=\"\(x(v * unit))\" y=\"\(bottom + 16)\" text-anchor=\"middle\">\(axis(v))</text>")
        }
        for (i, r) in rows.enumerated() {
            let y = top + i * pitch + pitch / 2
            let weight = r.offerId == "*" ? " font-weight=\"bold\"" : ""
            h.line(
                "<text x=\"\(left - 8)\" y=\"\(y + 4)\" text-anchor=\"end\"\(weight)>\(escape(ForestRow.label(r.offerId)))</text>"
            )
            let numbers = "<text x=\"\(left + plot + 8)\" y=\"\(y + 4)\">\(escape(r.text))</text>"
            guard let point = r.point else {
                h.line(numbers)
                continue
            }
            let tip = escape(r.tip)
            if let i = r.interval {
                h.line(
                    "<line class=\"interval\" x1=\"\(x(i.low))\" y1=\"\(y)\" x2=\"\(x(i.high))\" y2=\"\(y)\"><title>\(tip)</title></line>"
                )
                for (end, cut, dir) in [(i.low, i.low / unit < -scale, -1), (i.high, i.high / unit > scale, 1)]
                where cut {
                    let e = x(end)
                    h.line("<polygon class=\"point\" points=\"\(e + 6 * dir),\(y) \(e),\(y - 5) \(e),\(y + 5)\"/>")
                }
            }
            let side = r.offerId == "*" ? 6 : 4
            h.line(
                "<rect class=\"point\" x=\"\(x(point) - side)\" y=\"\(y - side)\" width=\"\(2 * side)\" height=\"\(2 * side)\"><title>\(tip)</title></rect>"
            )
            h.line(numbers)
        }
        h.line("</svg>")
    }
}
