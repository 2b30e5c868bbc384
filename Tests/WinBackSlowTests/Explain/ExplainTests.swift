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

@Suite("explain: why a customer is or is not in an audience", .serialized)
struct ExplainTests {
    static let instructive = [
        "2000000000001001",  // eligible for two offers, ranked; Apple lists one that was too recent at S
        "2000000000001004",  // Apple lists an id the catalog lacks
        "2000000000001005",  // eligible at S, but Apple's list is empty
        "2000000000001006",  // billing retry
        "2000000000001007",  // new run after a gap; waiting after a win-back redemption
        "2000000000001009",  // family sharing only: not a subscriber
        "2000000000001010",  // refund
        "2000000000001013",  // upgrade mid-period
    ]

    @Test("text output matches the golden explanations", arguments: instructive)
    func goldenText(customer: String) throws {
        let world = Paths.fixtures + "/golden"
        let r = try CLI.run(["explain", "pipeline.yaml", "--customer", customer], cwd: world)
        #expect(r.status == 0, "\(r.stderr)")
        let out = Paths.temporary() + "/\(customer).txt"
        try r.stdout.write(toFile: out, atomically: true, encoding: .utf8)
        expectSameFile(out, golden: world + "/explain/\(customer).txt")
    }

    @Test("an unknown customer exits 66 with a clear message")
    func unknownCustomer() throws {
        let r = try CLI.run(["explain", "pipeline.yaml", "--customer", "9999"], cwd: Paths.fixtures + "/golden")
        #expect(r.status == 66)
        #expect(r.stderr.contains("no customer has originalTransactionId or appAccountToken '9999'"))
        #expect(r.stdout == "")
    }

    @Test("an empty --customer is a usage error, not every customer without a token")
    func emptyCustomer() throws {
        let r = try CLI.run(["explain", "pipeline.yaml", "--customer", ""], cwd: Paths.fixtures + "/golden")
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("--customer is empty"), "\(r.stderr)")
        #expect(r.stdout == "")
    }

    @Test("the JSON form parses back and says what the text says")
    func jsonParsesBack() throws {
        let r = try CLI.run(
            ["explain", "pipeline.yaml", "--customer", "2000000000001007", "--json"], cwd: Paths.fixtures + "/golden")
        #expect(r.status == 0, "\(r.stderr)")
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let list = try #require(obj["customers"] as? [[String: Any]])
        let c = try #require(list.first)
        #expect(c["state"] as? String == "churned")
        #expect(c["paidMonths"] as? Int == 3)
        #expect(c["monthsSinceLastSubscribed"] as? Int == 2)
        #expect(c["paidRunStart"] as? String == "2026-06-01T09:00:00.000Z")
        #expect(c["eligibleOfferIds"] as? [String] == ["wb.basic.half"])
        let periods = try #require(c["periods"] as? [[String: Any]])
        #expect(periods.count == 9)
        #expect(periods[5]["startsNewRun"] as? Bool == true)
        #expect(periods[5]["run"] as? Int == 2)
        let offers = try #require(c["offers"] as? [[String: Any]])
        let free = try #require(offers.first { $0["offerId"] as? String == "wb.basic.1m.free" })
        let failures = try #require(free["failures"] as? [[String: Any]])
        #expect(failures.map { $0["reason"] as? String } == ["wait_between_offers"])
        #expect(failures.first?["from"] as? String == "2026-12-01T09:00:00.000Z")
        // Apple's list at S = 2026-04-15, before the win-back redemption of 2026-05-01.
        let apple = try #require(c["apple"] as? [String: Any])
        #expect(apple["signedDate"] as? String == "2026-04-15T00:00:00.000Z")
        #expect(apple["state"] as? String == "churned")
        // Apple's list under Apple's name: offer ids, not Apple ids.
        #expect(apple["eligibleWinBackOfferIds"] as? [String] == ["wb.basic.1m.free"])
        #expect(apple["appleIds"] == nil)
        #expect(apple["winbackIds"] as? [String] == ["wb.basic.1m.free", "wb.basic.half"])
        let disagreements = try #require(apple["disagreements"] as? [[String: Any]])
        #expect(disagreements.map { $0["offerId"] as? String } == ["wb.basic.half"])
        #expect(disagreements.first?["winback"] as? String == "eligible")
    }

    @Test("explain and run agree on every customer of a world", arguments: ["golden", "sample"])
    func agreesWithRun(world: String) throws {
        let pipeline =
            world == "sample" ? Paths.repo + "/Pipelines/sample.yaml" : Paths.fixtures + "/golden/pipeline.yaml"
        guard FileManager.default.fileExists(atPath: pipeline) else {
            Issue.record("missing \(pipeline)")
            return
        }
        var o = RunOptions(pipelinePath: pipeline, output: Paths.temporary(), threads: 2)
        o.now = ms("2026-11-22T06:00:00Z")
        let summary = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        // From the run: customer → eligible offer ids, from best-offer.csv (the last columns).
        let best = try String(contentsOfFile: summary.published + "/segments/best-offer.csv", encoding: .utf8)
        var fromRun: [String: (ids: String, paid: String, since: String)] = [:]
        for line in best.split(separator: "\n").dropFirst() {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            fromRun[f[0] + "/" + f[1]] = (f[11], f[5], f[8])
        }
        // Customers the experiment holds out are in holdout.csv instead (docs/rules.md §9.1).
        var heldOut: Set<String> = []
        if let holdout = try? String(contentsOfFile: summary.published + "/segments/holdout.csv", encoding: .utf8) {
            for line in holdout.split(separator: "\n").dropFirst() {
                let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                #expect(fromRun[f[0] + "/" + f[1]] == nil, "\(f[1]) is in holdout.csv and best-offer.csv")
                fromRun[f[0] + "/" + f[1]] = (f[11], f[5], f[8])
                heldOut.insert(f[0] + "/" + f[1])
            }
        }
        #expect((world == "sample") == !heldOut.isEmpty)
        // Explain every customer from one read of the same inputs.
        let p = try ResolvedPipeline.resolve(o)
        let set = try TransactionReader.read(
            inputs: p.transactionFiles.map(InputStores.lookUp), format: p.config.format, threads: 2)
        let (renewals, _, _) = try RenewalReader.read(paths: p.renewalFiles, strings: set.strings)
        let customers = CustomerRows.build(rows: set.rows, strings: set.strings, threads: 2)
        let book = OfferBook(catalog: p.catalog, ids: { set.strings.lookup($0) })
        var eligibleSeen = 0
        for k in 0..<customers.count {
            let e = Explainer.explain(
                k, customers: customers, book: book, renewals: renewals, asOf: p.asOf,
                gapDays: p.config.consecutiveGapDays, experiment: p.config.experiment)
            let key = e.subscriptionGroupId + "/" + e.originalTransactionId
            #expect((e.experiment?.heldOut ?? false) == heldOut.contains(key) || e.eligibleOfferIds.isEmpty, "\(key)")
            if let r = fromRun[key] {
                eligibleSeen += 1
                #expect(e.eligibleOfferIds.joined(separator: ";") == r.ids, "\(key)")
                #expect(e.paidMonths.map(String.init) == r.paid, "\(key)")
                #expect(e.monthsSinceLastSubscribed.map(String.init) == r.since, "\(key)")
            } else {
                #expect(e.eligibleOfferIds.isEmpty, "\(key) is eligible in explain but in no segment")
            }
            // Every ineligible offer says why.
            for v in e.offers where !v.eligible { #expect(!v.failures.isEmpty, "\(key) \(v.offerId)") }
        }
        #expect(eligibleSeen == fromRun.count)
        #expect(eligibleSeen > 0)
    }
}
