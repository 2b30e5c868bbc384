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
        /// Segment rows left out because another row of the list holds the same identity value
        /// (docs/rules.md §10.10).
        public var folded: Int
        /// Segment rows left out because their offer has no link (§10.10).
        public var withoutLink: Int

        public init(addressable: Int, unaddressable: Int, folded: Int = 0, withoutLink: Int = 0) {
            self.addressable = addressable
            self.unaddressable = unaddressable
            self.folded = folded
            self.withoutLink = withoutLink
        }
    }

    /// One destination as whoever runs the campaign reads it first (docs/rules.md §10.10).
    public struct Headline: Sendable, Equatable {
        /// The tool, and the lists it reads (`best-offer`, or `per offer`).
        public var name: String
        public var lists: String
        /// Rows in tonight's files: the people the tool reaches tonight.
        public var reachable: Int
        /// Rows of tonight's exited files.
        public var exited: Int
        public var unaddressable: Int
        public var folded: Int
        public var withoutLink: Int

        public init(
            name: String, lists: String, reachable: Int, exited: Int, unaddressable: Int, folded: Int, withoutLink: Int
        ) {
            self.name = name
            self.lists = lists
            self.reachable = reachable
            self.exited = exited
            self.unaddressable = unaddressable
            self.folded = folded
            self.withoutLink = withoutLink
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
        /// The exited by reason, most first.
        public var reasons: [(reason: String, customers: Int)]

        public init(entered: Int, changed: Int, exited: Int, reasons: [(reason: String, customers: Int)] = []) {
            self.entered = entered
            self.changed = changed
            self.exited = exited
            self.reasons = reasons
        }

        public static func == (a: Changes, b: Changes) -> Bool {
            a.entered == b.entered && a.changed == b.changed && a.exited == b.exited
                && a.reasons.map(\.reason) == b.reasons.map(\.reason)
                && a.reasons.map(\.customers) == b.reasons.map(\.customers)
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
                guard let delivery,
                    delivery.addressable + delivery.unaddressable + delivery.folded + delivery.withoutLink != inSegment
                else { continue }
                let folded = delivery.folded > 0 ? " + \(delivery.folded) folded" : ""
                let unlinked = delivery.withoutLink > 0 ? " + \(delivery.withoutLink) without a link" : ""
                out.append(
                    "\(d.name): \(delivery.addressable) addressable + \(delivery.unaddressable) unaddressable"
                        + folded + unlinked + " ≠ \(inSegment) in the segment")
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

    /// Per destination, in ``destinations``' order: the headline.
    public var headlines: [Headline]
    /// Catalog offers without a link (no `appleId`): left out of every destination (§10.10).
    public var offersWithoutLink: [String]

    public init(
        destinations: [Destination], rows: [Row], requireApple: Bool = false, baseline: String? = nil,
        headlines: [Headline] = [], offersWithoutLink: [String] = []
    ) {
        self.destinations = destinations
        self.rows = rows
        self.requireApple = requireApple
        self.baseline = baseline
        self.headlines = headlines
        self.offersWithoutLink = offersWithoutLink
    }
}

extension ReportPage {
    /// The first screen (docs/rules.md §4.3): the audience table, what does not reconcile, and
    /// the offers Apple never lists although the renewal info carries its list.
    static func firstScreen(_ s: FirstScreen, apple: AppleAgreement, asOf: Int64, into h: inout HTML) {
        headlines(s, asOf: asOf, into: &h)
        h.line("<h2>Every segment</h2>")
        h.line(
            "<p class=\"note\">Each segment's customers eligible on \(day(asOf)), those left out of it, the"
                + " segment file's rows and what each destination's files received (eligibility-funnel.csv,"
                + " segments/, destinations/, manifest.json): eligible = "
                + (s.requireApple ? "held out + left out by Apple + in the segment" : "held out + in the segment")
                + (s.destinations.isEmpty
                    ? "." : "; addressable + unaddressable + folded + without a link = in the segment.") + "</p>")
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

    /// A date, or a date and time when the instant is not midnight UTC: what a person reads.
    static func day(_ t: Int64) -> String {
        let date = Timestamp.date(t)
        let ms = ((t % 86_400_000) + 86_400_000) % 86_400_000
        guard ms != 0 else { return date }
        let minutes = ms / 60_000
        let hh = minutes / 60
        let mm = minutes % 60
        return date + " " + (hh < 10 ? "0" : "") + String(hh) + ":" + (mm < 10 ? "0" : "") + String(mm) + " UTC"
    }

    /// `n` with its thousands grouped (1,120).
    static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }

    /// The headlines (docs/rules.md §10.10): per destination the people it reaches tonight, who
    /// entered and left since the baseline, who is held out; then why people left, and what to
    /// fix. Above the table, so that a screen shows them without scrolling.
    static func headlines(_ s: FirstScreen, asOf: Int64, into h: inout HTML) {
        let best = s.rows.first { $0.segment == "best-offer" }
        let since = s.baseline.map { "since \(escape($0))" } ?? "(no earlier run)"
        h.line("<h2>Tonight, \(day(asOf))</h2>")
        h.line("<div class=\"headlines\">")
        if s.headlines.isEmpty, let best {
            var line = "<div class=\"headline\"><div class=\"tool\">best-offer</div>"
            line += "<div class=\"big\">\(grouped(best.inSegment))</div><div>customers in the segment</div>"
            if let c = best.changes {
                line += "<div>+\(grouped(c.entered)) entered · −\(grouped(c.exited)) exited \(since)</div>"
            }
            h.line(line + "<div>\(grouped(best.heldOut)) held out</div></div>")
        }
        for (i, d) in s.headlines.enumerated() {
            var line = "<div class=\"headline\"><div class=\"tool\">\(escape(d.name)) · \(escape(d.lists))</div>"
            line += "<div class=\"big\">\(grouped(d.reachable))</div><div>people reachable tonight</div>"
            let bestOffer = i < s.destinations.count && s.destinations[i].bestOffer
            if bestOffer, let c = best?.changes {
                line += "<div>+\(grouped(c.entered)) entered · −\(grouped(c.exited)) left best-offer \(since)</div>"
            }
            line += "<div>\(grouped(d.exited)) in the exited files"
            if let best { line += " · \(grouped(best.heldOut)) held out" }
            line += "</div>"
            var apart: [String] = []
            if d.unaddressable > 0 { apart.append("\(grouped(d.unaddressable)) without an id") }
            if d.folded > 0 { apart.append("\(grouped(d.folded)) sharing an id (folded)") }
            if d.withoutLink > 0 { apart.append("\(grouped(d.withoutLink)) whose offer has no link") }
            if !apart.isEmpty { line += "<div class=\"small\">Left out: " + apart.joined(separator: ", ") + "</div>" }
            h.line(line + "</div>")
        }
        h.line("</div>")
        if let c = best?.changes, !c.reasons.isEmpty {
            let why = c.reasons.map { "\(escape($0.reason)) \(grouped($0.customers))" }.joined(separator: " · ")
            h.line("<p class=\"note\">Why \(grouped(c.exited)) left best-offer \(since): \(why).</p>")
        }
        if !s.headlines.isEmpty, s.baseline != nil {
            h.line(
                "<p class=\"note\">A tool's exited files count identity values, not customers: they differ from the"
                    + " segment's exited by the values that changed (a new email exits under the old one), the"
                    + " customers without an id, the rows folded onto a shared id, and the values of the earlier"
                    + " nights of output.exitDays, listed again so that a tool that missed a night catches up.</p>")
        }
        for id in s.offersWithoutLink {
            h.line(
                "<p class=\"warn\">Offer \(escape(id)) has no appleId: its customers are left out of every"
                    + " destination's files (a row never carries an empty link). Add the id from the offer's page in"
                    + " App Store Connect to the catalog.</p>")
        }
        for d in s.headlines where d.folded > 0 {
            h.line(
                "<p class=\"warn\">\(escape(d.name)): \(grouped(d.folded)) rows share an identity value with another"
                    + " customer's and were folded onto one row (the best-ranked offer).</p>")
        }
    }
}
