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

/// explain over a hand-built world and the golden fixture, in this process; the command line's
/// explain is in the slow target.
@Suite("explain: a customer found and explained in this process")
struct ExplainTests {
    @Test("an appAccountToken finds its customer, with all of their rows")
    func byToken() throws {
        var o = RunOptions(pipelinePath: Paths.fixtures + "/golden/pipeline.yaml")
        o.now = ms("2026-11-22T06:00:00Z")
        let byToken = try Explainer.explain(o, customer: "6f1c2d3e-0000-4000-8000-000000000001")
        let byId = try Explainer.explain(o, customer: "2000000000001001")
        #expect(byToken.count == 1)
        #expect(byToken.first?.originalTransactionId == "2000000000001001")
        #expect(byToken.first?.text == byId.first?.text)
        #expect(byToken.first?.periods.count == 12)
        // In any case (docs/rules.md §2.1): the same customer.
        for asked in ["6F1C2D3E-0000-4000-8000-000000000001", "6F1c2D3e-0000-4000-8000-000000000001"] {
            let again = try Explainer.explain(o, customer: asked)
            #expect(again.map(\.text) == byToken.map(\.text), "\(asked)")
        }
    }

    @Test("a customer id present in two groups is explained once per group")
    func severalGroups() throws {
        let w = TestWorld()
        let rows =
            w.monthly(from: "2025-01-01T12:00:00Z", count: 3, customer: "c9", group: "g1")
            + w.monthly(from: "2025-02-01T12:00:00Z", count: 5, product: "photo", customer: "c9", group: "g2")
        let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: 1)
        #expect(customers.count == 2)
        let book = OfferBook(catalog: OfferCatalog(offers: [TestWorld.basicOffer()]), ids: { w.strings.lookup($0) })
        let list = (0..<customers.count).map {
            Explainer.explain($0, customers: customers, book: book, renewals: nil, asOf: ms("2025-09-01"), gapDays: 60)
        }
        #expect(list.map(\.subscriptionGroupId) == ["g1", "g2"])
        #expect(list[0].eligibleOfferIds == ["wb.basic.1m.free"])
        #expect(list[1].offers.isEmpty)  // the catalog has nothing for g2
        #expect(list[1].paidMonths == 5)
    }
}
