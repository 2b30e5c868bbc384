import Foundation
import WinBackModel
import WinBackPipeline
import WinBackS3
import WinBackSupport
import WinBackWrite

/// What a successful run removes of the published runs before it (docs/rules.md §10.6):
/// decided before its manifest is written, so the manifest lists it, and taken after the
/// publish, under the lock.
package struct PrunePlan: Sendable, Equatable {
    /// `output.keep`: days kept before the newest published date.
    package var keepDays: Int
    /// Published runs removed (`YYYY-MM-DD`, ascending): their link and the versioned folder it
    /// points at, and, with `output.upload`, their objects under the prefix.
    package var dates: [String] = []
    /// Failed runs' folders removed (`.failed-<YYYY-MM-DD>`), by date, ascending.
    package var failed: [String] = []
    /// The rule the dates were chosen by, for the dates of the upload prefix: day numbers of
    /// the limit and of tonight, and tonight's baseline (never removed).
    package var limitDay: Int64 = 0
    package var tonightDay: Int64 = 0
    package var baseline: String? = nil

    /// Whether published date `d` goes by this plan's rule (docs/rules.md §10.6).
    package func removes(_ d: String) -> Bool {
        guard let t = Timestamp.parseDate(d) else { return false }
        return t < limitDay && t < tonightDay && d != baseline
    }
}

/// `output.keep` (docs/rules.md §10.6): published runs name customers, and since §10 their
/// emails, so they do not pile up for ever.
package enum Pruning {
    package static let failedPrefix = ".failed-"

    /// The plan of a run of `date` publishing under `root` (`<output>/<name>`) that keeps
    /// `keep` days, or nil when `keep` is 0 (every run kept).
    ///
    /// Removed: every published date more than `keep` days before the newest published date
    /// (tonight's included), earlier than tonight's (a backfill prunes nothing newer than
    /// itself), and neither tonight's baseline (§10.5) nor tonight's; failed runs' folders by
    /// the same rule. `latest` points at the newest date, which is never removed.
    package static func plan(root: String, date: String, keep: Int, baseline: String?) -> PrunePlan? {
        guard keep > 0, let tonight = Timestamp.parseDate(date) else { return nil }
        let published = Publisher(root: root, date: date).publishedDates()
        let newest = max(published.compactMap { Timestamp.parseDate($0) }.max() ?? tonight, tonight)
        // Day numbers: a date more than `keep` days before the newest.
        let limit = newest - Int64(keep)
        func old(_ d: String) -> Bool {
            guard let t = Timestamp.parseDate(d) else { return false }
            return t < limit && t < tonight
        }
        var plan = PrunePlan(keepDays: keep, limitDay: limit, tonightDay: tonight, baseline: baseline)
        plan.dates = published.filter { old($0) && $0 != baseline && $0 != date }
        let entries = System.entries(root)
        plan.failed = entries.filter { $0.hasPrefix(failedPrefix) }.map { String($0.dropFirst(failedPrefix.count)) }
            .filter(old).sorted()
        return plan
    }

    /// Removes the plan's runs under `root`: each date's link first (a reader then sees the run
    /// gone, never half of it), then the hidden versioned folder it pointed at; then the failed
    /// runs' folders. What cannot be removed is a warning, never the run's failure: the run is
    /// published.
    ///
    /// A folder is removed only when no link left in `root` points at it (docs/rules.md §6.3):
    /// a dated link another date's link, `latest` or the baseline shares (an operator's
    /// `cp -P`) goes, the folder behind it stays.
    package static func removeLocal(_ plan: PrunePlan, root: String, progress: Progress) {
        let removed = Set(plan.dates)
        var kept: Set<String> = []
        for entry in System.entries(root)
        where !removed.contains(entry) && System.linkKind(root + "/" + entry) == System.symbolicLinkType {
            if let target = System.linkTarget(root + "/" + entry) {
                kept.insert(target)
            }
        }
        for d in plan.dates {
            let link = root + "/" + d
            let target = System.linkTarget(link)
            guard System.linkKind(link) == System.symbolicLinkType else { continue }
            System.unlinkIfPresent(link)
            // Only a folder of the root's own, as the publisher names them, that no kept link
            // points at.
            if let target, target.hasPrefix(".run-"), !target.contains("/"), !kept.contains(target) {
                remove(root + "/" + target, progress: progress)
            }
        }
        for d in plan.failed { remove(root + "/" + failedPrefix + d, progress: progress) }
        System.syncDirectory(root)
    }

    private static func remove(_ path: String, progress: Progress) {
        guard System.kind(path, followLinks: false) != .missing else { return }
        do { try System.removeTree(path) } catch {
            progress.warn("pruned", "cannot remove an old run: \(SystemError.words(error))", fields: ["path": path])
        }
    }

    /// Removes the plan's dates from `<prefix>/<name>/`: for each, its `_SUCCESS` first (a
    /// reader waiting for it no longer takes the date for a whole run), then every other object
    /// under the date.
    ///
    /// Every date of the prefix that the plan's rule removes goes too, not only the plan's: a
    /// removal that failed on an earlier night (a 403, the network) is tried again by every
    /// later run and `winback upload` until the prefix holds what `keep` keeps (docs/rules.md
    /// §6.3). Returns the dates removed.
    ///
    /// The retry never removes the prefix's newest date before tonight (its own baseline, when
    /// this run's folder has none), nor anything for a run whose as-of is ahead of the clock
    /// (`retry` false: a planning run, docs/rules.md §6.3), which removes only its plan's dates.
    @discardableResult
    package static func removeRemote(_ plan: PrunePlan, from prefix: S3Location, name: String, retry: Bool = true)
        throws
        -> [String]
    {
        let client = try S3Client.shared()
        let base = (prefix.key.isEmpty ? "" : (prefix.key.hasSuffix("/") ? prefix.key : prefix.key + "/")) + name + "/"
        var byDate: [String: [S3Object]] = [:]
        for o in try client.list(bucket: prefix.bucket, prefix: base) {
            let rest = o.location.key.dropFirst(base.count)
            guard let slash = rest.firstIndex(of: "/") else { continue }
            byDate[String(rest[..<slash]), default: []].append(o)
        }
        let newestBefore = byDate.keys.filter {
            guard let t = Timestamp.parseDate($0) else { return false }
            return t < plan.tonightDay
        }.max()
        byDate = byDate.filter { d, _ in
            plan.dates.contains(d) || (retry && d != newestBefore && plan.removes(d))
        }
        let dates = byDate.keys.sorted()
        for d in dates {
            let objects = byDate[d]!
            let success = S3Location(bucket: prefix.bucket, key: base + d + "/_SUCCESS")
            if objects.contains(where: { $0.location == success }) { try client.delete(success) }
            for o in objects where o.location != success { try client.delete(o.location) }
        }
        return dates
    }

    /// The log's line.
    package static func line(_ plan: PrunePlan) -> String {
        let runs = plan.dates.isEmpty ? "no published run" : "published runs " + plan.dates.joined(separator: ", ")
        let failed = plan.failed.isEmpty ? "" : " and failed runs " + plan.failed.joined(separator: ", ")
        return "removed \(runs)\(failed) (output.keep: \(plan.keepDays) days)"
    }
}
