import Foundation
import Testing
import WinBackTestSupport

/// Both measuring reports against an independent computation of docs/rules.md §9
/// (`Tests/Reference/measure.py`, Python's standard library only) on worlds that
/// `winback generate` did not make (`Tests/Reference/make_world.py`: other plans, offers,
/// gaps, refunds, upgrades, duplicates and offer types).
@Suite("Measuring campaigns against an independent computation", .serialized, .tags(.slow))
struct ReferenceComputationTests {
    static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    @Test(
        "winback-uplift.csv and retention-after-return.csv equal the reference: counts exactly, decimals to the fourth",
        .enabled(if: python != nil, "needs python3 (Debian: python3) to run the reference computation"),
        arguments: [(3, 2000), (8, 1500)])
    func equalsReference(seed: Int, customers: Int) throws {
        let world = Paths.temporary() + "/world"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = [Paths.repo + "/Tests/Reference/run.sh", world]
        var env = ProcessInfo.processInfo.environment
        env["WINBACK"] = CLI.binary
        env["PYTHON"] = Self.python
        env["SEED"] = String(seed)
        env["CUSTOMERS"] = String(customers)
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
        // Both reports were compared, with rows in them.
        let reports = world + "/out/reference/2026-11-22/reports/"
        for name in ["winback-uplift.csv", "retention-after-return.csv"] {
            let rows = try String(contentsOfFile: reports + name, encoding: .utf8).split(separator: "\n").count
            #expect(rows > 5, "\(name) has \(rows) lines")
        }
        #expect(text.contains("winback-uplift.csv") && text.contains("retention-after-return.csv"), "\(text)")
    }
}
