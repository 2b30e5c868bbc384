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

@Suite("Export formats: csv and revenuecat (docs/rules.md §2.3)", .serialized)
struct ExportFormatTests {
    func run(_ fixture: String) throws -> String {
        let world = try Paths.copyFixture(fixture)
        var o = RunOptions(pipelinePath: world + "/pipeline.yaml", threads: 2)
        o.now = ms("2026-11-22T06:00:00Z")
        return try PipelineRun.run(o, progress: Progress(mode: .quiet)).published
    }

    /// Drops the app_account_token column (third) and the apple_eligible column (last) of a
    /// segment CSV: a RevenueCat export carries neither tokens nor renewal info.
    func withoutTokenOrApple(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            var f = line.split(separator: ",", omittingEmptySubsequences: false)
            if f.count > 2 {
                f.remove(at: 2)
                f.removeLast()
            }
            return f.joined(separator: ",")
        }.joined(separator: "\n")
    }

    @Test("the golden world as CSV gives byte-identical segments to the NDJSON one")
    func csvMatchesNDJSON() throws {
        let published = try run("golden-csv")
        let golden = Paths.fixtures + "/golden/expected/segments"
        for f in filesBelow(golden) { expectSameFile(published + "/segments/" + f, golden: golden + "/" + f) }
        // Its one malformed record is rejected with the line it starts on (after a multi-line record).
        let rejects = try String(contentsOfFile: published + "/rejects.csv", encoding: .utf8)
        #expect(
            rejects
                == "file,line,reason,excerpt\ninput/transactions-b.csv.gz,5,\"expected 22 fields, found 2\",\"1,2\"\n")
    }

    @Test("the golden world as a RevenueCat export gives the same audiences, without tokens or Apple's lists")
    func revenueCatMatchesNDJSON() throws {
        let published = try run("golden-revenuecat")
        let golden = Paths.fixtures + "/golden/expected/segments"
        for f in filesBelow(golden) where f.hasSuffix(".csv") {
            let a = try String(contentsOfFile: published + "/segments/" + f, encoding: .utf8)
            let g = try String(contentsOfFile: golden + "/" + f, encoding: .utf8)
            #expect(withoutTokenOrApple(a) == withoutTokenOrApple(g), "\(f)")
            // No renewal info, so Apple said nothing: the last column is empty on every row.
            #expect(a.split(separator: "\n").dropFirst().allSatisfy { $0.hasSuffix(",") }, "\(f)")
            #expect(!a.contains("6f1c2d3e"))  // RevenueCat exports carry no appAccountToken
        }
    }
}

@Suite("The same generated world in three formats", .serialized, .tags(.slow))
struct GeneratedFormatsTests {
    func world(_ format: InputFormat) throws -> String {
        let dir = Paths.temporary() + "/\(format.rawValue)"
        _ = try WorldGenerator.generate(
            GenerateOptions(customers: 500, seed: 11, asOf: ms("2026-11-22"), format: format), to: dir)
        return dir
    }

    func run(_ dir: String, withoutRenewalInfo: Bool = false) throws -> String {
        let pipeline = dir + "/pipeline.yaml"
        if withoutRenewalInfo {
            let text = try String(contentsOfFile: pipeline, encoding: .utf8)
                .replacingOccurrences(of: "renewalInfo: [\"renewal-info.jsonl.gz\"]\n", with: "")
            try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        }
        var o = RunOptions(pipelinePath: pipeline, threads: 2)
        o.now = ms("2026-11-22T06:00:00Z")
        let published = try PipelineRun.run(o, progress: Progress(mode: .quiet)).published
        #expect(try String(contentsOfFile: published + "/rejects.csv", encoding: .utf8) == "file,line,reason,excerpt\n")
        return published
    }

    func segments(_ published: String) -> [String] {
        filesBelow(published + "/segments").filter { $0.hasSuffix(".csv") }
    }

    @Test("NDJSON and CSV give byte-identical segments")
    func csvEqualsNDJSON() throws {
        let a = try run(try world(.appstoreNDJSON))
        let b = try run(try world(.csv))
        #expect(segments(a) == segments(b))
        var rows = 0
        for f in segments(a) {
            let x = FileManager.default.contents(atPath: a + "/segments/" + f)
            #expect(x == FileManager.default.contents(atPath: b + "/segments/" + f), "\(f)")
            rows += (x.map { String(decoding: $0, as: UTF8.self).split(separator: "\n").count } ?? 1) - 1
        }
        #expect(rows > 50)
    }

    @Test("NDJSON and RevenueCat give the same customers, offers, ranks, paid months and churn dates")
    func revenueCatEqualsNDJSON() throws {
        // RevenueCat has no renewal info and no appAccountToken: compare without them.
        let a = try run(try world(.appstoreNDJSON), withoutRenewalInfo: true)
        let b = try run(try world(.revenuecat))
        #expect(segments(a) == segments(b))
        for f in segments(a) {
            let x = try String(contentsOfFile: a + "/segments/" + f, encoding: .utf8)
            let y = try String(contentsOfFile: b + "/segments/" + f, encoding: .utf8)
            let drop = { (t: String) in
                t.split(separator: "\n").map {
                    $0.split(separator: ",", omittingEmptySubsequences: false).enumerated().filter { $0.offset != 2 }
                        .map(\.element).joined(separator: ",")
                }
            }
            #expect(drop(x) == drop(y), "\(f)")
            #expect(x.split(separator: "\n").count > 1 || f.contains("summer24"), "\(f) is empty")
        }
    }
}
