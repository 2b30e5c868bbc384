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

@Suite("audience.requireApple: segments filtered on Apple's word (docs/rules.md §4.5)")
struct RequireAppleTests {
    /// Runs the golden world with `requireApple` set; returns the published folder.
    func run(_ value: String) throws -> String {
        let world = try Paths.copyFixture("golden")
        let text = try String(contentsOfFile: world + "/pipeline.yaml", encoding: .utf8)
        try (text + "\naudience:\n  requireApple: \(value)\n").write(
            toFile: world + "/pipeline.yaml", atomically: true, encoding: .utf8)
        var o = RunOptions(pipelinePath: world + "/pipeline.yaml", threads: 2)
        o.now = ms("2026-11-22T06:00:00Z")
        return try PipelineRun.run(o, progress: Progress(mode: .quiet)).published
    }

    /// (original_transaction_id, apple_eligible) of each row of a segment CSV.
    func rows(_ published: String, _ segment: String) throws -> [String] {
        let text = try String(contentsOfFile: published + "/segments/\(segment).csv", encoding: .utf8)
        return text.split(separator: "\n").dropFirst().map { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false)
            return "\(f[1].suffix(4))=\(f.last!)"
        }
    }

    func dropped(_ published: String) throws -> [String: Int] {
        let data = try #require(FileManager.default.contents(atPath: published + "/manifest.json"))
        let m = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let list = try #require(m["droppedByRequireApple"] as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: list.map { ($0["segment"] as! String, $0["rows"] as! Int) })
    }

    @Test("false keeps every row and drops nothing")
    func off() throws {
        let p = try run("false")
        #expect(try rows(p, "wb.basic.half").count == 7)
        #expect(try dropped(p).values.allSatisfy { $0 == 0 })
    }

    @Test("true keeps yes and empty (Apple said nothing), drops no; best-offer follows the rank-1 offer")
    func notDenied() throws {
        let p = try run("true")
        #expect(try rows(p, "wb.basic.half") == ["1002=yes", "1011=", "1012=yes"])
        #expect(try rows(p, "wb.basic.1m.free") == ["1001=yes", "1012=yes"])
        #expect(try rows(p, "wb.premium.6m") == ["1004=yes", "1013="])
        #expect(try rows(p, "best-offer") == ["1001=yes", "1002=yes", "1004=yes", "1011=", "1012=yes", "1013="])
        #expect(
            try dropped(p) == [
                "wb.basic.1m.free": 1, "wb.basic.half": 4, "wb.premium.6m": 0, "wb.basic.ended": 0, "best-offer": 3,
            ])
        let xml = try String(contentsOfFile: p + "/segments/best-offer.xml", encoding: .utf8)
        #expect(xml.contains("customers=\"6\""))
        for f in filesBelow(p + "/segments") where f.hasSuffix(".xml") {
            #expect(XMLSchemaValidator.validate(xmlPath: p + "/segments/" + f, xsdPath: Paths.segmentXSD) == [])
        }
    }

    @Test("strict keeps only yes")
    func strict() throws {
        let p = try run("strict")
        #expect(try rows(p, "wb.basic.half") == ["1002=yes", "1012=yes"])
        #expect(try rows(p, "wb.premium.6m") == ["1004=yes"])
        #expect(try rows(p, "best-offer") == ["1001=yes", "1002=yes", "1004=yes", "1012=yes"])
        #expect(
            try dropped(p) == [
                "wb.basic.1m.free": 1, "wb.basic.half": 5, "wb.premium.6m": 1, "wb.basic.ended": 0, "best-offer": 5,
            ])
    }

    @Test("the key takes false, true or strict; anything else, or an unknown key beside it, is exit 78")
    func validated() {
        for (v, expected) in [("false", AppleRequirement.off), ("true", .notDenied), ("strict", .listed)] {
            let (c, problems) = PipelineConfig.parse(
                PipelineConfigTests.minimal + "\naudience:\n  requireApple: \(v)\n", path: "/p.yaml")
            #expect(problems == [])
            #expect(c?.requireApple == expected)
        }
        #expect(PipelineConfig.parse(PipelineConfigTests.minimal, path: "/p.yaml").0?.requireApple == .off)
        let (_, bad) = PipelineConfig.parse(
            PipelineConfigTests.minimal + "\naudience:\n  requireApple: yes\n  requireAple: true\n", path: "/p.yaml")
        #expect(bad.count == 2)
        #expect(bad.contains { $0.contains("'audience.requireApple': expected false, true or strict, found 'yes'") })
        #expect(bad.contains { $0.contains("unknown key 'audience.requireAple'") })
        let dir = Paths.temporary()
        try? (PipelineConfigTests.minimal + "\naudience:\n  requireApple: maybe\n").write(
            toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let e = #expect(throws: WinBackError.self) { try PipelineConfig.load(path: dir + "/p.yaml") }
        #expect(e?.code.exitCode == 78)
    }
}
