import Foundation
import WinBackRules

/// One report file of a run: its name, whether only a run with an experiment writes it, and its
/// bytes and data rows from the run's reports. A new report is a file of its own in
/// WinBackRules and one entry of ``ReportWriter/reportFiles``: a run and a merge write every
/// entry alike (the merge from the shards' summed reports).
public struct ReportFile: Sendable {
    public let name: String
    /// Written beside the others only when the run has an experiment (docs/rules.md §9.2).
    public let experimentOnly: Bool
    /// The file's bytes and data rows (the page counts none), from the run's reports, the
    /// page's title and its first screen.
    let contents: @Sendable (_ reports: Reports, _ title: String, _ first: FirstScreen?) -> (bytes: [UInt8], rows: Int)
}

/// Writes the reports of docs/rules.md §4.3, §4.5, §9.2 and §13 into `<run>/reports/`: the
/// CSV files and report.html, in the order of ``reportFiles``.
public struct ReportWriter {
    /// Every report file, in the order a run writes them and its manifest lists them.
    public static let reportFiles: [ReportFile] = [
        ReportFile(name: uplift, experimentOnly: true) { r, _, _ in
            let offerIds = r.funnel.map(\.offerId)
            return (
                UpliftReport.csv(r.uplift, offerIds: offerIds), UpliftReport.table(r.uplift, offerIds: offerIds).count
            )
        },
        ReportFile(name: revenueUplift, experimentOnly: true) { r, _, _ in
            let offerIds = r.funnel.map(\.offerId)
            let rows =
                RevenueUpliftReport.currency(r) == nil ? 0 : UpliftReport.table(r.uplift, offerIds: offerIds).count
            return (RevenueUpliftReport.csv(r, offerIds: offerIds), rows)
        },
        ReportFile(name: "redemptions-by-offer-type.csv", experimentOnly: false) { r, _, _ in
            (RedemptionReport.csv(r.redemptions), r.redemptions.count)
        },
        ReportFile(name: "winback-redemption-rates.csv", experimentOnly: false) { r, _, _ in
            (RedemptionRatesReport.csv(r.rates), r.rates.count)
        },
        ReportFile(name: "eligibility-funnel.csv", experimentOnly: false) { r, _, _ in
            (FunnelReport.csv(r.funnel), r.funnel.count)
        },
        ReportFile(name: "winback-eligibility-summary.csv", experimentOnly: false) { r, _, _ in
            (EligibilitySummaryReport.csv(r.summary), r.summary.count)
        },
        ReportFile(name: "apple-agreement.csv", experimentOnly: false) { r, _, _ in
            (AppleAgreementReport.csv(r.apple), AppleAgreementReport.rowCount(r.apple))
        },
        ReportFile(name: "apple-disagreements.csv", experimentOnly: false) { r, _, _ in
            (AppleAgreementReport.disagreementsCSV(r.apple), r.apple.disagreements.count)
        },
        ReportFile(name: "retention-after-return.csv", experimentOnly: false) { r, _, _ in
            (RetentionReport.csv(r.retention), r.retention.count + 1)
        },
        ReportFile(name: "revenue-after-return.csv", experimentOnly: false) { r, _, _ in
            (
                RevenueReport.csv(r.revenue, reporting: r.reportingCurrency),
                RevenueReport.table(r.revenue, reporting: r.reportingCurrency).count
            )
        },
        ReportFile(name: page, experimentOnly: false) { r, title, first in
            (ReportPage.html(r, title: title, first: first), 0)
        },
    ]

    /// The report files of a run without an experiment.
    public static let files = reportFiles.filter { !$0.experimentOnly }.map(\.name)

    /// Written beside ``files`` when the run has an experiment (docs/rules.md §9.2).
    public static let uplift = "winback-uplift.csv"

    /// Written beside ``uplift`` (docs/rules.md §13.3).
    public static let revenueUplift = "winback-revenue-uplift.csv"

    /// The report files of a run, with or without an experiment.
    public static func files(experiment: Bool) -> [String] {
        reportFiles.filter { experiment || !$0.experimentOnly }.map(\.name)
    }

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
        ReportWriter.reportFiles.filter { reports.experiment != nil || !$0.experimentOnly }.map { file in
            let (bytes, rows) = file.contents(reports, title, firstScreen)
            return (file.name, bytes, rows)
        }
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
