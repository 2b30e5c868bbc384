import Foundation
import Testing
import WinBackTestSupport

/// report.html drawn by a real browser (headless Chromium): every text of every chart lies
/// inside its chart's picture, legends included, for experiments of one, two and twenty-four
/// cohort months; and the first screen's numbers are those of the run's files
/// (docs/rules.md §4.3).
///
/// `WINBACK_REQUIRE_CHROMIUM=1` (CI) fails the suite when Chromium is missing instead of
/// skipping it. `WINBACK_REPORT_SCREENSHOTS=DIR` keeps each page's screenshot in DIR to look at.
@Suite("report.html in a browser: the first screen, and every chart text inside its picture", .tags(.slow))
struct ReportPageBrowserTests {
    static let required = ProcessInfo.processInfo.environment["WINBACK_REQUIRE_CHROMIUM"] == "1"

    static let chromium: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            for name in ["chromium", "chromium-browser", "google-chrome"] {
                let candidate = "\(dir)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }()

    /// Appended to a copy of the page: measures every `<text>` of every `<svg>` against its
    /// viewBox and writes what lies outside into the DOM, which `--dump-dom` prints.
    static let measure =
        "<script>(function(){var out=[],n=0;document.querySelectorAll('svg').forEach(function(s,i){"
        + "var vb=s.viewBox.baseVal;s.querySelectorAll('text').forEach(function(t){n++;var b=t.getBBox();"
        + "if(b.x<-0.5||b.y<-0.5||b.x+b.width>vb.width+0.5||b.y+b.height>vb.height+0.5){out.push(i+': '"
        + "+t.textContent+' at '+[b.x,b.y,b.width,b.height].map(Math.round).join(',')+' in '+vb.width+'x'"
        + "+vb.height)}})});var p=document.createElement('pre');p.id='measured';p.textContent='texts='+n"
        + "+' clipped='+out.length+' '+out.join(' | ');document.body.appendChild(p)})();</script>"

    static func browse(_ args: [String]) throws -> Helper.Output {
        try Helper.run(
            chromium!, ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"] + args)
    }

    /// The data rows of a CSV file (its lines but the header).
    static func dataRows(_ path: String) throws -> [Substring] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").dropFirst().map { $0 }
    }

    @Test(
        "legends and labels inside their charts, and the first screen's numbers those of the files",
        .enabled(if: chromium != nil || required, "no chromium on PATH (Debian: apt-get install chromium)"),
        arguments: [(1, "2026-10-01"), (2, "2026-09-01"), (24, "2024-10-01")])
    func page(cohortMonths: Int, start: String) throws {
        try #require(Self.chromium != nil, "chromium is not on PATH (Debian: apt-get install chromium)")
        let dir = Paths.temporary()
        let world = dir + "/world"
        let generated = try CLI.run([
            "generate", "--customers", "400", "--seed", "7", "--out", world, "--experiment", "x",
            "--experiment-start", start,
        ])
        #expect(generated.status == 0, "\(generated.stderr)")
        // Twenty-four cohort months need a window of as many.
        if cohortMonths > 12 {
            let h = try FileHandle(forWritingTo: URL(fileURLWithPath: world + "/pipeline.yaml"))
            h.seekToEndOfFile()
            h.write(Data("reports:\n  windowMonths: \(cohortMonths)\n".utf8))
            try h.close()
        }
        let run = try CLI.run(["run", world + "/pipeline.yaml", "--output", dir + "/out"])
        try #require(run.status == 0, "\(run.stderr)")
        let published = URL(fileURLWithPath: dir + "/out/generated/latest").resolvingSymlinksInPath().path
        let reports = published + "/reports"
        let html = try String(contentsOfFile: reports + "/report.html", encoding: .utf8)

        // The experiment has the cohort months asked for.
        let months = Set(try Self.dataRows(reports + "/winback-uplift.csv").map { $0.split(separator: ",")[0] })
        #expect(months.subtracting(["*"]).count == cohortMonths)
        #expect(html.contains("aria-label=\"Return rate of treatment and holdout by cohort month\""))

        // The first screen: each row's numbers are the funnel's, the segment files' and the
        // destination files' own, and they reconcile.
        let funnel = try Self.dataRows(reports + "/eligibility-funnel.csv").map { $0.split(separator: ",") }
        let rows = html.matches(of: /<tr><th>([^<]+)<\/th>((?:<td[^>]*>[^<]*<\/td>)+)<\/tr>/).map {
            (String($0.1), $0.2.matches(of: /<td[^>]*>([^<]*)<\/td>/).map { Int($0.1) })
        }
        let offers = funnel.map { String($0[0]) }
        #expect(rows.map(\.0) == offers + ["best-offer"])
        var eligibleSomewhere = 0
        for (segment, cells) in rows {
            // segment, eligible, held out, in the segment, braze ×2, klaviyo ×2, changes ×3.
            try #require(cells.count == 10, "\(segment): \(cells)")
            let inSegment = try Self.dataRows(published + "/segments/\(segment).csv").count
            #expect(cells[2] == inSegment, "\(segment)")
            #expect(cells[0] == (cells[1] ?? 0) + inSegment, "\(segment)")
            if segment == "best-offer" {
                #expect(cells[1] == (try Self.dataRows(published + "/segments/holdout.csv").count))
                eligibleSomewhere = cells[0] ?? -1
                for (k, type) in ["braze", "klaviyo"].enumerated() {
                    let files = try FileManager.default.contentsOfDirectory(atPath: published + "/destinations/" + type)
                        .filter { $0.hasPrefix("best-offer-") && !$0.contains("exited") }
                    let sent = try files.reduce(0) {
                        $0 + (try Self.dataRows(published + "/destinations/\(type)/\($1)").count)
                    }
                    #expect(cells[3 + 2 * k] == sent, "\(type)")
                    #expect((cells[3 + 2 * k] ?? 0) + (cells[4 + 2 * k] ?? 0) == inSegment, "\(type)")
                }
            } else {
                let f = funnel.first { $0[0] == segment }!
                #expect(cells[0] == Int(f[f.count - 1]), "\(segment): the funnel's eligible")
                #expect(cells[3] == nil && cells[4] == nil, "\(segment): no destination reads it")
            }
        }
        #expect(eligibleSomewhere > 0)

        // Every text of every chart inside its picture, the arms chart's legend included.
        let measured = dir + "/measured.html"
        try Data(html.replacingOccurrences(of: "</body>", with: Self.measure + "</body>").utf8).write(
            to: URL(fileURLWithPath: measured))
        let dom = try Self.browse(["--virtual-time-budget=5000", "--dump-dom", "file://" + measured])
        let text = String(decoding: dom.stdout, as: UTF8.self)
        let result = try #require(
            text.firstMatch(of: /<pre id="measured">texts=([0-9]+) clipped=([0-9]+) ([^<]*)<\/pre>/),
            "no measurement in the DOM: \(dom.stderr.suffix(2000))")
        #expect(Int(result.1)! > 50)
        #expect(result.2 == "0", "\(cohortMonths) cohort months: \(result.3)")
        #expect(html.contains(">treatment (in the audiences)</text>") && html.contains(">holdout (left out)</text>"))

        // A screenshot of the first screen, to look at.
        let shot = dir + "/report-\(cohortMonths).png"
        let s = try Self.browse([
            "--window-size=1000,1400", "--screenshot=" + shot, "file://" + reports + "/report.html",
        ])
        #expect(FileManager.default.fileExists(atPath: shot), "\(s.stderr.suffix(2000))")
        if let keep = ProcessInfo.processInfo.environment["WINBACK_REPORT_SCREENSHOTS"] {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: keep + "/report-\(cohortMonths).png")
            try FileManager.default.copyItem(atPath: shot, toPath: keep + "/report-\(cohortMonths).png")
        }
    }

    /// Appended to a copy of the page: where each destination's headline ends in the window.
    static let headlineBottoms =
        "<script>(function(){var out=[];document.querySelectorAll('.headline').forEach(function(e){"
        + "var r=e.getBoundingClientRect();out.push(e.querySelector('.tool').textContent+'='+Math.ceil(r.bottom))});"
        + "var p=document.createElement('pre');p.id='headlines';p.textContent=out.join(';')+';window='+"
        + "window.innerWidth+'x'+window.innerHeight;document.body.appendChild(p)})();</script>"

    @Test(
        "at 1366×900 the first screen shows each destination's headline without scrolling (docs/rules.md §10.10)",
        .enabled(if: chromium != nil || required, "no chromium on PATH (Debian: apt-get install chromium)"))
    func headlinesOnFirstScreen() throws {
        try #require(Self.chromium != nil, "chromium is not on PATH (Debian: apt-get install chromium)")
        let dir = Paths.temporary()
        let world = dir + "/world"
        let generated = try CLI.run([
            "generate", "--customers", "600", "--seed", "3", "--out", world, "--experiment", "x",
            "--experiment-start", "2026-03-01",
        ])
        #expect(generated.status == 0, "\(generated.stderr)")
        // Four destinations, two of them per offer: the most the screen has to hold here.
        let pipeline = world + "/pipeline.yaml"
        let text = try String(contentsOfFile: pipeline, encoding: .utf8).replacingOccurrences(
            of: "destinations: [braze, klaviyo]",
            with: "destinations: [braze, klaviyo, {type: mailchimp, audience: per-offer}, "
                + "{type: customerio, audience: per-offer}]")
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        for date in ["2026-11-21", "2026-11-22"] {
            let run = try CLI.run(["run", pipeline, "--quiet", "--as-of", date, "--output", dir + "/out"])
            try #require(run.status == 0, "\(run.stderr)")
        }
        let published = URL(fileURLWithPath: dir + "/out/generated/latest").resolvingSymlinksInPath().path
        let html = try String(contentsOfFile: published + "/reports/report.html", encoding: .utf8)
        // Dates, not instants, on the first screen.
        let first = String(html.prefix(upTo: html.range(of: "<h2>Every segment</h2>")!.lowerBound))
        #expect(first.contains("Tonight, 2026-11-22") && !first.contains("T00:00:00"))
        let measured = dir + "/headlines.html"
        try Data(html.replacingOccurrences(of: "</body>", with: Self.headlineBottoms + "</body>").utf8).write(
            to: URL(fileURLWithPath: measured))
        let dom = try Self.browse([
            "--window-size=1366,900", "--virtual-time-budget=5000", "--dump-dom", "file://" + measured,
        ])
        let out = String(decoding: dom.stdout, as: UTF8.self)
        let result = try #require(
            out.firstMatch(of: /<pre id="headlines">([^<]*)<\/pre>/), "no measurement: \(dom.stderr.suffix(2000))")
        let parts = result.1.split(separator: ";")
        let window = try #require(parts.last?.split(separator: "=").last?.split(separator: "x").compactMap { Int($0) })
        #expect(window.count == 2)
        let bottoms = parts.dropLast().map { $0.split(separator: "=") }
        #expect(
            bottoms.map { String($0[0]) }.sorted() == [
                "braze · best-offer", "customerio · per offer", "klaviyo · best-offer", "mailchimp · per offer",
            ])
        for b in bottoms {
            let bottom = Int(b[1]) ?? .max
            #expect(bottom <= (window.last ?? 0), "\(b[0]) ends at \(bottom) of \(window)")
        }
        let shot = dir + "/first-screen.png"
        _ = try Self.browse([
            "--window-size=1366,900", "--screenshot=" + shot, "file://" + published + "/reports/report.html",
        ])
        if let keep = ProcessInfo.processInfo.environment["WINBACK_REPORT_SCREENSHOTS"] {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: keep + "/first-screen.png")
            try FileManager.default.copyItem(atPath: shot, toPath: keep + "/first-screen.png")
        }
    }
}
