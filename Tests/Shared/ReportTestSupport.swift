import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTesting
import WinBackWrite

/// Runs the whole report stage over a hand-built world, as a run would: group the rows by
/// customer, then evaluate the audience at T and count the reports in the same pass (retention
/// counted from `retentionMonths` months back, amounts through `rates`, nil: per currency).
package func computeReports(
    _ w: TestWorld, _ rows: [Transaction], offers: [Offer] = [], asOf: String, windowMonths: Int = 12,
    gapDays: Int64 = 60, renewals: RenewalIndex? = nil, retentionMonths: Int = 24, rates: Rates? = nil,
    threads: Int = 1
) -> Reports {
    let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
    let book = OfferBook(catalog: OfferCatalog(offers: offers), ids: { w.strings.lookup($0) })
    return Reports.evaluate(
        customers, book: book, renewals: renewals, asOf: ms(asOf),
        settings: Reports.Settings(
            windowMonths: windowMonths, gapDays: gapDays, retentionMonths: retentionMonths, rates: rates),
        threads: threads
    ).reports
}

/// A hand-built world as a run holds it: its rows grouped by customer, the catalog of `offers`
/// compiled, and every customer evaluated at `asOf`.
package func evaluateWorld(
    _ w: TestWorld, _ rows: [Transaction], offers: [Offer] = [], asOf: String, gapDays: Int64 = 60,
    renewals: RenewalIndex? = nil, threads: Int = 1
) -> (customers: CustomerRows, book: OfferBook, audience: Audience) {
    let customers = CustomerRows.build(rows: rows, strings: w.strings, threads: threads)
    let book = OfferBook(catalog: OfferCatalog(offers: offers), ids: { w.strings.lookup($0) })
    let audience = Audience.evaluate(
        customers, book: book, renewals: renewals, asOf: ms(asOf), gapDays: gapDays, threads: threads)
    return (customers, book, audience)
}

/// Bytes as text, for comparing with expected CSV written out in a test.
package func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

extension TestWorld {
    /// `t` with a raw offerDiscountType (TestWorld's `free:` only sets FREE_TRIAL).
    package func discount(_ t: Transaction, _ type: String) -> Transaction {
        var t = t
        t.offerDiscountType = id(type)
        t.isFreeTrial = type == "FREE_TRIAL"
        return t
    }
}
