import Foundation
import Testing
import WinBackTestSupport

@testable import WinBackTesting

/// Signed reading through the command line: its exit codes (docs/rules.md §2.6).
@Suite("Signed data: the command line's exit codes", .tags(.slow))
struct SignedCommandLineTests {
    @Test func validateAndRunExitWith78WhenARootFileIsMissing() throws {
        let dir = Paths.temporary() + "/world"
        _ = try WorldGenerator.generate(
            GenerateOptions(customers: 5, seed: 2, asOf: ms("2026-11-22"), format: .appstoreSigned), to: dir)
        #expect(try CLI.run(["validate", dir + "/pipeline.yaml"]).status == 0)
        try FileManager.default.removeItem(atPath: dir + "/test-root.pem")
        let validate = try CLI.run(["validate", dir + "/pipeline.yaml"])
        #expect(validate.status == 78)
        #expect(validate.stderr.contains("test-root.pem"))
        #expect(try CLI.run(["run", dir + "/pipeline.yaml", "--quiet"]).status == 78)
    }
}
