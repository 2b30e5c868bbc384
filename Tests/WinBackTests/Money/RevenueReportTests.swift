import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting

/// Every report of the rows at `asOf`, amounts through `rates` (nil: per currency).
private func revenueReports(
    _ w: TestWorld, _ rows: [Transaction], asOf: String = RevenueReportTests.asOf, rates: Rates? = nil,
    threads: Int = 1
) -> Reports {
    computeReports(w, rows, asOf: asOf, rates: rates, threads: threads)
}

/// `t` priced at `price` milliunits of `currency`.
private func priced(_ w: TestWorld, _ t: Transaction, _ price: Int64, _ currency: String = "USD") -> Transaction {
    var t = t
    t.price = price
    t.currency = w.id(currency)
    return t
}

private func rates(_ text: String, currency: String = "USD") throws -> Rates {
    try Rates.parse(Array(text.utf8), currency: currency, path: "rates.csv")
}

private func csv(_ r: Reports) -> [String] {
    String(decoding: RevenueReport.csv(r.revenue, reporting: r.reportingCurrency), as: UTF8.self)
        .split(separator: "\n").map(String.init)
}

@Suite("Money: revenue-after-return.csv and the rates (docs/rules.md §13.1, §13.2)")
struct RevenueReportTests {
    static let asOf = "2026-11-22"

    /// Left after January 2025 (9.990 paid), back on 2025-04-01T12 with a win-back offer at
    /// 4.990, then `months` paid months at 9.990 from 2025-05-01T12.
    private func winBack(_ w: TestWorld, _ c: String, months: Int = 12, currency: String = "USD") -> [Transaction] {
        [
            priced(w, w.tx("2025-01-01T12:00:00Z", "2025-02-01T12:00:00Z", customer: c), 9_990, currency),
            priced(
                w,
                w.tx("2025-04-01T12:00:00Z", "2025-05-01T12:00:00Z", customer: c, offerType: 4, offerId: "wb.half"),
                4_990, currency),
        ] + w.monthly(from: "2025-05-01T12:00:00Z", count: months, customer: c).map { priced(w, $0, 9_990, currency) }
    }

    @Test("revenue at 1, 3, 6 and 12 months sums the rows bought from the return until the horizon")
    func horizons() {
        let w = TestWorld()
        let r = revenueReports(w, winBack(w, "c1"))
        #expect(
            csv(r) == [
                RevenueReport.columns.joined(separator: ","),
                "win_back,wb.half,USD,1,1,4.990,0.000,4.990,4.990,1,24.970,0.000,24.970,24.970,1,54.940,0.000,54.940,"
                    + "54.940,1,114.880,0.000,114.880,114.880",
                "*,,USD,1,1,4.990,0.000,4.990,4.990,1,24.970,0.000,24.970,24.970,1,54.940,0.000,54.940,54.940,1,"
                    + "114.880,0.000,114.880,114.880",
            ])
        #expect(r.money == MoneyCounts.with(currencies: ["USD"]))
    }

    @Test("refunds: prorated at 0, 50 and 100 %, a family revoke, and a revocation after T")
    func refunds() throws {
        let w = TestWorld()
        var rows = winBack(w, "c1", months: 4)
        // The months bought 05-01, 06-01, 07-01 and 08-01 revoked in turn.
        func revoke(_ i: Int, _ type: RevocationType, _ p: Int32?, at: String = "2025-09-15T00:00:00Z") {
            rows[i].revocationDate = ms(at)
            rows[i].revocationType = type
            rows[i].revocationPercentage = p ?? Transaction.noPercentage
        }
        revoke(2, .refundProrated, 0)
        revoke(3, .refundProrated, 50_000)
        revoke(4, .refundProrated, 100_000)
        revoke(5, .familyRevoke, nil)
        let r = revenueReports(w, rows)
        let row = try #require(r.revenue.first)
        // 3 months: 4.990 + 9.990 + 9.990 gross; 4.995 back for 06-01.
        #expect(row.gross[1].units == "24.970" && row.refunded(1).units == "4.995" && row.net[1].units == "19.975")
        // 6 months: + 07-01 (all back) and 08-01 (family: nothing back).
        #expect(row.gross[2].units == "44.950" && row.refunded(2).units == "14.985" && row.net[2].units == "29.965")
        // A revocation known only after T refunds nothing yet.
        revoke(4, .refundFull, nil, at: "2026-12-01T00:00:00Z")
        let later = try #require(revenueReports(w, rows).revenue.first)
        #expect(later.refunded(2).units == "4.995")
    }

    @Test("a return whose horizons have not passed counts only where observable")
    func notYetObservable() throws {
        let w = TestWorld()
        let rows = [
            priced(w, w.tx("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"), 9_990),
            priced(w, w.tx("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z", offerType: 4, offerId: "wb"), 4_990),
            priced(w, w.tx("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"), 9_990),
        ]
        let row = try #require(revenueReports(w, rows).revenue.first)
        #expect(row.returns == 1 && row.observable == [1, 0, 0, 0])
        #expect(row.net.map(\.units) == ["4.990", "0.000", "0.000", "0.000"])
        #expect(row.netPerReturn(0) == "4.990" && row.netPerReturn(1) == "")
    }

    @Test("without money: a return counts in its first row's currency; other currencies and unpriced rows are counted")
    func perCurrency() throws {
        let w = TestWorld()
        var rows = winBack(w, "c1", months: 2, currency: "EUR")
        rows[3] = priced(w, rows[3], 8_000, "USD")  // 06-01 in another currency
        var plain = winBack(w, "c2", months: 2, currency: "JPY")
        plain[1].price = Transaction.unpriced  // the return's first row has no amount
        let krw = winBack(w, "c3", months: 0, currency: "KRW").map { priced(w, $0, 14_900_000, "KRW") }
        let r = revenueReports(w, rows + plain + krw)
        #expect(r.revenue.map(\.currency) == ["EUR", "KRW"])
        #expect(r.revenue[0].net[1].units == "14.980")  // 4.990 + 9.990, not the 8.000 in USD
        #expect(r.revenue[1].net[0].units == "14900.000")
        #expect(r.money.otherCurrency == 1)
        #expect(r.money.unpriced == 1)
        #expect(r.money.currencies == ["EUR", "USD", "JPY", "KRW"])
        let lines = csv(r)
        #expect(lines.count == 1 + 2 + 2)
        #expect(lines[3].hasPrefix("*,,EUR,1,") && lines[4].hasPrefix("*,,KRW,1,"))
    }

    @Test("with money: rows converted half to even, a month's rate before the undated one, unconverted counted")
    func converted() throws {
        let w = TestWorld()
        let r8 = try rates("month,currency,rate\n,EUR,1.1\n2025-05,EUR,1.2\n,JPY,0.0067\n")
        // EUR customer: 4.990 × 1.1 = 5.489; 05-01's 9.990 × 1.2 = 11.988; 06-01 × 1.1 = 10.989.
        let eur = winBack(w, "c1", months: 2, currency: "EUR")
        // JPY: ¥1 200 = 1 200 000 milliunits × 0.0067 = 8 040. KRW has no rate.
        let jpy = winBack(w, "c2", months: 1, currency: "JPY").map { priced(w, $0, 1_200_000, "JPY") }
        var krw = winBack(w, "c3", months: 1, currency: "KRW")
        krw[1] = priced(w, krw[1], 4_990, "USD")
        let r = revenueReports(w, eur + jpy + krw, rates: r8)
        #expect(r.revenue.map(\.currency) == ["USD"])
        let row = try #require(r.revenue.first)
        #expect(row.returns == 3)
        // 1 month: 5.489 + 8.040 + 4.990 (the KRW customer's return row, in USD).
        #expect(row.net[0].units == "18.519")
        // 3 months: + 11.988 + 10.989 (EUR) + 8.040 (JPY 05-01); KRW's 05-01 has no rate.
        #expect(row.net[1].units == "49.536")
        #expect(r.money.unconverted == ["KRW": 2])
        #expect(csv(r).last?.hasPrefix("*,,USD,3,3,18.519,") == true)
        // With money the total row is written even without returns.
        let none = revenueReports(TestWorld(), [], rates: r8)
        #expect(
            csv(none) == [
                RevenueReport.columns.joined(separator: ","),
                "*,,USD,0,0,0.000,0.000,0.000,,0,0.000,0.000,0.000,,0,0.000,0.000,0.000,,0,0.000,0.000,0.000,",
            ])
    }

    @Test("the largest prices sum exactly")
    func largest() throws {
        let w = TestWorld()
        let rows = winBack(w, "c1", months: 3).map { priced(w, $0, .max) }
        let row = try #require(revenueReports(w, rows).revenue.first)
        #expect(row.gross[1].value == Int128(Int64.max) * 3)
        #expect(row.gross[1].units == "27670116110564327.421")
        let converted = try #require(
            revenueReports(
                w, rows.map { priced(w, $0, .max, "KRW") }, rates: try rates("currency,rate\nKRW,9999999.999999999\n")
            ).revenue.first)
        let one = Rates.convert(.max, rate: 9_999_999_999_999_999)
        #expect(one == (Int128(Int64.max) * 9_999_999_999_999_999 + 500_000_000) / 1_000_000_000)
        #expect(converted.net[0].value == one && converted.net[3].value == 4 * one)
    }

    @Test("threads do not change the reports")
    func threads() {
        let w = TestWorld()
        var rows: [Transaction] = []
        for c in 0..<40 { rows += winBack(w, "c\(c)", months: c % 14, currency: ["USD", "EUR", "JPY"][c % 3]) }
        let r8 = try? rates("currency,rate\nEUR,1.07\nJPY,0.0066\n")
        for rates in [nil, r8] {
            let one = revenueReports(w, rows, rates: rates, threads: 1)
            for n in [2, 3] {
                let many = revenueReports(w, rows, rates: rates, threads: n)
                #expect(many.revenue == one.revenue && many.money == one.money)
            }
        }
    }

    // MARK: - Rates

    @Test("rates: exact decimals, conversion half to even, the reporting currency at 1")
    func rateFile() throws {
        let r = try rates("currency,rate\nEUR,0.5\nJPY,0.006700000\nGBP,12\n")
        #expect(r.rate("EUR", month: 0) == 500_000_000)
        #expect(r.rate("JPY", month: 0) == 6_700_000)
        #expect(r.rate("GBP", month: 0) == 12_000_000_000)
        #expect(r.rate("USD", month: 0) == Rates.scale)
        #expect(r.rate("KRW", month: 0) == nil)
        #expect([1, 3, 5, 7, -1, -3].map { Rates.convert($0, rate: 500_000_000) } == [0, 2, 2, 4, 0, -2])
        #expect(Rates.convert(500_000_000, rate: 1) == 0 && Rates.convert(500_000_001, rate: 1) == 1)
        #expect(Rates.convert(1_500_000_000, rate: 1) == 2 && Rates.convert(-2_500_000_000, rate: 1) == -2)
        let dated = try rates("month,currency,rate\n,EUR,1.1\n2025-05,EUR,1.2\n2025-06,JPY,0.0067\n")
        #expect(dated.rate("EUR", month: 2025 * 12 + 4) == 1_200_000_000)
        #expect(dated.rate("EUR", month: 2025 * 12 + 5) == 1_100_000_000)
        #expect(dated.rate("JPY", month: 2025 * 12 + 5) == 6_700_000)
        #expect(dated.rate("JPY", month: 2025 * 12 + 6) == nil)
        #expect(Rates.month(ms("2025-05-31T23:59:59Z")) == 2025 * 12 + 4)
    }

    @Test("rates: every malformed file is a configuration error naming its line")
    func badRates() {
        let bad: [(String, String)] = [
            ("", "line 1"), ("rate,currency\n", "line 1"), ("currency,rate\nEUR\n", "line 2"),
            ("currency,rate\neur,1\n", "line 2"), ("currency,rate\nEUR,1.0000000001\n", "line 2"),
            ("currency,rate\nEUR,-1\n", "line 2"), ("currency,rate\nEUR,1e3\n", "line 2"),
            ("currency,rate\nEUR,.5\n", "line 2"), ("currency,rate\nEUR,10000000\n", "line 2"),
            ("currency,rate\nEUR,1\nEUR,2\n", "line 3"), ("month,currency,rate\n2025-13,EUR,1\n", "line 2"),
            ("month,currency,rate\n2025-5,EUR,1\n", "line 2"),
            ("month,currency,rate\n2025-05,EUR,1\n2025-05,EUR,1\n", "line 3"),
        ]
        for (text, line) in bad {
            do {
                _ = try rates(text)
                Issue.record("accepted \(text.debugDescription)")
            } catch let e as WinBackError {
                #expect(e.code == .configuration && e.message.contains(line), "\(text.debugDescription): \(e.message)")
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect((try? rates("currency,rate\r\nEUR,1.5\r\n\r\n"))?.rate("EUR", month: 0) == 1_500_000_000)
    }

    @Test("amounts in units with three decimals; means half away from zero")
    func units() {
        #expect(Milliunits.units(0) == "0.000" && Milliunits.units(12_990) == "12.990")
        #expect(Milliunits.units(-500) == "-0.500" && Milliunits.units(7) == "0.007")
        #expect(Milliunits.quotient(10, 4) == "0.003" && Milliunits.quotient(-10, 4) == "-0.003")
        #expect(Milliunits.quotient(1, 3) == "0.000" && Milliunits.quotient(-1, 3) == "0.000")
        #expect(Milliunits.quotient(5, 0) == "")
    }
}

extension MoneyCounts {
    static func with(currencies: Set<String>) -> MoneyCounts {
        var c = MoneyCounts()
        c.currencies = currencies
        return c
    }
}
