import Testing

@testable import WinBack

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

    @Test("a rate chart and a funnel chart per catalog offer, with the numbers of the CSV files")
    func chartsPerOffer() {
        let html = page()
        #expect(html.components(separatedBy: "<svg ").count - 1 == 6)
        for id in ["wb.a", "wb.b", "wb.c"] { #expect(html.contains("<h3>\(id)")) }
        // 2026-09 for wb.a: 1 of 3 eligible redeemed, 2 in all.
        #expect(html.contains("2026-09: 1 of 3 eligible redeemed (33.3%), 2 redeemed in all"))
        #expect(html.contains("<title>eligible: 3</title>"))
        #expect(html.contains("wb.c <span class=\"tag\">not live</span>"))
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
