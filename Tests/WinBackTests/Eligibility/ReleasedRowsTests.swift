import Foundation
import Testing
import WinBackTestSupport

@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport

/// The evaluation lets go of the rows as it goes (docs/architecture.md): what the stages after
/// it ask of a customer's rows, the latest win-back purchases (docs/rules.md §10.5 `redeemed`),
/// it keeps, and the rows can no longer be read.
@Suite("Rows released by the evaluation")
struct ReleasedRowsTests {
    static let asOf = "2026-11-01"

    /// 3,000 customers (about a megabyte of rows, many pages): paid months, and for some a
    /// win-back purchase of wb.a or wb.b, twice, after T, family shared or without an offer id.
    static func world(_ w: TestWorld) -> [Transaction] {
        var rows: [Transaction] = []
        for i in 0..<3_000 {
            let c = "c\(i)"
            rows += w.monthly(from: "2026-0\(1 + i % 6)-01T12:00:00Z", count: 1 + i % 4, customer: c)
            func winBack(_ day: String, _ offer: String?, family: Bool = false) {
                rows.append(
                    w.tx(
                        day + "T12:00:00Z", "2026-12-20T12:00:00Z", customer: c, free: true, offerType: 4,
                        offerId: offer, family: family))
            }
            switch i % 7 {
            case 1: winBack("2026-09-10", "wb.a")
            case 2:
                winBack("2026-09-10", "wb.a")
                winBack("2026-10-05", "wb.a")
            case 3:
                winBack("2026-08-01", "wb.a")
                winBack("2026-10-20", "wb.b")
            case 4: winBack("2026-11-15", "wb.a")  // after T: not known
            case 5: winBack("2026-10-01", "wb.b", family: true)  // not a purchase of theirs
            case 6: winBack("2026-10-01", nil)
            default: break
            }
        }
        return rows
    }

    @Test(
        "the latest win-back purchases are what a scan of the rows finds; the rows are gone after", arguments: [1, 2])
    func latestWinBacksAndReleasedRows(threads: Int) throws {
        let w = TestWorld()
        let rows = Self.world(w)
        let book = OfferBook(catalog: OfferCatalog(offers: []), ids: { w.strings.lookup($0) })
        let t = ms(Self.asOf)
        let kept = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
        let released = CustomerRows.build(rows: try TransactionRows.mapped(rows), strings: w.strings, threads: threads)
        // What the exit reasons scanned the rows for, before the rows could go.
        let offers = [w.strings.lookup("wb.a")!, w.strings.lookup("wb.b")!, Transaction.none]
        var expected: [[Int64?]] = []
        for k in 0..<kept.count {
            expected.append(
                offers.map { id in
                    kept.rows(of: k).filter {
                        $0.offerType == 4 && $0.offerIdentifier == id && $0.isKnownPurchase(at: t)
                    }.map(\.purchaseDate).max()
                })
        }
        #expect(expected.contains { $0[0] != nil } && expected.contains { $0[1] != nil })
        #expect(expected.contains { $0[0] != nil && $0[1] != nil })
        let plain = Audience.evaluate(kept, book: book, renewals: nil, asOf: t, gapDays: 60, threads: threads)
        let (audience, _) = Audience.evaluate(
            released, book: book, renewals: nil, asOf: t, gapDays: 60, experiment: nil, threads: threads,
            releasingRows: true, piece: {}, visit: { _, _, _, _, _, _ in }, ended: { _ in })
        #expect(released.rows.released && !kept.rows.released)
        #expect(released.rows.count == rows.count)
        #expect(audience.counts == plain.counts)
        #expect(audience.results.map(\.timeline) == plain.results.map(\.timeline))
        for k in 0..<kept.count {
            #expect(offers.map { audience.winBacks.latest(customer: k, offer: $0) } == expected[k], "customer \(k)")
            #expect(offers.map { plain.winBacks.latest(customer: k, offer: $0) } == expected[k], "customer \(k)")
        }
    }
}
