import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("report.html: one self-contained page")
struct ReportPageTests {
    func page() -> String {
        text(ReportPage.html(WinBackReportsTests.reports(), title: "nightly <test>"))
    }

    @Test("nothing is fetched or run: no script, no link, no URL, no external reference")
    func selfContained() {
        let html = page().lowercased()
        for banned in ["<script", "src=", "href=", "url(", "http:", "https:", "@import", "<link", "<iframe", "<img"] {
            #expect(!html.contains(banned), "found \(banned)")
        }
        #expect(html.hasPrefix("<!doctype html>\n"))
        #expect(html.hasSuffix("</html>\n"))
    }

    @Test("a rate chart, a funnel chart and an agreement bar per catalog offer, with the numbers of the CSV files")
    func chartsPerOffer() {
        let html = page()
        // Three offers × (rate, funnel, agreement), the agreement legend, and retention after a
        // return (no experiment: no lift or arms chart); but wb.c, eligible to nobody in any
        // month, has one line instead of a rate chart.
        #expect(html.components(separatedBy: "<svg ").count - 1 == 10)
        #expect(html.contains("<h3>wb.c</h3>\n<p class=\"note\">No eligible customer in any month.</p>\n"))
        #expect(html.components(separatedBy: "No eligible customer in any month.").count - 1 == 1)
        #expect(html.contains("No experiment is configured"))
        for id in ["wb.a", "wb.b", "wb.c"] { #expect(html.contains("<h3>\(id)")) }
        // 2026-09 for wb.a: 1 of 3 eligible redeemed, 2 in all.
        #expect(html.contains("2026-09: 1 of 3 eligible redeemed (33.3%), 2 redeemed in all"))
        #expect(html.contains("<title>eligible: 3</title>"))
        #expect(html.contains("wb.c <span class=\"tag\">not live</span>"))
    }

    @Test("the agreement with Apple: four parts per offer, adding up to the full bar, and the overall rate")
    func agreementSection() {
        var reports = WinBackReportsTests.reports()
        reports.apple = AppleAgreement(
            offers: [
                ("wb.a", .init(compared: 7, both: 2, appleOnly: 1, winbackOnly: 1)), ("wb.b", .init()),
                ("wb.c", .init(compared: 3)),
            ],
            unknownIds: [("wb.<old>", 2)], overall: .init(compared: 10, both: 8, appleOnly: 1, winbackOnly: 1),
            topAgreement: 3, disagreements: [])
        let html = text(ReportPage.html(reports, title: "t"))
        #expect(html.contains("<h2>Agreement with Apple</h2>"))
        #expect(
            html.contains("8 of 10 customers compared have exactly Apple's offers: an agreement rate of 0.8000."))
        #expect(html.contains("<title>both eligible: 2 of 7</title>"))
        #expect(html.contains("<title>only Apple: 1 of 7</title>"))
        #expect(html.contains("<title>only winback: 1 of 7</title>"))
        #expect(html.contains("<title>neither: 3 of 7</title>"))
        #expect(html.contains("agreement 0.7143</text>"))
        #expect(html.contains(">2 · 1 · 1 · 3</text>"))
        #expect(html.contains("nobody compared</text>"))
        #expect(html.contains("<title>neither: 3 of 3</title>"))
        #expect(html.contains("wb.&lt;old&gt; (2)"))
        // wb.a's parts: 2/7, 1/7, 1/7, 3/7 of 560 px, edges rounded from running totals.
        for (x, w) in [(150, 160), (310, 80), (390, 80), (470, 240)] {
            #expect(html.contains("x=\"\(x)\" y=\"4\" width=\"\(w)\" height=\"16\""), "\(x)")
        }
    }

    @Test("text from the pipeline is escaped")
    func escaped() {
        #expect(page().contains("nightly &lt;test&gt;"))
        #expect(!page().contains("<test>"))
    }

    @Test(
        "the page does not depend on the rows' order or the thread count: it is the page of the rows in order",
        arguments: [1, 2, 3] as [UInt64])
    func deterministic(seed: UInt64) {
        let inOrder = text(ReportPage.html(WinBackReportsTests.reports(), title: "x"))
        let shuffled = text(ReportPage.html(WinBackReportsTests.reports(threads: 4, shuffleSeed: seed), title: "x"))
        #expect(shuffled == inOrder)
        // The page of the rows in order is the expected one: wb.a's months in calendar order with
        // the numbers of winback-redemption-rates.csv (WinBackReportsTests.expectedRates).
        let months = [
            "2026-08: 0 of 3 eligible redeemed (0.0%), 0 redeemed in all",
            "2026-09: 1 of 3 eligible redeemed (33.3%), 2 redeemed in all",
            "2026-10: 0 of 2 eligible redeemed (0.0%), 0 redeemed in all",
        ]
        let at = months.map { shuffled.range(of: $0)?.lowerBound }
        #expect(at.allSatisfy { $0 != nil }, "\(months) not all on the page")
        let found = at.compactMap { $0 }
        #expect(found == found.sorted(), "wb.a's months are not in calendar order")
    }
}
