import Testing
import WinBackTestSupport

@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackTesting

@Suite("report.html: the first screen, tonight's audience")
struct FirstScreenTests {
    /// The numbers: 183 eligible for wb.a, 27 held out, 156 in the segment; Klaviyo reads
    /// one list per offer, Braze the best-offer list (139 addressable, 17 not).
    static func screen() -> FirstScreen {
        FirstScreen(
            destinations: [.init(name: "klaviyo", bestOffer: false), .init(name: "braze", bestOffer: true)],
            rows: [
                .init(
                    segment: "wb.a", eligible: 183, heldOut: 27, inSegment: 156,
                    deliveries: [.init(addressable: 150, unaddressable: 6), nil]),
                .init(
                    segment: "wb.b", eligible: 0, heldOut: 0, inSegment: 0,
                    deliveries: [.init(addressable: 0, unaddressable: 0), nil]),
                .init(
                    segment: "best-offer", eligible: 183, heldOut: 27, inSegment: 156,
                    deliveries: [nil, .init(addressable: 139, unaddressable: 17)]),
            ])
    }

    func page(_ s: FirstScreen?, apple: AppleAgreement? = nil) -> String {
        var reports = WinBackReportsTests.reports()
        if let apple { reports.apple = apple }
        return text(ReportPage.html(reports, title: "t", first: s))
    }

    @Test("one row per segment with its numbers; a destination that does not read a list shows a dash")
    func table() {
        let html = page(Self.screen())
        #expect(html.contains("<h2>Every segment</h2>"))
        #expect(
            html.contains(
                "<tr><th>wb.a</th><td>183</td><td>27</td><td>156</td><td>150</td><td>6</td>"
                    + "<td class=\"none\">—</td><td class=\"none\">—</td>"))
        #expect(
            html.contains(
                "<tr><th>best-offer</th><td>183</td><td>27</td><td>156</td><td class=\"none\">—</td>"
                    + "<td class=\"none\">—</td><td>139</td><td>17</td>"))
        #expect(
            html.contains("<th colspan=\"2\" class=\"group\">klaviyo</th><th colspan=\"2\" class=\"group\">braze</th>"))
        // Everything reconciles: no warning.
        #expect(!html.contains("class=\"warn\""))
        // The table comes first: before the first chart's heading.
        let table = html.range(of: "<table class=\"audience\">")?.lowerBound
        let charts = html.range(of: "<h2>Redemption rate by month</h2>")?.lowerBound
        #expect(table != nil && charts != nil && table! < charts!)
        // Without Apple's requirement, no column for it.
        #expect(!html.contains("left out by Apple</th>"))
    }

    @Test("the numbers reconcile: eligible = held out + in the segment, addressable + unaddressable = in the segment")
    func reconciles() {
        let s = Self.screen()
        for r in s.rows { #expect(r.mismatches(s.destinations) == [], "\(r.segment)") }
        // One row off either way is found and said under the table.
        var off = s
        off.rows[0].inSegment = 155
        off.rows[2].deliveries[1] = .init(addressable: 139, unaddressable: 16)
        #expect(
            off.rows[0].mismatches(off.destinations) == [
                "183 eligible ≠ 27 held out + 155 in the segment",
                "klaviyo: 150 addressable + 6 unaddressable ≠ 155 in the segment",
            ])
        #expect(off.rows[1].mismatches(off.destinations) == [])
        #expect(
            off.rows[2].mismatches(off.destinations) == [
                "braze: 139 addressable + 16 unaddressable ≠ 156 in the segment"
            ])
        let html = page(off)
        // wb.a's klaviyo list no longer adds up to its segment either.
        #expect(
            html.contains(
                "<p class=\"warn\">wb.a does not reconcile: 183 eligible ≠ 27 held out + 155 in the segment.</p>"))
        #expect(
            html.contains(
                "<p class=\"warn\">wb.a does not reconcile: klaviyo: 150 addressable + 6 unaddressable ≠ 155 in the segment.</p>"
            ))
        #expect(
            html.contains(
                "<p class=\"warn\">best-offer does not reconcile: braze: 139 addressable + 16 unaddressable ≠ 156 in the segment.</p>"
            ))
        #expect(html.components(separatedBy: "<p class=\"warn\">").count - 1 == 3)
    }

    @Test("with Apple's requirement, what it left out is a column and part of the sum")
    func requireApple() {
        var s = Self.screen()
        s.requireApple = true
        s.rows[0].leftOutByApple = 3
        s.rows[0].inSegment = 153
        s.rows[0].deliveries[0] = .init(addressable: 150, unaddressable: 3)
        #expect(s.rows[0].mismatches(s.destinations) == [])
        let html = page(s)
        #expect(html.contains("<th rowspan=\"2\">left out by Apple</th>"))
        #expect(html.contains("<tr><th>wb.a</th><td>183</td><td>27</td><td>3</td><td>153</td><td>150</td><td>3</td>"))
        s.rows[0].leftOutByApple = 0
        #expect(s.rows[0].mismatches(s.destinations) == ["183 eligible ≠ 27 held out + 153 in the segment"])
    }

    @Test(
        "changes since the baseline: a dash and a note when there is no earlier run, the numbers and its date otherwise"
    )
    func changes() {
        let none = page(Self.screen())
        #expect(none.contains("<th colspan=\"3\" class=\"group\">since the last run</th>"))
        #expect(none.contains("No earlier run to compare with"))
        #expect(none.contains("<td class=\"none\">—</td><td class=\"none\">—</td><td class=\"none\">—</td></tr>"))
        var s = Self.screen()
        s.baseline = "2026-11-21"
        s.rows[0].changes = .init(entered: 12, changed: 3, exited: 9)
        let html = page(s)
        #expect(html.contains("<th colspan=\"3\" class=\"group\">since 2026-11-21</th>"))
        #expect(html.contains("<td>12</td><td>3</td><td>9</td></tr>"))
        #expect(!html.contains("No earlier run to compare with"))
    }

    @Test("an offer Apple never lists while the renewal info carries the list is warned about under the table")
    func neverListed() {
        // wb.a listed; wb.b: nobody of its group compared; wb.c: compared, agreeing that nobody
        // is eligible (an agreement of 1.0000 that hides a wrong offer id).
        let apple = AppleAgreement(
            offers: [
                ("wb.a", .init(compared: 7, both: 2, appleOnly: 1, winbackOnly: 1)), ("wb.b", .init()),
                ("wb.c", .init(compared: 3)),
            ],
            unknownIds: [("wb.c-typo", 2)], overall: .init(compared: 10, both: 8, appleOnly: 1, winbackOnly: 1),
            topAgreement: 3, disagreements: [])
        #expect(apple.neverListed == ["wb.b", "wb.c"])
        let html = page(Self.screen(), apple: apple)
        for id in ["wb.b", "wb.c"] {
            #expect(
                html.contains(
                    "<p class=\"warn\">Apple never lists \(id) in any renewal info's eligibleWinBackOfferIds, though 10"
                        + " customers' renewal info carries the list: a wrong offer id, or an offer not live in App Store"
                        + " Connect?</p>"))
        }
        // The ids Apple listed that the catalog lacks, once: one may be the offer meant.
        #expect(
            html.components(separatedBy: "<p class=\"warn\">Apple did list ids the catalog lacks: wb.c-typo (2).</p>")
                .count == 2)
        #expect(!html.contains("Apple never lists wb.a"))
        // The warnings are on the first screen: under the table, before the charts.
        let warn = html.range(of: "Apple never lists")!.lowerBound
        #expect(warn > html.range(of: "</table>")!.lowerBound)
        #expect(warn < html.range(of: "<h2>Redemption rate by month</h2>")!.lowerBound)
        // Only Apple listing an offer (no agreement on it) is a listing too.
        var onlyApple = apple
        onlyApple.offers[1].counts = .init(compared: 1, appleOnly: 1)
        #expect(onlyApple.neverListed == ["wb.c"])
    }

    @Test("no warning when no renewal info carries Apple's list: nothing to judge by")
    func noListAnywhere() {
        let apple = AppleAgreement(
            offers: [("wb.a", .init()), ("wb.b", .init()), ("wb.c", .init())], unknownIds: [],
            overall: .init(), topAgreement: 0, disagreements: [])
        #expect(apple.neverListed == [])
        #expect(!page(Self.screen(), apple: apple).contains("Apple never lists"))
    }

    @Test("a page without a first screen opens with the charts, as before")
    func withoutFirstScreen() {
        let html = page(nil)
        #expect(!html.contains("Every segment") && !html.contains("<h2>Tonight"))
        #expect(!html.contains("<table"))
    }

    @Test("text in the table is escaped")
    func escaped() {
        var s = Self.screen()
        s.rows[0].segment = "wb.<a>"
        s.destinations[0].name = "k&b"
        let html = page(s)
        #expect(html.contains("<th>wb.&lt;a&gt;</th>"))
        #expect(html.contains(">k&amp;b</th>"))
        #expect(!html.contains("wb.<a>"))
    }
}

@Suite("report.html: month charts collapse when empty, legends sized to fit")
struct ReportChartLayoutTests {
    /// `n` cohort months from 2025-01 on; `customers` in each arm each month.
    static func months(_ n: Int, customers: Int) -> [UpliftRow] {
        (0..<n).map { i in
            let month = "\(2025 + i / 12)-" + (i % 12 < 9 ? "0" : "") + "\(i % 12 + 1)"
            return UpliftRow(
                month: month, offerId: "*", treatment: .init(customers: customers, returned: customers / 3),
                holdout: .init(customers: customers, returned: customers / 4))
        }
    }

    /// The chart's width and, for every left-anchored text, its x and text.
    static func layout(_ svg: String) -> (width: Int, texts: [(x: Int, text: String)]) {
        let width = Int(svg.firstMatch(of: /<svg width="([0-9]+)"/)!.1)!
        let texts = svg.matches(of: /<text x="([0-9]+)" y="[0-9]+">([^<]*)<\/text>/).map { (Int($0.1)!, String($0.2)) }
        return (width, texts)
    }

    @Test(
        "the arms chart's legend lies inside the chart for 1, 2, 6 and 24 cohort months", arguments: [1, 2, 5, 6, 24])
    func armLegend(months n: Int) {
        var h = ReportPage.HTML()
        ReportPage.armChart(Self.months(n, customers: 30), into: &h)
        let (width, texts) = Self.layout(text(h.bytes))
        let labels = texts.map(\.text)
        #expect(labels == ["treatment (in the audiences)", "holdout (left out)"])
        for t in texts {
            #expect(t.x + ReportPage.textWidth(t.text) <= width, "\(n) months: \(t.text) at \(t.x) in \(width)")
        }
    }

    @Test("an arms chart with nobody eligible in any month is one line")
    func emptyArms() {
        var reports = WinBackReportsTests.reports()
        reports.experiment = Experiment(name: "x", basisPoints: 1_000, start: 0)
        let offers = reports.funnel.map(\.offerId)
        func section(customers: Int) -> String {
            reports.uplift = (0..<reports.window.months.count).flatMap { m in
                offers.map {
                    UpliftRow(
                        month: reports.window.label(m), offerId: $0, treatment: .init(customers: customers),
                        holdout: .init(customers: customers))
                }
            }
            var h = ReportPage.HTML()
            ReportPage.experimentSections(reports, into: &h)
            return text(h.bytes)
        }
        let chart = "aria-label=\"Return rate of treatment and holdout by cohort month\""
        let empty = section(customers: 0)
        #expect(!empty.contains(chart))
        #expect(
            empty.contains(
                "<h3>Return rate by cohort month</h3>\n<p class=\"note\">No eligible customer in any cohort month.</p>\n"
            ))
        // One customer in one arm of one month: the chart.
        #expect(section(customers: 1).contains(chart))
    }

    @Test("forest plot and retention texts fit their charts, however long the offer id or the counts")
    func longTexts() {
        var h = ReportPage.HTML()
        let id = String(repeating: "com.example.winback.", count: 3)
        var row = UpliftRow(
            month: "*", offerId: id, treatment: .init(customers: 123_456, returned: 60_000),
            holdout: .init(customers: 1_000, returned: 1))
        ReportPage.forestPlot([row], into: &h)
        row.offerId = "*"
        let svg = text(h.bytes)
        let width = Int(svg.firstMatch(of: /<svg width="([0-9]+)"/)!.1)!
        // The id, right-anchored at left − 8, starts inside; the numbers end inside.
        let left = Int(svg.firstMatch(of: /<text x="([0-9]+)" y="[0-9]+" text-anchor="end">com/)!.1)!
        #expect(left - ReportPage.textWidth(id) >= 0)
        for t in Self.layout(svg).texts {
            #expect(t.x + ReportPage.textWidth(t.text) <= width, "\(t.text)")
        }
    }
}
