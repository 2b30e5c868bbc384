import Foundation
import Synchronization
import WinBackModel
import WinBackSupport

/// Publishes a run atomically under `<output>/<name>/` (docs/rules.md §4, §6).
///
/// A run is built in a hidden staging folder; on success it is renamed to a versioned hidden
/// folder and `<YYYY-MM-DD>` and `latest` are relative symlinks swapped by rename(2), so a
/// reader sees either the complete new run or the previous one. A lock (flock(2), released by
/// the kernel when the process dies, so a killed run never blocks the next) keeps two runs of
/// the same pipeline apart.
public final class Publisher: Sendable {
    public let root: String
    public let date: String
    /// The group that may read published runs (`output.group`): the folder is then 0750 and
    /// that group's, else 0700 (docs/rules.md §6.1).
    public let group: String?
    /// The id of ``group``, once ``begin()`` has found it: every file the run writes is given it
    /// as it is made (``DiskSync/group``).
    package var groupID: gid_t? { state.withLock { $0.groupID } }
    /// Where this run's files are written before publishing.
    public var staging: String { state.withLock { $0.staging } }

    /// What ``begin()`` finds and makes (the thread that runs the pipeline calls it).
    private struct State {
        var groupID: gid_t?
        var lockFD: Int32 = -1
        var staging = ""
    }
    private let state = Mutex(State())

    /// Hidden entries of the root that a killed run or task may leave: removed under the lock
    /// by the next run of any command (docs/rules.md §6.1).
    static let leftovers = [".staging-", ".link-", ".work-", ".failed-tmp-"]

    /// - Parameters:
    ///   - root: `<output>/<name>`.
    ///   - date: `YYYY-MM-DD` of the as-of instant.
    ///   - group: `output.group`, when set.
    public init(root: String, date: String, group: String? = nil) {
        self.root = root
        self.date = date
        self.group = group
    }

    deinit { unlock() }

    /// Creates the output folder (0700, or 0750 for `group`), takes the lock, removes what
    /// killed runs left and prepares an empty staging folder. Throws exit 75 when another run
    /// holds the lock, 73 when the folder cannot be made or a link was planted where the lock is.
    public func begin() throws {
        try makeRoot()
        let lockPath = root + "/.lock"
        let fd: Int32
        do { fd = try System.openOrCreate(lockPath) } catch let e as SystemError {
            if System.linkKind(lockPath) == System.symbolicLinkType {
                throw WinBackError(
                    .cannotCreateOutput, "is a symbolic link, not a lock file this tool made; remove it", path: lockPath
                )
            }
            throw e.winBack(.cannotCreateOutput, "cannot open the lock file", path: lockPath)
        }
        let locked: Bool
        do { locked = try System.tryLock(fd) } catch let e as SystemError {
            System.closeQuietly(fd)
            throw e.winBack(.cannotCreateOutput, "cannot lock", path: lockPath)
        }
        if !locked {
            let holder =
                (try? IntermediateFile.read(lockPath, limit: 4096)).map { String(decoding: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            System.closeQuietly(fd)
            throw WinBackError(
                .locked,
                "another run of this pipeline holds the lock\(holder.isEmpty ? "" : " (\(holder))"); not starting",
                path: lockPath)
        }
        state.withLock { $0.lockFD = fd }
        // Who holds the lock, for the message of a run that finds it taken; best effort.
        try? System.overwrite(
            fd, with: "pid \(System.processID) since \(Timestamp.iso(Int64(Date().timeIntervalSince1970 * 1000)))\n")

        // Under the lock, anything staged, any link not yet renamed into place and any work
        // folder of a memory-bounded run is left over from a killed run.
        for prefix in Publisher.leftovers { removeHidden(prefix: prefix) }
        let staging = root + "/.staging-\(date)-\(System.processID)"
        state.withLock { $0.staging = staging }
        do { try System.makeDirectory(staging, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create the staging folder", path: staging)
        }
    }

    /// `<output>/<name>/`, made if missing, with its parents; its mode set to 0700 (or 0750 and
    /// `group`) whatever the umask, also when it was there before.
    private func makeRoot() throws {
        let gid: gid_t?
        if let group {
            if let problem = System.groupProblem(group) { throw WinBackError(.configuration, problem) }
            guard let id = System.groupID(group) else {
                throw WinBackError(.configuration, "output.group: there is no group '\(group)' on this machine")
            }
            gid = id
        } else {
            gid = nil
        }
        state.withLock { $0.groupID = gid }
        try PrivateFolder.make(root, mode: gid == nil ? 0o700 : 0o750, group: gid, what: "output folder")
    }

    /// Releases the lock (also when the process ends).
    public func unlock() {
        let fd = state.withLock { s in
            defer { s.lockFD = -1 }
            return s.lockFD
        }
        if fd >= 0 { System.closeQuietly(fd) }
    }

    private func removeHidden(prefix: String) {
        let entries = System.entries(root)
        for e in entries where e.hasPrefix(prefix) {
            System.removeTreeQuietly(root + "/" + e)
        }
    }

    /// Moves the staged run into place and points `<date>` and `latest` at it. Everything that
    /// could stop the swap is checked first: `<date>` and `latest` must be links (or missing),
    /// so a failure leaves the previous run published as it was (docs/rules.md §6.1).
    ///
    /// With `keepingLock`, the lock is still held afterwards (an upload follows), until
    /// ``unlock()``.
    public func publish(keepingLock: Bool = false) throws {
        for name in [date, "latest"] {
            if let kind = System.linkKind(root + "/" + name), kind != System.symbolicLinkType {
                throw WinBackError(
                    .cannotCreateOutput,
                    "is \(System.describe(kind)), not a link this tool manages; move it away (nothing was published)",
                    path: root + "/" + name)
            }
        }
        let staging = self.staging
        try settleModes(staging, group: groupID)
        let stamp = Int64(Date().timeIntervalSince1970 * 1000)
        let versioned = ".run-\(date)-\(stamp)-\(System.processID)"
        try rename(staging, root + "/" + versioned)
        System.syncDirectory(root)
        try swapLink(named: date, to: versioned)
        // `latest` follows the highest published date, which need not be this one.
        let dates = publishedDates()
        if let newest = dates.max() { try swapLink(named: "latest", to: newest) }
        // Versioned folders no date points at any more are old runs.
        let live = Set(dates.compactMap { System.linkTarget(root + "/" + $0) })
        let entries = System.entries(root)
        for e in entries where e.hasPrefix(".run-") && !live.contains(e) {
            System.removeTreeQuietly(root + "/" + e)
        }
        System.syncDirectory(root)
        if !keepingLock { unlock() }
    }

    /// The run's folders 0750 and files 0640 with `output.group`, and that group's; folders 0700
    /// and files 0640 without (the root folder keeps everyone else out); whatever the umask.
    private func settleModes(_ folder: String, group groupID: gid_t?) throws {
        let folderMode: mode_t = groupID == nil ? 0o700 : 0o750
        do {
            try System.secureDirectory(folder, mode: folderMode, group: groupID)
            for name in try System.listing(folder).sorted() {
                let path = folder + "/" + name
                switch System.linkKind(path) {
                case System.folderType?: try settleModes(path, group: groupID)
                case System.symbolicLinkType?: continue
                default:
                    // Files the run made have their mode already (``OutputFile``): looked at, not opened.
                    if !System.hasMode(path, mode: 0o640, group: groupID) {
                        try System.secureFile(path, mode: 0o640, group: groupID)
                    }
                }
            }
        } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot set the published files' modes", path: folder)
        } catch let e as WinBackError {
            throw e
        } catch {
            throw WinBackError(
                .cannotCreateOutput, "cannot set the published files' modes: \(SystemError.words(error))", path: folder)
        }
    }

    /// Dates (`YYYY-MM-DD` symlinks) published under the root.
    package func publishedDates() -> [String] {
        let entries = System.entries(root)
        return entries.filter {
            Timestamp.parseDate($0) != nil && System.linkKind(root + "/" + $0) == System.symbolicLinkType
        }.sorted()
    }

    private func rename(_ from: String, _ to: String) throws {
        do { try System.rename(from, to) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot rename \(from) to \(to)", path: root)
        }
    }

    /// Points link `name` at `target`: a new link made under a fresh name (symlink(2) never
    /// follows or replaces what is there), then renamed over the old one.
    private func swapLink(named name: String, to target: String) throws {
        let tmp = root + "/.link-\(name)-\(System.processID)"
        System.unlinkIfPresent(tmp)
        do { try System.symlink(target, at: tmp) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create a symlink", path: tmp)
        }
        do { try rename(tmp, root + "/" + name) } catch {
            System.unlinkIfPresent(tmp)
            throw error
        }
    }

    /// After a failure: removes the staging folder and keeps `files` (name → bytes) in
    /// `.failed-<date>/`, replacing an older failure. The published runs are untouched.
    public func fail(keeping files: [(String, [UInt8])]) {
        let failed = root + "/.failed-\(date)"
        let tmp = root + "/.failed-tmp-\(System.processID)"
        System.removeTreeQuietly(tmp)
        try? System.makeDirectory(tmp, mode: 0o700)
        for (name, bytes) in files {
            // Best effort: the run has failed already, and says why on stderr.
            if let f = try? OutputFile(path: tmp + "/" + name, exclusive: true) {
                try? f.write(bytes)
                _ = try? f.finish()
            }
        }
        let staging = self.staging
        if !staging.isEmpty { System.removeTreeQuietly(staging) }
        System.removeTreeQuietly(failed)
        try? System.rename(tmp, failed)
        unlock()
    }
}
