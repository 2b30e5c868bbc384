import Foundation

/// Publishes a run atomically under `<output>/<name>/` (docs/rules.md §4, §6).
///
/// A run is built in a hidden staging folder; on success it is renamed to a versioned hidden
/// folder and `<YYYY-MM-DD>` and `latest` are relative symlinks swapped by rename(2), so a
/// reader sees either the complete new run or the previous one. A lock (flock(2), released by
/// the kernel when the process dies, so a killed run never blocks the next) keeps two runs of
/// the same pipeline apart.
// Its state (the lock descriptor) is touched only by the thread that runs the pipeline.
public final class Publisher: @unchecked Sendable {
    public let root: String
    public let date: String
    private var lockFD: Int32 = -1
    /// Where this run's files are written before publishing.
    public private(set) var staging: String = ""

    /// - Parameters:
    ///   - root: `<output>/<name>`.
    ///   - date: `YYYY-MM-DD` of the as-of instant.
    public init(root: String, date: String) {
        self.root = root
        self.date = date
    }

    deinit { unlock() }

    /// Creates the output folder, takes the lock and prepares an empty staging folder.
    /// Throws exit 75 when another run holds the lock, 73 when the folder cannot be made.
    public func begin() throws {
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw WinBackError(
                .cannotCreateOutput, "cannot create the output folder: \(OutputFile.folderProblem(root, error))",
                path: root)
        }
        let lockPath = root + "/.lock"
        let fd: Int32
        do { fd = try System.openOrCreate(lockPath) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot open the lock file", path: lockPath)
        }
        let locked: Bool
        do { locked = try System.tryLock(fd) } catch let e as SystemError {
            System.closeQuietly(fd)
            throw e.winBack(.cannotCreateOutput, "cannot lock", path: lockPath)
        }
        if !locked {
            let holder =
                (try? String(contentsOfFile: lockPath, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            System.closeQuietly(fd)
            throw WinBackError(
                .locked,
                "another run of this pipeline holds the lock\(holder.isEmpty ? "" : " (\(holder))"); not starting",
                path: lockPath)
        }
        lockFD = fd
        // Who holds the lock, for the message of a run that finds it taken; best effort.
        try? System.overwrite(
            fd, with: "pid \(System.processID) since \(Timestamp.iso(Int64(Date().timeIntervalSince1970 * 1000)))\n")

        // Under the lock, anything staged, and any link not yet renamed into place, is left
        // over from a killed run.
        removeHidden(prefix: ".staging-")
        removeHidden(prefix: ".link-")
        staging = root + "/.staging-\(date)-\(System.processID)"
        do {
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        } catch {
            throw WinBackError(
                .cannotCreateOutput, "cannot create the staging folder: \(error.localizedDescription)", path: staging)
        }
    }

    func unlock() {
        if lockFD >= 0 {
            System.closeQuietly(lockFD)
            lockFD = -1
        }
    }

    private func removeHidden(prefix: String) {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for e in entries where e.hasPrefix(prefix) {
            try? FileManager.default.removeItem(atPath: root + "/" + e)
        }
    }

    /// Moves the staged run into place and points `<date>` and `latest` at it.
    public func publish() throws {
        let stamp = Int64(Date().timeIntervalSince1970 * 1000)
        let versioned = ".run-\(date)-\(stamp)-\(System.processID)"
        try rename(staging, root + "/" + versioned)
        System.syncDirectory(root)
        try swapLink(named: date, to: versioned)
        // `latest` follows the highest published date, which need not be this one.
        let dates = publishedDates()
        if let newest = dates.max() { try swapLink(named: "latest", to: newest) }
        // Versioned folders no date points at any more are old runs.
        let live = Set(dates.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + $0) })
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for e in entries where e.hasPrefix(".run-") && !live.contains(e) {
            try? FileManager.default.removeItem(atPath: root + "/" + e)
        }
        System.syncDirectory(root)
        unlock()
    }

    /// Dates (`YYYY-MM-DD` symlinks) published under the root.
    func publishedDates() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return entries.filter { Timestamp.parseDate($0) != nil }.sorted()
    }

    private func rename(_ from: String, _ to: String) throws {
        do { try System.rename(from, to) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot rename \(from) to \(to)", path: root)
        }
    }

    private func swapLink(named name: String, to target: String) throws {
        let tmp = root + "/.link-\(name)-\(System.processID)"
        System.unlinkIfPresent(tmp)
        do { try System.symlink(target, at: tmp) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create a symlink", path: tmp)
        }
        let final = root + "/" + name
        if System.kind(final, followLinks: false) == .directory {
            // A real folder (not made by this tool) cannot be replaced by rename(2).
            throw WinBackError(
                .cannotCreateOutput, "is a folder, not a link this tool manages; move it away", path: final)
        }
        try rename(tmp, final)
    }

    /// After a failure: removes the staging folder and keeps `files` (name → bytes) in
    /// `.failed-<date>/`, replacing an older failure. The published runs are untouched.
    public func fail(keeping files: [(String, [UInt8])]) {
        let failed = root + "/.failed-\(date)"
        let tmp = root + "/.failed-tmp-\(System.processID)"
        try? FileManager.default.removeItem(atPath: tmp)
        try? FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        for (name, bytes) in files {
            // Best effort: the run has failed already, and says why on stderr.
            _ = FileManager.default.createFile(atPath: tmp + "/" + name, contents: Data(bytes))
        }
        if !staging.isEmpty { try? FileManager.default.removeItem(atPath: staging) }
        try? FileManager.default.removeItem(atPath: failed)
        try? System.rename(tmp, failed)
        unlock()
    }
}
