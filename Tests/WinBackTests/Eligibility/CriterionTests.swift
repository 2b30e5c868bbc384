import Testing

@testable import WinBackRules

/// The criteria table (``Criterion``) is the one list the reasons, the funnel's columns, the
/// page's chart and `explain` are drawn from: each criterion the funnel counts has its column,
/// is counted there and nowhere else, and is drawn on the page.
@Suite("The criteria table (docs/rules.md §3 rule 10, §4.3)")
struct CriterionTests {
    @Test("each criterion has its own bit, and the reasons' labels follow the table in rule 10's order")
    func bitsAndLabels() {
        var seen: Reasons = []
        for c in Criterion.allCases {
            #expect(c.reason.rawValue.nonzeroBitCount == 1, "\(c) has one bit")
            #expect(!seen.contains(c.reason), "\(c)'s bit is its own")
            seen.insert(c.reason)
        }
        #expect(Reasons.all.map(\.1) == Criterion.allCases.map(\.label))
        let labels = Criterion.allCases.map(\.label)
        #expect(
            labels == [
                "active", "billing_retry", "not_subscriber", "other_product", "offer_not_live", "territory",
                "paid_duration", "too_recent", "too_long_ago", "wait_between_offers",
            ])
        #expect(Reasons([.territory, .active]).labels == ["active", "territory"])
    }

    @Test("every criterion the funnel counts has a column named by its label, in the table's order")
    func everyCriterionHasAFunnelColumn() {
        let columns = FunnelReport.columns
        for c in Criterion.allCases {
            #expect(columns.contains(c.label) == (c.funnel != .none), "\(c.label) in the funnel's header")
        }
        let counted = columns.filter { label in Criterion.allCases.contains { $0.label == label } }
        #expect(counted == Criterion.allCases.filter { $0.funnel != .none }.map(\.label))
        #expect(
            columns == [
                "offer_id", "live", "customers_in_group", "active", "billing_retry", "churned", "other_product",
                "territory", "paid_duration", "too_recent", "too_long_ago", "wait_between_offers", "eligible",
            ])
    }

    /// A churned customer failing one drop criterion is counted in that criterion's column alone;
    /// a customer in a state is counted in the state's column and in no drop column.
    @Test("a customer dropped by one criterion is counted in its column of the CSV and of the page, nowhere else")
    func countedInItsColumnAlone() throws {
        for c in Criterion.allCases where c.funnel != .none {
            var f = FunnelRow()
            switch c.funnel {
            case .state: f.count(c == .active ? .active : .billingRetry, [])
            case .drop: f.count(.churned, c.reason.union(.offerNotLive))
            case .none: Issue.record("unreachable")
            }
            let csv = String(decoding: FunnelReport.csv([("o", f)]), as: UTF8.self)
            let lines = csv.split(separator: "\n")
            let header = lines[0].split(separator: ",").map(String.init)
            let values = lines[1].split(separator: ",").map(String.init)
            let row = Dictionary(uniqueKeysWithValues: zip(header, values))
            #expect(row[c.label] == "1", "\(c.label) counted in its column")
            #expect(row["customers_in_group"] == "1" && row["eligible"] == "0")
            #expect(row["churned"] == (c.funnel == .drop ? "1" : "0"))
            for other in Criterion.allCases where other != c && other.funnel != .none {
                #expect(row[other.label] == "0", "\(c.label) is not counted as \(other.label)")
            }
            var page = ReportPage.HTML()
            ReportPage.funnelChart(f, offerId: "o", into: &page)
            let svg = String(decoding: page.bytes, as: UTF8.self)
            #expect(svg.contains("<title>\(c.words): 1</title>"), "the page draws \(c.words) with its count")
        }
        var eligible = FunnelRow()
        eligible.count(.churned, [])
        #expect(eligible.eligible == 1 && Criterion.allCases.allSatisfy { eligible[$0] == 0 })
    }

    @Test("funnel rows of disjoint customers add every column")
    func rowsAdd() {
        var a = FunnelRow()
        var b = FunnelRow()
        for (i, c) in Criterion.funnel(.drop).enumerated() {
            for _ in 0...i { a.count(.churned, c.reason) }
            b.count(.churned, c.reason)
        }
        a.count(.active, [])
        b.count(.billingRetry, [])
        var sum = a
        sum.add(b)
        for c in Criterion.allCases { #expect(sum[c] == a[c] + b[c], "\(c.label) adds") }
        #expect(sum.customersInGroup == a.customersInGroup + b.customersInGroup)
        #expect(sum.churned == a.churned + b.churned)
        #expect(sum.active == 1 && sum.billingRetry == 1)
    }
}
