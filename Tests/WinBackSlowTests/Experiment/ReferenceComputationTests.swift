import Foundation
import Testing
import WinBackTestSupport

/// The measuring reports against an independent computation of docs/rules.md §9 and §13
/// (`Tests/Reference/measure.py`, Python's standard library only) on worlds that
/// `winback generate` did not make (`Tests/Reference/make_world.py`: other plans, offers,
/// gaps, refunds, upgrades, duplicates and offer types).
@Suite("Measuring campaigns against an independent computation", .serialized, .tags(.slow))
struct ReferenceComputationTests {
    static let python = CLI.python

    @Test(
        "uplift, retention and revenue reports equal the reference, with and without money: counts and amounts exactly, rates to the 4th decimal, revenue intervals to the 3rd",
        .enabled(if: python != nil, "needs python3 (Debian: python3) to run the reference computation"),
        arguments: [(3, 2000, false), (8, 1500, false), (3, 2000, true), (8, 1500, true)])
    func equalsReference(seed: Int, customers: Int, money: Bool) throws {
        let world = Paths.temporary() + "/world"
        let environment = [
            "WINBACK": CLI.binary, "PYTHON": Self.python ?? "", "SEED": String(seed), "CUSTOMERS": String(customers),
            "MONEY": money ? "1" : "0",
        ]
        let (status, text) = try CLI.output(
            "/bin/sh", [Paths.repo + "/Tests/Reference/run.sh", world], environment: environment)
        #expect(status == 0, "\(text)")
        // Every report was compared, with rows in it (the revenue uplift's only with money: without,
        // the world's rows are in several currencies and the file holds its header alone).
        let reports = world + "/out/reference/2026-11-22/reports/"
        for name in ["winback-uplift.csv", "retention-after-return.csv", "revenue-after-return.csv"]
            + (money ? ["winback-revenue-uplift.csv"] : [])
        {
            let rows = try String(contentsOfFile: reports + name, encoding: .utf8).split(separator: "\n").count
            #expect(rows > 5, "\(name) has \(rows) lines")
            #expect(text.contains(name + ": "), "\(text)")
        }
        let uplift = try String(contentsOfFile: reports + "winback-revenue-uplift.csv", encoding: .utf8)
        #expect((uplift.split(separator: "\n").count == 1) == !money)
        #expect(text.contains("winback-revenue-uplift.csv: "), "\(text)")
    }
}
