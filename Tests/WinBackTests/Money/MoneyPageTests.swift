import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules

/// The revenue uplift's figures, the page's "Did the discount pay?" and the catalog's billing
/// plan (docs/rules.md §13.3, §13.4).
@Suite("Money: the revenue uplift, its page section and targetSubscriptionPlanType")
struct MoneyPageTests {
    /// An arm of the customers whose revenues are `xs` (milliunits), counted with revenue.
    private func arm(_ xs: [Int128]) -> ArmCounts {
        var a = ArmCounts(customers: xs.count)
        for x in xs { a.revenue.add(x) }
        return a
    }

    /// A small world's reports with `rows` as the uplift, an experiment and USD as the reporting
    /// currency.
    private func reports(_ rows: [UpliftRow], offers: [String]) -> Reports {
        var r = WinBackReportsTests.reports()
        r.funnel = offers.map { id in (id, r.funnel[0].funnel) }
        r.experiment = Experiment(name: "x", basisPoints: 5_000, start: ms("2026-03-01"))
        r.uplift = rows
        r.reportingCurrency = "USD"
        r.revenue = []
        return r
    }

    @Test("per customer, lift, interval and incremental revenue, exact where they can be; empty where the rules say")
    func figures() throws {
        // Treatment 4.990, 0, 9.980 (mean 4.990); holdout 0, 1.000 (mean 0.500).
        let row = UpliftRow(
            month: "2026-04", offerId: "wb", treatment: arm([4_990, 0, 9_980]), holdout: arm([0, 1_000]))
        let pending = UpliftRow(
            month: "2026-09", offerId: "wb", treatment: ArmCounts(customers: 2), holdout: ArmCounts(customers: 1))
        let all = RevenueUpliftReport.figures([row, pending], offerIds: ["wb"])
        #expect(
            all.map { "\($0.month) \($0.offerId)" } == [
                "2026-04 wb", "2026-04 *", "2026-09 wb", "2026-09 *", "* wb", "* *",
            ])
        let f = all[0]
        #expect(f.treatmentMean == "4.990" && f.holdoutMean == "0.500")
        #expect(f.liftText == "4.490" && f.incrementalText == "13.470")
        // s1² = 24.9001 units², s0² = 0.5: 4.49 ∓ 1.96 × sqrt(24.9001/3 + 0.5/2) = 4.49 ∓ 5.731…
        let i = try #require(f.interval)
        #expect(Milliunits.units(double: i.low) == "-1.241" && Milliunits.units(double: i.high) == "10.221")
        // A month whose horizon has not passed keeps its counts, every revenue column empty.
        #expect(all[2].treatmentCustomers == 2 && all[2].holdoutCustomers == 1)
        #expect(all[2].treatmentMean == "" && all[2].liftText == "" && all[2].interval == nil)
        // The * month sums only months whose horizon has passed, customer counts included.
        #expect(all[4].treatmentCustomers == 3 && all[4].holdoutCustomers == 2 && all[4].liftText == "4.490")
        // One holdout customer: a lift but no interval.
        let one = RevenueUpliftReport.figures(
            [UpliftRow(month: "2026-04", offerId: "wb", treatment: arm([1, 2]), holdout: arm([3]))], offerIds: ["wb"])
        #expect(one[0].liftText == "-0.002" && one[0].interval == nil && one[0].incrementalText == "-0.003")
        // An arm with nobody: the other's mean, nothing else.
        let empty = RevenueUpliftReport.figures(
            [UpliftRow(month: "2026-04", offerId: "wb", treatment: arm([5]), holdout: arm([]))], offerIds: ["wb"])
        #expect(empty[0].treatmentMean == "0.005" && empty[0].holdoutMean == "" && empty[0].liftText == "")
    }

    @Test("the CSV: one currency, or the header alone when rows are in several and there is no money")
    func csv() {
        let row = UpliftRow(month: "2026-04", offerId: "wb", treatment: arm([4_990, 0]), holdout: arm([0, 0]))
        var r = reports([row], offers: ["wb"])
        let lines = String(decoding: RevenueUpliftReport.csv(r, offerIds: ["wb"]), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 5)
        #expect(lines[1] == "2026-04,wb,3,USD,2,2,2.495,0.000,2.495,-2.395,7.385,4.990")
        r.reportingCurrency = nil
        r.money.currencies = ["EUR", "USD"]
        #expect(
            RevenueUpliftReport.csv(r, offerIds: ["wb"])
                == Array((RevenueUpliftReport.columns.joined(separator: ",") + "\n").utf8))
        r.money.currencies = ["EUR"]
        #expect(String(decoding: RevenueUpliftReport.csv(r, offerIds: ["wb"]), as: UTF8.self).contains(",3,EUR,2,2,"))
    }

    @Test("report.html answers the question with a forest plot in the reporting currency, and revenue per kind")
    func page() {
        let row = UpliftRow(
            month: "2026-04", offerId: "wb.half", treatment: arm([4_990, 0, 9_980]), holdout: arm([0, 1_000]))
        var r = reports([row], offers: ["wb.half"])
        var revenue = RevenueRow(kind: "win_back", offerId: "wb.half", currency: "USD", returns: 2)
        revenue.observable = [2, 1, 0, 0]
        revenue.net = [Milliunits(Int64(9_980)), Milliunits(Int64(14_970)), .zero, .zero]
        revenue.gross = revenue.net
        r.revenue = [revenue]
        let html = String(decoding: ReportPage.html(r, title: "t"), as: UTF8.self)
        #expect(html.contains("<h2>Did the discount pay?</h2>"))
        #expect(
            html.contains("aria-label=\"Incremental revenue per targeted customer per offer, with 95 % intervals\""))
        // In the currency's usual decimals (docs/rules.md §10.10): cents for USD.
        #expect(html.contains("4.49 [-1.24, 10.22] USD · 13.47 USD in all"))
        #expect(
            html.contains(
                "<td class=\"segment\">win_back</td><td>USD</td><td>2</td><td>4.99</td><td>14.97</td><td>–</td>"))
        // Without an experiment, a note; in several currencies without money, a note naming them.
        r.experiment = nil
        #expect(
            String(decoding: ReportPage.html(r, title: "t"), as: UTF8.self).contains(
                "Revenue against a holdout needs an experiment"))
        r.experiment = Experiment(name: "x", basisPoints: 5_000, start: ms("2026-03-01"))
        r.reportingCurrency = nil
        r.money.currencies = ["EUR", "USD"]
        #expect(
            String(decoding: ReportPage.html(r, title: "t"), as: UTF8.self).contains("several currencies (EUR, USD)"))
    }

    @Test("targetSubscriptionPlanType: UPFRONT or MONTHLY, kept on the offer; anything else is a problem")
    func planType() {
        let base = """
            {"offerId": "wb", "subscriptionGroupId": "21482345", "productId": "com.example.basic",
             "customerEligibilityPaidSubscriptionDurationInMonths": 3,
             "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 2, "maximum": 24}
            """
        for plan in ["UPFRONT", "MONTHLY"] {
            let (c, problems) = OfferCatalog.parse(
                Data("{\"offers\": [\(base), \"targetSubscriptionPlanType\": \"\(plan)\"}]}".utf8))
            #expect(problems.isEmpty && c.offers.first?.targetSubscriptionPlanType == plan)
        }
        let (none, _) = OfferCatalog.parse(Data("{\"offers\": [\(base)}]}".utf8))
        #expect(none.offers.first?.targetSubscriptionPlanType == nil)
        for bad in ["\"WEEKLY\"", "\"monthly\"", "1"] {
            let (_, problems) = OfferCatalog.parse(
                Data("{\"offers\": [\(base), \"targetSubscriptionPlanType\": \(bad)}]}".utf8))
            #expect(problems.contains { $0.contains("targetSubscriptionPlanType") }, "\(bad): \(problems)")
        }
    }
}

@Suite("Money on the page in the currency's usual decimals (docs/rules.md §10.10)")
struct MoneyDisplayTests {
    @Test("two decimals by default, none for the yen and the won, three for the dinars; rounded half away from zero")
    func decimals() {
        #expect(Milliunits.display(double: 4_490.4, currency: "USD") == "4.49")
        #expect(Milliunits.display(double: -1_245, currency: "EUR") == "-1.25")
        #expect(Milliunits.display(double: 5, currency: "USD") == "0.01")
        #expect(Milliunits.display(double: -4, currency: "USD") == "0.00")
        #expect(Milliunits.display(double: 1_234_567, currency: "JPY") == "1235")
        #expect(Milliunits.display(double: 1_234, currency: "KWD") == "1.234")
        #expect(Milliunits.display("13.470", currency: "USD") == "13.47")
        #expect(Milliunits.display("13.5", currency: "KRW") == "14")
        #expect(Milliunits.display("", currency: "USD") == "")
        #expect(Milliunits.display("1.005", currency: "USD") == "1.01", "exactly, not through a double")
        #expect(Milliunits.display("-0.004", currency: "USD") == "0.00")
    }
}
