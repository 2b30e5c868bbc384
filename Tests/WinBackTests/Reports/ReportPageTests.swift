import Testing

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
        // return (no experiment: no lift or arms chart).
        #expect(html.components(separatedBy: "<svg ").count - 1 == 11)
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

    @Test("the same reports give the same bytes")
    func deterministic() {
        #expect(
            ReportPage.html(WinBackReportsTests.reports(), title: "x")
                == ReportPage.html(WinBackReportsTests.reports(threads: 4, shuffled: true), title: "x"))
    }
}
