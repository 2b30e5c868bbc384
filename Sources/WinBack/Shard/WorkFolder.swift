import Crypto
import Foundation
import WinBackDelivery
import WinBackHistory
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackS3
import WinBackSupport
import WinBackWrite

/// The folder that the tasks of a run past one machine share (docs/rules.md §8):
///
///     parts/task-<i>/shard-<k>.part   what partition task i read for shard k (``PartFile``)
///     parts/task-<i>/rejects.json     the lines it rejected
///     parts/task-<i>/_SUCCESS         ``PartitionMarker``: written last, once the rest is on disk
///     shards/<k>/segments/…           shard k's segment files (rows of its customers, sorted)
///     shards/<k>/reports.json         shard k's report rows, in a form that sums (``ShardReports``)
///     shards/<k>/_SUCCESS             ``ShardMarker``
///
/// Every task builds its folder under a temporary name and renames it into place, so a retried
/// task replaces its own outputs and a reader never sees half of them.
public struct WorkFolder: Sendable {
    public let root: String

    public init(_ root: String) {
        self.root = InputFiles.absolute(root, base: System.currentDirectory)
    }

    /// The folder, its `parts/` and its `shards/`, each checked to be a folder of this user's
    /// that nobody else can write or swap, and made private (0700): the tasks trust what they
    /// find in it (docs/rules.md §6.1). With `sub` ("parts" for a partition task, "shards" for a
    /// shard), the folder and that one are made where missing; the rest are left as they are
    /// (a missing one is the reader's to report: what has not run). The folder itself may be a
    /// link of this user's own; `parts/` and `shards/` may not. Exit 73 otherwise.
    func secure(making sub: String? = nil) throws {
        guard try PrivateFolder.make(root, mode: 0o700, what: "work folder", create: sub != nil, ownLink: true) else {
            return
        }
        for name in ["parts", "shards"] {
            try PrivateFolder.make(root + "/" + name, mode: 0o700, what: "work folder's \(name)", create: name == sub)
        }
    }

    func task(_ i: Int) -> String { root + "/parts/task-\(i)" }
    func part(task i: Int, shard k: Int) -> String { task(i) + "/shard-\(k).part" }
    func shard(_ k: Int) -> String { root + "/shards/\(k)" }
    static let marker = "_SUCCESS"

    /// The index of this task of an array job: the flag, else the scheduler's variable
    /// (`SLURM_ARRAY_TASK_ID`, `JOB_COMPLETION_INDEX`, `AWS_BATCH_JOB_ARRAY_INDEX`, in that order).
    public static func index(
        _ flag: Int?, option: String, count: Int, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> Int {
        var value = flag
        var source = option
        if value == nil {
            for name in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ARRAY_INDEX"] {
                if let s = environment[name] {
                    guard let v = Int(s) else {
                        throw WinBackError(.usage, "\(name)='\(s)' is not a task index")
                    }
                    value = v
                    source = name
                    break
                }
            }
        }
        guard let value else {
            throw WinBackError(
                .usage,
                "no \(option) given and no SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX or AWS_BATCH_JOB_ARRAY_INDEX set")
        }
        guard value >= 0 && value < count else {
            throw WinBackError(.usage, "\(source) \(value) is outside 0..<\(count)")
        }
        return value
    }

    /// Replaces folder `final` by `staged` (a sibling): the old one's marker goes first, so that
    /// a task killed in between leaves an incomplete folder, never a complete-looking mix.
    static func replace(_ final: String, with staged: String) throws {
        do {
            if System.linkKind(final) == System.symbolicLinkType {
                // Never followed: the link itself goes.
                System.unlinkIfPresent(final)
            } else if System.exists(final) {
                System.removeTreeQuietly(final + "/" + marker)
                try System.removeTree(final)
            }
            try System.rename(staged, final)
        } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot move \(staged) into place", path: final)
        } catch {
            throw WinBackError(
                .cannotCreateOutput, "cannot replace the previous outputs: \(SystemError.words(error))", path: final)
        }
        System.syncDirectory((final as NSString).deletingLastPathComponent)
    }

    /// A fresh staging folder beside `final` (mode 0700). The staging folders earlier, killed
    /// attempts at the same task left are removed first (docs/rules.md §6.1): one task runs
    /// once at a time.
    static func staging(for final: String) throws -> String {
        let parent = (final as NSString).deletingLastPathComponent
        let prefix = ".tmp-" + (final as NSString).lastPathComponent + "-"
        removeLeftovers(in: parent, prefix: prefix)
        let staged = parent + "/" + prefix + "\(System.processID)"
        do { try System.makeDirectory(staged, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create a folder", path: staged)
        }
        return staged
    }

    /// Removes the entries of `folder` whose names start with `prefix`.
    static func removeLeftovers(in folder: String, prefix: String) {
        for e in System.entries(folder) where e.hasPrefix(prefix) {
            System.removeTreeQuietly(folder + "/" + e)
        }
    }

    /// Removes every task's staging folder: once every task has finished (the merge), any one
    /// left is a killed attempt's.
    func removeLeftovers() {
        WorkFolder.removeLeftovers(in: root + "/parts", prefix: ".tmp-")
        WorkFolder.removeLeftovers(in: root + "/shards", prefix: ".tmp-")
    }

    /// The `_SUCCESS` marker of the task whose folder is `dir`, checked to belong to this run:
    /// exit 66 naming the task (`what`) when it has not finished, 78 when it ran with another
    /// pipeline, catalog, inputs, shard count or as-of.
    static func finished<T: Decodable>(
        _ type: T.Type, in dir: String, what: String, expecting fingerprint: RunFingerprint,
        of marker: (T) -> RunFingerprint
    ) throws -> (T, digest: String) {
        let path = dir + "/" + WorkFolder.marker
        guard let (m, digest) = try IntermediateFile.readJSON(type, from: path) else {
            throw WinBackError(.noInput, "\(what) has not finished (no \(WorkFolder.marker))", path: dir)
        }
        try fingerprint.check(marker(m), where: path)
        return (m, digest)
    }
}

/// What every task of one run must agree on; a task finding another value fails (exit 78).
struct RunFingerprint: Codable, Equatable {
    /// SHA-256 of the pipeline file's bytes and of the offer catalog's.
    var pipelineSHA256: String
    var catalogSHA256: String
    /// SHA-256 of the input file names the globs matched, in order: every task must see the
    /// same files in the same order.
    var inputsSHA256: String
    var shards: Int
    /// The as-of instant, resolved once by the partition tasks.
    var asOf: Int64
    var toolVersion: String
    /// The published run the changes are computed against (docs/rules.md §10.5): every task
    /// must compare with the same one. Nil: none.
    var baseline: Baseline?

    init(_ p: ResolvedPipeline, shards: Int) throws {
        func digest(_ path: String) -> String {
            let data = (try? InputStores.contents(path)) ?? nil
            return Hex.string(SHA256.hash(data: data ?? Data()))
        }
        pipelineSHA256 = digest(p.config.path)
        catalogSHA256 = digest(p.config.resolve(p.config.offersPath))
        let names = (p.transactionFiles + [""] + p.renewalFiles).joined(separator: "\n")
        inputsSHA256 = Hex.string(SHA256.hash(data: Data(names.utf8)))
        self.shards = shards
        asOf = p.asOf
        toolVersion = ToolVersion.current
        baseline = try Changes.baseline(p)
    }

    /// Fails (exit 78) when `other` (from `where`) differs, naming what differs.
    func check(_ other: RunFingerprint, where path: String) throws {
        var differs: [String] = []
        if pipelineSHA256 != other.pipelineSHA256 { differs.append("the pipeline file") }
        if catalogSHA256 != other.catalogSHA256 { differs.append("the offer catalog") }
        if inputsSHA256 != other.inputsSHA256 { differs.append("the input files the globs match") }
        if shards != other.shards { differs.append("the shard count (\(other.shards) there, \(shards) here)") }
        if asOf != other.asOf {
            differs.append("the as-of instant (\(Timestamp.iso(other.asOf)) there, \(Timestamp.iso(asOf)) here)")
        }
        if toolVersion != other.toolVersion { differs.append("the winback version") }
        if baseline?.date != other.baseline?.date || baseline?.manifestSHA256 != other.baseline?.manifestSHA256 {
            differs.append(
                "the published run compared with (\(other.baseline?.date ?? "none") there, \(baseline?.date ?? "none") here)"
            )
        }
        if !differs.isEmpty {
            throw WinBackError(
                .configuration,
                "this task and the one that wrote this folder differ in \(differs.joined(separator: ", ")); "
                    + "every task of a run must use the same pipeline, catalog, --shards and --as-of",
                path: path)
        }
    }
}

/// A partition task's `_SUCCESS`.
struct PartitionMarker: Codable {
    struct Part: Codable {
        var shard: Int
        var bytes: Int
        var rows: Int
        /// Of all the part file's bytes, checked by the shard that reads it.
        var sha256: String
    }

    var fingerprint: RunFingerprint
    var task: Int
    var tasks: Int
    var inputs: [FileRead]
    var parts: [Part]
    var rejected: Int
    var seconds: Double
    /// When the task began, in seconds since the epoch: the merge's manifest starts at the
    /// earliest (docs/rules.md §4.4).
    var started: Double?
}

/// A shard run's `_SUCCESS`.
struct ShardMarker: Codable {
    var fingerprint: RunFingerprint
    var shard: Int
    /// SHA-256 of each partition task's marker that the shard read, by task.
    var partitions: [String]
    /// Duplicates, other-environment and family-shared rows among the shard's rows.
    var counters: ReadCounters
    /// The shard's customers by state at the as-of instant.
    var customerStates: CustomerStates
    var renewalInputs: [InputStats]
    var renewalRejects: RejectList
    var seconds: Double
    /// Every file of the shard's folder but this marker (segments, reports), with its size and
    /// SHA-256, checked by the merge before it reads any of them.
    var outputs: [OutputStats]
    /// An incremental run's: the shard's rows file of the next state (docs/rules.md §12).
    var nextStateRows: OutputStats?
}
