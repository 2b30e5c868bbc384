import WinBackModel

/// What the first screen of `report.html` shows (docs/rules.md §4.3): tonight's audience, one
/// row per segment, so that the funnel, the segments and the destination files reconcile at a
/// glance. Its numbers are known only once the segments and the destinations' files are
/// written, so the page is written after them.
public struct FirstScreen: Sendable, Equatable {
    /// A destination of the run: one column pair on the first screen.
    public struct Destination: Sendable, Equatable {
        /// The tool (`klaviyo`, `braze`, …).
        public var name: String
        /// Whether it reads the best-offer list (otherwise one list per catalog offer).
        public var bestOffer: Bool

        public init(name: String, bestOffer: Bool) {
            self.name = name
            self.bestOffer = bestOffer
        }
    }

    /// A segment's rows as one destination received them.
    public struct Delivery: Sendable, Equatable {
        /// Rows written to the destination's files.
        public var addressable: Int
        /// Segment rows left out: no identity row, or an empty identity column.
        public var unaddressable: Int

        public init(addressable: Int, unaddressable: Int) {
            self.addressable = addressable
            self.unaddressable = unaddressable
        }
    }

    /// A segment's changes since the baseline run (docs/rules.md §10.5).
    public struct Changes: Sendable, Equatable {
        /// Customers in tonight's segment and not in the baseline's.
        public var entered: Int
        /// Customers in both with another offer (best-offer and holdout only).
        public var changed: Int
        /// Customers in the baseline's segment and not in tonight's.
        public var exited: Int

        public init(entered: Int, changed: Int, exited: Int) {
            self.entered = entered
            self.changed = changed
            self.exited = exited
        }
    }

    /// One segment: a catalog offer, or `best-offer`.
    public struct Row: Sendable, Equatable {
        /// The offer id, or `best-offer`.
        public var segment: String
        /// Customers eligible at T (for best-offer: for some offer).
        public var eligible: Int
        /// Rows the experiment held out (docs/rules.md §9.1).
        public var heldOut: Int
        /// Rows `audience.requireApple` left out (docs/rules.md §4.5).
        public var leftOutByApple: Int
        /// The segment file's rows.
        public var inSegment: Int
        /// Per destination of ``FirstScreen/destinations``; nil where it does not read this list.
        public var deliveries: [Delivery?]
        /// Since the baseline run; nil when there is none to compare with.
        public var changes: Changes?

        public init(
            segment: String, eligible: Int, heldOut: Int, leftOutByApple: Int = 0, inSegment: Int,
            deliveries: [Delivery?] = [], changes: Changes? = nil
        ) {
            self.segment = segment
            self.eligible = eligible
            self.heldOut = heldOut
            self.leftOutByApple = leftOutByApple
            self.inSegment = inSegment
            self.deliveries = deliveries
            self.changes = changes
        }

        /// What does not add up: eligible = held out + left out by Apple + in the segment, and
        /// for each destination addressable + unaddressable = in the segment. Empty when
        /// everything reconciles.
        public func mismatches(_ destinations: [Destination]) -> [String] {
            var out: [String] = []
            if eligible != heldOut + leftOutByApple + inSegment {
                let apple = leftOutByApple > 0 ? " + \(leftOutByApple) left out by Apple" : ""
                out.append("\(eligible) eligible ≠ \(heldOut) held out\(apple) + \(inSegment) in the segment")
            }
            for (d, delivery) in zip(destinations, deliveries) {
                guard let delivery, delivery.addressable + delivery.unaddressable != inSegment else { continue }
                out.append(
                    "\(d.name): \(delivery.addressable) addressable + \(delivery.unaddressable) unaddressable"
                        + " ≠ \(inSegment) in the segment")
            }
            return out
        }
    }

    public var destinations: [Destination]
    /// Catalog offers in catalog order, then best-offer.
    public var rows: [Row]
    /// Whether `audience.requireApple` is on: the page then shows what it left out.
    public var requireApple: Bool
    /// The baseline run's date (YYYY-MM-DD) the changes are counted against; nil when there is
    /// no earlier run.
    public var baseline: String?

    public init(destinations: [Destination], rows: [Row], requireApple: Bool = false, baseline: String? = nil) {
        self.destinations = destinations
        self.rows = rows
        self.requireApple = requireApple
        self.baseline = baseline
    }
}

extension ReportPage {
    /// The first screen (docs/rules.md §4.3): the audience table, what does not reconcile, and
    /// the offers Apple never lists although the renewal info carries its list.
    static func firstScreen(_ s: FirstScreen, apple: AppleAgreement, asOf: Int64, into h: inout HTML) {
        h.line("<h2>Tonight's audience</h2>")
        h.line(
            "<p class=\"note\">Each segment's customers eligible at \(Timestamp.iso(asOf)), those left out of it, the"
                + " segment file's rows and what each destination's files received (eligibility-funnel.csv,"
                + " segments/, destinations/, manifest.json): eligible = "
                + (s.requireApple ? "held out + left out by Apple + in the segment" : "held out + in the segment")
                + (s.destinations.isEmpty ? "." : "; addressable + unaddressable = in the segment.") + "</p>")
        let changes = s.baseline.map { "since \(escape($0))" } ?? "since the last run"
        h.line("<div class=\"scroll\"><table class=\"audience\">")
        h.line("<thead>")
        var top =
            "<tr><th rowspan=\"2\" class=\"segment\">segment</th><th rowspan=\"2\">eligible</th><th rowspan=\"2\">held out</th>"
        if s.requireApple { top += "<th rowspan=\"2\">left out by Apple</th>" }
        top += "<th rowspan=\"2\">in the segment</th>"
        for d in s.destinations {
            top += "<th colspan=\"2\" class=\"group\">\(escape(d.name))</th>"
        }
        top += "<th colspan=\"3\" class=\"group\">\(changes)</th></tr>"
        h.line(top)
        h.line(
            "<tr>" + String(repeating: "<th>addressable</th><th>unaddressable</th>", count: s.destinations.count)
                + "<th>entered</th><th>changed</th><th>exited</th></tr>")
        h.line("</thead>")
        h.line("<tbody>")
        for r in s.rows {
            var line = "<tr><th>\(escape(r.segment))</th><td>\(r.eligible)</td><td>\(r.heldOut)</td>"
            if s.requireApple { line += "<td>\(r.leftOutByApple)</td>" }
            line += "<td>\(r.inSegment)</td>"
            for i in s.destinations.indices {
                if i < r.deliveries.count, let d = r.deliveries[i] {
                    line += "<td>\(d.addressable)</td><td>\(d.unaddressable)</td>"
                } else {
                    line += "<td class=\"none\">—</td><td class=\"none\">—</td>"
                }
            }
            if let c = r.changes {
                line += "<td>\(c.entered)</td><td>\(c.changed)</td><td>\(c.exited)</td>"
            } else {
                line += String(repeating: "<td class=\"none\">—</td>", count: 3)
            }
            h.line(line + "</tr>")
        }
        h.line("</tbody>")
        h.line("</table></div>")
        if s.baseline == nil {
            h.line(
                "<p class=\"note\">No earlier run to compare with: who entered, changed or exited shows from the next"
                    + " published run on.</p>")
        }
        for r in s.rows {
            for m in r.mismatches(s.destinations) {
                h.line("<p class=\"warn\">\(escape(r.segment)) does not reconcile: \(escape(m)).</p>")
            }
        }
        let never = apple.neverListed
        guard !never.isEmpty else { return }
        for id in never {
            h.line(
                "<p class=\"warn\">Apple never lists \(escape(id)) in any renewal info's eligibleWinBackOfferIds,"
                    + " though \(apple.overall.compared) customers' renewal info carries the list: a wrong offer id,"
                    + " or an offer not live in App Store Connect?</p>")
        }
        if !apple.unknownIds.isEmpty {
            let listed = apple.unknownIds.map { "\(escape($0.id)) (\($0.customers))" }.joined(separator: ", ")
            h.line("<p class=\"warn\">Apple did list ids the catalog lacks: \(listed).</p>")
        }
    }
}
