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

/// The pipeline settings of signed input and the root winback trusts by default; signed worlds
/// run end to end in the slow target.
@Suite("Signed worlds: the apple: block and the built-in root")
struct SignedWorldTests {
    @Test("unknown keys under apple: and a bad environment are configuration errors")
    func appleKeysAreChecked() {
        let base =
            "name: n\ntransactions:\n  format: appstore-signed\n  paths: [x]\noffers: o.json\noutput:\n  directory: out\n"
        let (_, typo) = PipelineConfig.parse(base + "apple:\n  verfy: true\n", path: "/tmp/p.yaml")
        #expect(typo.contains { $0.contains("apple.verfy") })
        let (_, env) = PipelineConfig.parse(base + "environment: Staging\n", path: "/tmp/p.yaml")
        #expect(env.contains { $0.contains("environment") })
        let (c, none) = PipelineConfig.parse(
            base
                + "environment: Sandbox\napple:\n  verify: false\n  roots: [a.cer, b.pem]\n  bundleId: com.x\n  appAppleId: 42\n",
            path: "/tmp/p.yaml")
        #expect(none == [])
        #expect(c?.environment == "Sandbox")
        #expect(c?.apple.verify == false)
        #expect(c?.apple.roots == ["a.cer", "b.pem"])
        #expect(c?.apple.bundleId == "com.x")
        #expect(c?.apple.appAppleId == 42)
    }

    @Test("the built-in Apple root is the committed Data/certs file")
    func theBuiltInRootIsTheCommittedFile() throws {
        let committed = try #require(
            FileManager.default.contents(atPath: Paths.repo + "/Data/certs/AppleRootCA-G3.cer"))
        #expect(Array(committed) == AppleRootCA.der)
    }
}
