import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("End to end: a small hand-built world against golden files")
struct GoldenWorldTests {
    func run(_ pipeline: String, threads: Int, output: String? = nil, inflater: Inflater? = .zlib) throws -> RunSummary
    {
        var o = RunOptions(pipelinePath: pipeline, output: output, threads: threads)
        o.inflater = inflater
        o.now = ms("2026-11-22T06:00:00Z")
        return try PipelineRun.run(o, progress: Progress(mode: .quiet))
    }

    @Test("segments and rejects match the golden files, for one thread and for four, with every inflater")
    func goldenSegments() throws {
        let world = try Paths.copyFixture("golden")
        let expected = Paths.fixtures + "/golden/expected"
        let runs = [(1, Inflater.zlib), (4, .zlib)] + Inflater.available.filter { $0 != .zlib }.map { (4, $0) }
        for (threads, inflater) in runs {
            let out = world + "/out-\(threads)-\(inflater)"
            let summary = try run(world + "/pipeline.yaml", threads: threads, output: out, inflater: inflater)
            #expect(summary.published == out + "/golden/2026-11-22")
            let produced = summary.published
            #expect(filesBelow(produced + "/segments") == filesBelow(expected + "/segments"))
            for f in filesBelow(expected + "/segments") {
                expectSameFile(produced + "/segments/" + f, golden: expected + "/segments/" + f)
            }
            expectSameFile(produced + "/rejects.csv", golden: expected + "/rejects.csv")
            #expect(
                summary.states
                    == CustomerStates(customers: 11, active: 1, billingRetry: 1, churned: 9, notSubscriber: 1))
            #expect(summary.counters.rowsRead == 83)
            #expect(summary.counters.rejected == 1)
            #expect(summary.counters.duplicates == 1)
            #expect(summary.counters.sandbox == 6)
            #expect(summary.counters.familyShared == 6)
            #expect(summary.counters.nonSubscription == 1)
            #expect(summary.eligible.map(\.1) == [3, 7, 2, 0])
            #expect(filesBelow(produced + "/reports").contains("apple-agreement.csv"))
        }
    }

    @Test("the four reports match the golden files, and every report file is the same for one thread and four")
    func goldenReports() throws {
        let world = try Paths.copyFixture("golden")
        let expected = Paths.fixtures + "/golden/expected/reports"
        var pages: [Data?] = []
        for threads in [1, 4] {
            let summary = try run(world + "/pipeline.yaml", threads: threads, output: world + "/out-\(threads)")
            let reports = summary.published + "/reports"
            #expect(filesBelow(reports) == (filesBelow(expected) + ["report.html"]).sorted())
            for f in filesBelow(expected) {
                expectSameFile(reports + "/" + f, golden: expected + "/" + f)
            }
            pages.append(FileManager.default.contents(atPath: reports + "/report.html"))
        }
        #expect(pages[0] != nil && pages[0] == pages[1])
    }

    @Test(
        "with a 50 % holdout: held-out customers in no segment and exactly in holdout.csv, the uplift and retention golden"
    )
    func goldenExperiment() throws {
        let world = try Paths.copyFixture("golden")
        let expected = Paths.fixtures + "/golden/expected-experiment"
        let plain = try run(world + "/pipeline.yaml", threads: 2, output: world + "/plain").published
        for threads in [1, 3] {
            let out = try run(world + "/pipeline-experiment.yaml", threads: threads, output: world + "/x\(threads)")
                .published
            #expect(filesBelow(out + "/segments") == filesBelow(expected + "/segments"))
            for f in filesBelow(expected + "/segments") {
                expectSameFile(out + "/segments/" + f, golden: expected + "/segments/" + f)
            }
            for f in [
                "winback-uplift.csv", "retention-after-return.csv", "revenue-after-return.csv",
                "winback-revenue-uplift.csv",
            ] {
                expectSameFile(out + "/reports/" + f, golden: expected + "/reports/" + f)
            }
            // best-offer without the experiment = best-offer with it + holdout, row for row.
            func lines(_ path: String) throws -> [Substring] {
                try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").dropFirst().map { $0 }
            }
            let all = try lines(plain + "/segments/best-offer.csv")
            let kept = try lines(out + "/segments/best-offer.csv")
            let held = try lines(out + "/segments/holdout.csv")
            #expect(!held.isEmpty && !kept.isEmpty)
            #expect((kept + held).sorted() == all.sorted())
            let heldIds = Set(held.map { $0.split(separator: ",")[1] })
            for f in filesBelow(out + "/segments") where f.hasSuffix(".csv") && f != "holdout.csv" {
                for line in try lines(out + "/segments/" + f) {
                    #expect(!heldIds.contains(line.split(separator: ",")[1]), "\(f): \(line)")
                }
            }
            #expect(
                XMLSchemaValidator.validate(xmlPath: out + "/segments/holdout.xml", xsdPath: Paths.segmentXSD) == [])
            // Each held-out customer's bucket is below 5 000 by SHA-256 computed here.
            let experiment = HoldoutAssignment(name: "golden-2026", basisPoints: 5_000)
            for line in held {
                let f = line.split(separator: ",").map(String.init)
                #expect(experiment.bucket(group: f[0], originalTransactionId: f[1]) < 5_000)
            }
            let manifest = try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: out + "/manifest.json")))
            let x = (manifest as? [String: Any])?["experiment"] as? [String: Any]
            #expect(x?["holdoutBasisPoints"] as? Int == 5_000)
            let rows = (x?["heldOut"] as? [[String: Any]])?.last?["rows"] as? Int
            #expect(rows == held.count)
        }
    }

    @Test("every XML segment is valid against Data/schemas/segment.xsd")
    func xmlValidAgainstSchema() throws {
        let world = try Paths.copyFixture("golden")
        let summary = try run(world + "/pipeline.yaml", threads: 2)
        let xml = filesBelow(summary.published + "/segments").filter { $0.hasSuffix(".xml") }
        #expect(xml.count == 5)
        for f in xml {
            #expect(
                XMLSchemaValidator.validate(xmlPath: summary.published + "/segments/" + f, xsdPath: Paths.segmentXSD)
                    == [])
        }
    }

    @Test("the manifest records inputs, counters, outputs with SHA-256 and stage times")
    func manifest() throws {
        let world = try Paths.copyFixture("golden")
        let summary = try run(world + "/pipeline.yaml", threads: 2)
        let data = try #require(FileManager.default.contents(atPath: summary.published + "/manifest.json"))
        let m = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(m["pipeline"] as? String == "golden")
        #expect(m["asOf"] as? String == "2026-11-22T00:00:00.000Z")
        #expect(m["status"] as? String == "succeeded")
        let inputs = try #require(m["inputs"] as? [[String: Any]])
        #expect(inputs.count == 2)
        #expect(inputs.allSatisfy { ($0["sha256"] as? String)?.count == 64 })
        let outputs = try #require(m["outputs"] as? [[String: Any]])
        let best = try #require(outputs.first { $0["path"] as? String == "segments/best-offer.csv" })
        #expect(best["rows"] as? Int == 9)
        let counters = try #require(m["counters"] as? [String: Any])
        #expect(counters["customers"] as? Int == 11)
        #expect((m["stageSeconds"] as? [[String: Any]])?.count ?? 0 >= 3)
        #expect(m["inflater"] as? String == "zlib")
    }

    @Test("the file's inflater is used unless the command line names one, and the manifest says which ran")
    func inflaterFromFileOrCommandLine() throws {
        let world = try Paths.copyFixture("golden")
        let text = try String(contentsOfFile: world + "/pipeline.yaml", encoding: .utf8)
        try (text + "\ninflater: auto\n").write(toFile: world + "/pipeline.yaml", atomically: true, encoding: .utf8)
        func inflaterRun(_ asked: Inflater?, _ out: String) throws -> String? {
            let summary = try run(world + "/pipeline.yaml", threads: 2, output: world + "/" + out, inflater: asked)
            let data = try #require(FileManager.default.contents(atPath: summary.published + "/manifest.json"))
            let m = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            return m["inflater"] as? String
        }
        #expect(try inflaterRun(nil, "auto") == (Inflater.isal.isAvailable ? "isal" : "zlib"))
        #expect(try inflaterRun(.zlib, "zlib") == "zlib")

        if Inflater.isal.isAvailable {
            try (text + "\ninflater: isal\n").write(toFile: world + "/pipeline.yaml", atomically: true, encoding: .utf8)
            #expect(try inflaterRun(nil, "isal") == "isal")
        }
    }
}
