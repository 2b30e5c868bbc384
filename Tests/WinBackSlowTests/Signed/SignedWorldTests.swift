import Foundation
import Testing
import WinBackTestSupport
import X509

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// A generated world written decoded and signed, run end to end.
@Suite("End to end: signed worlds", .serialized)
struct SignedWorldTests {
    static let asOf = ms("2026-11-22")

    func generate(_ format: InputFormat, customers: Int = 200) throws -> String {
        let dir = Paths.temporary() + "/world-\(format.rawValue)"
        var o = GenerateOptions(customers: customers, seed: 11, asOf: Self.asOf, format: format)
        o.threads = 2
        _ = try WorldGenerator.generate(o, to: dir)
        return dir
    }

    func run(_ world: String, output: String? = nil, threads: Int = 2) throws -> RunSummary {
        var o = RunOptions(pipelinePath: world + "/pipeline.yaml", output: output ?? world + "/out", threads: threads)
        o.now = ms("2026-11-22T06:00:00Z")
        return try PipelineRun.run(o, progress: Progress(mode: .quiet))
    }

    func manifest(_ summary: RunSummary) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: summary.published + "/manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The lines of a world's transaction file.
    func lines(_ path: String) throws -> [String] {
        String(decoding: try ReadSupport.readAll(path), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// A bare JWS of the world with its payload changed to a new customer's: its signature no
    /// longer holds.
    func forged(from world: String, customer: Int) throws -> String {
        let files = filesBelow(world).filter { $0.hasPrefix("transactions-") }.sorted()
        for f in files.reversed() {
            for line in try lines(world + "/" + f) where line.hasPrefix("eyJ") {
                let parts = line.split(separator: ".").map(String.init)
                let buffer = DecodeBuffer()
                let decoded = Array(parts[1].utf8).withUnsafeBytes { buffer.decode($0) }
                #expect(decoded)
                var json = String(decoding: buffer.bytes, as: UTF8.self)
                json = json.replacingOccurrences(
                    of: #""originalTransactionId":"[0-9]+""#,
                    with: #""originalTransactionId":"\#(990_000_000_000_000 + customer)""#, options: .regularExpression)
                json = json.replacingOccurrences(
                    of: #""transactionId":"[0-9]+""#, with: #""transactionId":"\#(980_000_000_000_000 + customer)""#,
                    options: .regularExpression)
                return parts[0] + "." + Base64URL.encode(Array(json.utf8)) + "." + parts[2]
            }
        }
        Issue.record("no bare JWS in the world")
        return ""
    }

    @Test("a world written decoded and signed gives byte-identical segments and reports")
    func decodedAndSignedAgree() throws {
        let decoded = try run(try generate(.appstoreNDJSON))
        let signedWorld = try generate(.appstoreSigned)
        let signed = try run(signedWorld)
        for folder in ["segments", "reports"] {
            let files = filesBelow(decoded.published + "/" + folder)
            #expect(!files.isEmpty)
            #expect(filesBelow(signed.published + "/" + folder) == files)
            for f in files {
                expectSameFile(signed.published + "/\(folder)/" + f, golden: decoded.published + "/\(folder)/" + f)
            }
        }
        #expect(signed.counters.rejected == 0)
        #expect(signed.counters.rowsRead == decoded.counters.rowsRead)
        #expect(signed.counters.lines < signed.counters.rowsRead)  // pages hold several
        #expect(signed.counters.duplicates == decoded.counters.duplicates)
        #expect(signed.counters.otherEnvironment == decoded.counters.otherEnvironment)
        #expect(signed.states == decoded.states)
        let m = try manifest(signed)
        #expect(m["format"] as? String == InputFormat.appstoreSigned.rawValue)
        let signatures = try #require(m["signatures"] as? [String: Any])
        #expect(signatures["verified"] as? Bool == true)
        let roots = try #require(signatures["roots"] as? [[String: String]])
        #expect(roots.map { $0["path"] } == ["test-root.pem"])
        #expect(roots.first?["sha256"]?.count == 64)
        let counters = try #require(m["counters"] as? [String: Any])
        #expect(counters["otherEnvironment"] as? Int == counters["sandbox"] as? Int)
        #expect(try manifest(decoded)["signatures"] == nil)
    }

    @Test("a forged row never reaches a segment, and one forged row does not fail the run")
    func aForgedRowIsRejected() throws {
        let world = try generate(.appstoreSigned)
        let clean = try run(world, output: world + "/clean")
        let forged = try forged(from: world, customer: 1)
        let target = world + "/" + filesBelow(world).filter { $0.hasPrefix("transactions-") }.sorted()[3]
        let handle = try #require(FileHandle(forWritingAtPath: target))
        handle.seekToEndOfFile()
        handle.write(Data(ReadSupport.gzip(forged + "\n")))  // a second gzip member
        handle.closeFile()
        let dirty = try run(world, output: world + "/dirty")
        #expect(dirty.counters.rejected == 1)
        let rejects = String(
            decoding: try #require(FileManager.default.contents(atPath: dirty.published + "/rejects.csv")),
            as: UTF8.self)
        #expect(rejects.contains("signature: "))
        for f in filesBelow(clean.published + "/segments") {
            expectSameFile(dirty.published + "/segments/" + f, golden: clean.published + "/segments/" + f)
            let text = String(
                decoding: FileManager.default.contents(atPath: dirty.published + "/segments/" + f) ?? Data(),
                as: UTF8.self)
            #expect(!text.contains("990000000000001"))
        }
    }

    @Test("a file of forged rows fails the run with bad data (exit 65)")
    func aFileOfForgedRowsFailsTheRun() throws {
        let world = try generate(.appstoreSigned, customers: 40)
        let rows = try (1...60).map { try forged(from: world, customer: $0) }
        try Data(ReadSupport.gzip(rows.joined(separator: "\n") + "\n")).write(
            to: URL(fileURLWithPath: world + "/transactions-2099-01.jsonl.gz"))
        do {
            _ = try run(world)
            Issue.record("the run should have failed")
        } catch let e as WinBackError {
            #expect(e.code == .badData)
            #expect(e.code.exitCode == 65)
        }
    }

    @Test("a missing root file is a configuration error (exit 78), for run and validate")
    func aMissingRootIsAConfigurationError() throws {
        let world = try generate(.appstoreSigned, customers: 5)
        try FileManager.default.removeItem(atPath: world + "/test-root.pem")
        do {
            _ = try run(world)
            Issue.record("the run should have failed")
        } catch let e as WinBackError {
            #expect(e.code == .configuration)
        }
        let report = PipelineValidation.check(pipelinePath: world + "/pipeline.yaml")
        #expect(report.problems.contains { $0.contains("test-root.pem") })
    }

    @Test("Apple's own root is the default, and verify: false is recorded")
    func theDefaultRootIsApples() throws {
        let world = try generate(.appstoreSigned, customers: 20)
        var yaml = try String(contentsOfFile: world + "/pipeline.yaml", encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "  roots: [test-root.pem]", with: "  verify: false")
        try yaml.write(toFile: world + "/pipeline.yaml", atomically: true, encoding: .utf8)
        let unverified = try run(world, output: world + "/unverified")
        #expect(unverified.counters.rejected == 0)
        let signatures = try #require(try manifest(unverified)["signatures"] as? [String: Any])
        #expect(signatures["verified"] as? Bool == false)
        // With verification and Apple's root, the test chain's rows are all refused.
        yaml = yaml.replacingOccurrences(of: "  verify: false", with: "  verify: true")
        try yaml.write(toFile: world + "/pipeline.yaml", atomically: true, encoding: .utf8)
        do {
            _ = try run(world, output: world + "/apple")
            Issue.record("the run should have failed")
        } catch let e as WinBackError {
            #expect(e.code == .badData)
        }
        let p = try ResolvedPipeline.resolve(RunOptions(pipelinePath: world + "/pipeline.yaml"))
        #expect(p.signed?.roots.map(\.sha256) == ["63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"])
    }
}

extension SignedWorldTests {
    @Test("explain reads signed inputs, says each row's signature was verified, and agrees with the decoded world")
    func explainOnSignedInputs() throws {
        let decoded = try generate(.appstoreNDJSON, customers: 30)
        let signed = try generate(.appstoreSigned, customers: 30)
        var o = RunOptions(pipelinePath: decoded + "/pipeline.yaml")
        o.now = ms("2026-11-22T06:00:00Z")
        var checked = 0
        for customer in ["1000000000000003", "1000000000000010", "1000000000000021"] {
            o.pipelinePath = decoded + "/pipeline.yaml"
            guard let plain = try? Explainer.explain(o, customer: customer) else { continue }
            o.pipelinePath = signed + "/pipeline.yaml"
            let verified = try Explainer.explain(o, customer: customer)
            #expect(verified.map(\.eligibleOfferIds) == plain.map(\.eligibleOfferIds))
            #expect(verified.map(\.periods.count) == plain.map(\.periods.count))
            for e in verified {
                #expect(e.signatures?.hasPrefix("each row verified") == true)
                #expect(e.rows.allSatisfy { $0.signatureVerified == true })
                #expect(e.text.contains("signature verified"))
            }
            #expect(plain.allSatisfy { $0.signatures == nil && !$0.text.contains("signature") })
            checked += 1
        }
        #expect(checked > 0)
    }
}

extension SignedWorldTests {
    @Test("a signed world is the same in content from one generation to the next, not byte for byte")
    func signedWorldsAreDeterministicInContent() throws {
        let a = try generate(.appstoreSigned, customers: 60)
        let b = Paths.temporary() + "/again"
        var o = GenerateOptions(customers: 60, seed: 11, asOf: Self.asOf, format: .appstoreSigned)
        o.threads = 1
        _ = try WorldGenerator.generate(o, to: b)
        let files = filesBelow(a).filter { $0.hasPrefix("transactions-") }
        #expect(files == filesBelow(b).filter { $0.hasPrefix("transactions-") })
        // The same lines in the same forms; the signatures (and the chain) differ.
        let first = try lines(a + "/" + files[files.count / 2])
        let second = try lines(b + "/" + files[files.count / 2])
        #expect(first.count == second.count)
        #expect(zip(first, second).allSatisfy { $0.prefix(2) == $1.prefix(2) })
        #expect(first != second)
        let (ra, rb) = (try run(a), try run(b))
        for folder in ["segments", "reports"] {
            for f in filesBelow(ra.published + "/" + folder) {
                expectSameFile(rb.published + "/\(folder)/" + f, golden: ra.published + "/\(folder)/" + f)
            }
        }
        #expect(ra.counters == rb.counters)
    }
}

extension SignedWorldTests {
    @Test("the early rows of a signed world are signed by a leaf that has since expired")
    func earlyRowsAreSignedByAnExpiredLeaf() throws {
        let format = try SignedWorldFormat(asOf: Self.asOf)
        let leaf = { (s: JWSSigner) -> Date in
            let buffer = DecodeBuffer()
            _ = Array(s.header.utf8).withUnsafeBytes { buffer.decode($0) }
            let header = JWSHeader.parse(buffer.bytes)
            let der = Data(base64Encoded: header?.x5c?.first ?? "") ?? Data()
            return (try? Certificate(derEncoded: Array(der)))?.notValidAfter ?? .distantFuture
        }
        #expect(leaf(format.early).timeIntervalSince1970 * 1000 < Double(Self.asOf))
        #expect(leaf(format.late).timeIntervalSince1970 * 1000 > Double(Self.asOf))
        // Both leaves sign rows of a generated world.
        let world = try generate(.appstoreSigned, customers: 60)
        var headers = Set<Substring>()
        for f in filesBelow(world) where f.hasPrefix("transactions-") {
            for line in try lines(world + "/" + f) where line.hasPrefix("eyJ") {
                headers.insert(line.split(separator: ".")[0])
            }
        }
        #expect(headers.count == 2)
    }
}
