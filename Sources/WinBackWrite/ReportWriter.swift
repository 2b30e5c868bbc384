import Foundation
import WinBackRules

/// Writes the reports of docs/rules.md §4.3 and §4.5 into `<run>/reports/`: the six CSV files and
/// report.html.
public struct ReportWriter {
    public static let files = [
        "redemptions-by-offer-type.csv", "winback-redemption-rates.csv", "eligibility-funnel.csv",
        "winback-eligibility-summary.csv", "apple-agreement.csv", "apple-disagreements.csv",
        "retention-after-return.csv", "revenue-after-return.csv", "report.html",
    ]
    /// Written beside ``files`` when the run has an experiment (docs/rules.md §9.2).
    public static let uplift = "winback-uplift.csv"

    /// Written beside ``uplift`` (docs/rules.md §13.3).
    public static let revenueUplift = "winback-revenue-uplift.csv"

    /// The report files of a run, with or without an experiment.
    public static func files(experiment: Bool) -> [String] { experiment ? [uplift, revenueUplift] + files : files }

    /// The page, written after the segments and the destinations' files (docs/rules.md §4.3).
    public static let page = "report.html"

    let reports: Reports
    /// Names the page (the pipeline name).
    let title: String
    /// The page's first screen: tonight's audience; nil shows none.
    let firstScreen: FirstScreen?

    public init(reports: Reports, title: String, firstScreen: FirstScreen? = nil) {
        self.reports = reports
        self.title = title
        self.firstScreen = firstScreen
    }

    /// Each file's bytes and data rows, in ``files(experiment:)`` order (the page counts no rows).
    public func contents() -> [(name: String, bytes: [UInt8], rows: Int)] {
        let r = reports
        var bytes = [
            RedemptionReport.csv(r.redemptions), RedemptionRatesReport.csv(r.rates), FunnelReport.csv(r.funnel),
            EligibilitySummaryReport.csv(r.summary), AppleAgreementReport.csv(r.apple),
            AppleAgreementReport.disagreementsCSV(r.apple), RetentionReport.csv(r.retention),
            RevenueReport.csv(r.revenue, reporting: r.reportingCurrency),
            ReportPage.html(r, title: title, first: firstScreen),
        ]
        var rows = [
            r.redemptions.count, r.rates.count, r.funnel.count, r.summary.count, AppleAgreementReport.rowCount(r.apple),
            r.apple.disagreements.count, r.retention.count + 1,
            RevenueReport.table(r.revenue, reporting: r.reportingCurrency).count, 0,
        ]
        if r.experiment != nil {
            let offerIds = r.funnel.map(\.offerId)
            bytes.insert(UpliftReport.csv(r.uplift, offerIds: offerIds), at: 0)
            rows.insert(UpliftReport.table(r.uplift, offerIds: offerIds).count, at: 0)
            bytes.insert(RevenueUpliftReport.csv(r, offerIds: offerIds), at: 1)
            rows.insert(
                RevenueUpliftReport.currency(r) == nil ? 0 : UpliftReport.table(r.uplift, offerIds: offerIds).count,
                at: 1)
        }
        let names = ReportWriter.files(experiment: r.experiment != nil)
        return names.indices.map { (names[$0], bytes[$0], rows[$0]) }
    }

    /// Writes every report file into `directory/reports/`, each synced before it is counted
    /// written; returns the files written.
    public func write(to directory: String) throws -> [OutputStats] {
        try write(to: directory, sync: nil)
    }

    /// Writes every report file into `directory/reports/`; returns the files written. With
    /// `sync`, files are made durable in the background (the caller waits on it).
    ///
    /// A file named in `writing` is written by its closure instead, which returns its data rows
    /// (a merge streams the disagreements from the shards').
    ///
    /// Without `page`, every file but ``page``: a run writes it once its first screen is known
    /// (``writePage(to:sync:)``).
    package func write(
        to directory: String, sync: DiskSync?, writing: [String: (OutputFile) throws -> Int] = [:], page: Bool = true
    ) throws -> [OutputStats] {
        let dir = directory + "/reports"
        try OutputFile.makeFolder(dir)
        return try contents().filter { page || $0.name != ReportWriter.page }.map { name, bytes, rows in
            let f = try OutputFile(path: dir + "/" + name, sync: sync)
            var rows = rows
            if let write = writing[name] { rows = try write(f) } else { try f.write(bytes) }
            let (n, sha) = try f.finish()
            return OutputStats(path: "reports/" + name, bytes: n, rows: rows, sha256: sha)
        }
    }

    /// Writes ``page`` alone into `directory/reports/`, with the first screen.
    package func writePage(to directory: String, sync: DiskSync?) throws -> OutputStats {
        try OutputFile.makeFolder(directory + "/reports")
        let f = try OutputFile(path: directory + "/reports/" + ReportWriter.page, sync: sync)
        try f.write(ReportPage.html(reports, title: title, first: firstScreen))
        let (n, sha) = try f.finish()
        return OutputStats(path: "reports/" + ReportWriter.page, bytes: n, rows: 0, sha256: sha)
    }
}
