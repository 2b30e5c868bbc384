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

/// The smaller pieces of signed reading: the array walker, the shared chain cache under
/// several threads, the roots' forms. (The command line's exit codes are in the slow tests,
/// `SignedCommandLineTests`.)
@Suite struct SignedPiecesTests {
    func elements(_ json: String) -> [String] {
        let scanner = JSONLineScanner(keys: ["a"])
        var out: [String] = []
        Array(#"{"a":\#(json)}"#.utf8).withUnsafeBytes { b in
            guard scanner.scan(b), case .other(.array, let raw) = scanner.lastValues[0] else { return }
            JSONArrayElements.forEach(raw) { out.append(String(decoding: $0, as: UTF8.self)) }
        }
        return out
    }

    @Test func theArrayWalkerFindsEachElementWhateverItHolds() {
        #expect(elements("[]") == [])
        #expect(elements("[ ]") == [])
        #expect(elements(#"["a"]"#) == [#""a""#])
        #expect(elements(#" [ "a" , "b,c" ,"d]\"e" ] "#) == [#""a""#, #""b,c""#, #""d]\"e""#])
        #expect(
            elements(#"[{"x":[1,{"y":"]}"}]},[[]],null,-1.5e3,true]"#)
                == [#"{"x":[1,{"y":"]}"}]}"#, "[[]]", "null", "-1.5e3", "true"])
        #expect(elements(#"["\\",1]"#) == [#""\\""#, "1"])
        #expect(elements(#"["x\\\\", {"k":"\\\"]"} ,"\\\\\"]"]"#) == [#""x\\\\""#, #"{"k":"\\\"]"}"#, #""\\\\\"]""#])
    }

    @Test func theChainCacheIsSharedSafelyByManyThreads() throws {
        let f = try SignedFixture()
        let other = try f.chain.signer(f.chain.leaf(from: SignedFixture.year2020, until: SignedFixture.year2040))
        let jws = try (0..<200).map { i in
            try (i % 2 == 0 ? f.signer : other).sign(
                Array(SignedFixture.transaction("\(2_000_000_000_000_000 + i)").utf8))
        }
        let chains = ChainVerifier(roots: [f.chain.root])
        let failures = ResultSlots<Int>(count: 8)
        try parallelFor(count: 8, threads: 4) { t in
            let verifier = SignedDataVerifier(chains: chains)
            var failed = 0
            for (i, s) in jws.enumerated() where (i + t) % 3 != 0 {
                let f = Array(s.utf8).withUnsafeBytes { verifier.verify(CompactJWS($0)!, at: 1_735_689_600_000) }
                if f != nil { failed += 1 }
            }
            failures[t] = failed
        }
        #expect(failures.all == Array(repeating: 0, count: 8))
        #expect(chains.fullValidations == 2)
    }
}

extension SignedPiecesTests {
    @Test func rootsLoadAsDEROrPEMAndAnythingElseIsAConfigurationError() throws {
        let dir = Paths.temporary()
        let der = try #require(FileManager.default.contents(atPath: Paths.repo + "/Data/certs/AppleRootCA-G3.cer"))
        let pem =
            "\n-----BEGIN CERTIFICATE-----\r\n"
            + der.base64EncodedString(options: [
                .lineLength64Characters, .endLineWithCarriageReturn, .endLineWithLineFeed,
            ])
            + "\r\n-----END CERTIFICATE-----\r\n"
        try der.write(to: URL(fileURLWithPath: dir + "/root.cer"))
        try Data(pem.utf8).write(to: URL(fileURLWithPath: dir + "/root.pem"))
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: dir + "/bad.cer"))
        var apple = AppleSettings()
        apple.roots = ["root.cer", dir + "/root.pem"]
        let read = try SignedReading.resolve(apple, folder: dir, now: 0)
        #expect(
            read.roots.map(\.sha256)
                == Array(repeating: "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179", count: 2))
        for bad in ["bad.cer", "missing.cer"] {
            apple.roots = [bad]
            do {
                _ = try SignedReading.resolve(apple, folder: dir, now: 0)
                Issue.record("\(bad) should not load")
            } catch let e as WinBackError {
                #expect(e.code == .configuration)
            }
        }
    }
}
