import Foundation
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackS3
import WinBackSupport
import WinBackWrite

/// `ledger.json` of an incremental pipeline's state (docs/rules.md §12): the settings its rows
/// are valid under, every transaction file it absorbed, and what reading them gave besides
/// rows. Written by ``IntermediateFile/writeJSON(_:to:)`` (a checksum line ends it).
package struct StateLedger: Codable {
    /// The layout of the state; another one is rebuilt (2: rows keep their amounts,
    /// docs/rules.md §13.1; 3: rows name their shared columns, `WBPART05`, §8.1).
    package static let layout = 3

    /// A transaction file the state absorbed, written as one object.
    package struct File: Codable, Equatable {
        /// The path, or the object's URI, as the globs gave it.
        package var path: String
        /// An object's ETag when it was read; nil for a local file.
        package var etag: String?
        /// ``System/fileIdentity(_:)`` of a local file, taken before it was read: while it is the
        /// same, the file is not read again to check its SHA-256.
        package var identity: [Int64]?
        /// What reading it counted: size and SHA-256 of its bytes as stored, lines, rejects and
        /// the rows it gave (before deduplication).
        package var counts: FileCounts

        package init(path: String, etag: String?, identity: [Int64]?, counts: FileCounts) {
            self.path = path
            self.etag = etag
            self.identity = identity
            self.counts = counts
        }

        private enum CodingKeys: String, CodingKey { case path, etag, identity }

        package init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            path = try c.decode(String.self, forKey: .path)
            etag = try c.decodeIfPresent(String.self, forKey: .etag)
            identity = try c.decodeIfPresent([Int64].self, forKey: .identity)
            counts = try FileCounts(from: decoder)
        }

        package func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(path, forKey: .path)
            try c.encodeIfPresent(etag, forKey: .etag)
            try c.encodeIfPresent(identity, forKey: .identity)
            try counts.encode(to: encoder)
        }
    }

    package var layout: Int
    /// Counts the states written: new rows files are named by it, so that those kept from the
    /// previous state never clash with them.
    package var generation: Int
    package var settings: StateSettings
    /// The absorbed files, in the order they were absorbed (a night's new files after the
    /// earlier ones, in path order); a section of a rows file names its file by index here.
    package var files: [File]
    /// The rows files: `rows-<generation>-<piece>.part`, or for a memory-bounded run `rows-<k>.part` for every
    /// shard k: size, SHA-256 and rows (the winners of every absorbed file).
    package var rowsFiles: [OutputStats]
    /// A memory-bounded run's: rows the absorbed files gave each shard (before deduplication).
    package var shardRows: [Int]?
    /// The absorbed files' rejects, as many as rejects.csv may list, and how many in all.
    package var rejects: RejectList
    /// Renewal info found among the absorbed files' transactions (signed files), `file` an
    /// index in `files`, in the order read.
    package var renewals: [FoundRenewal]
}

/// What makes a state's rows valid (docs/rules.md §12): reading the same files under other
/// settings could give other rows, other rejects or other counts.
package struct StateSettings: Codable, Equatable {
    package var toolVersion: String
    package var format: String
    package var environment: String
    /// RevenueCat's product map.
    package var products: [String: String]
    /// Signed input: verified or not, the roots' SHA-256 and the app checks.
    package var verify: Bool
    package var roots: [String]
    package var bundleId: String?
    package var appAppleId: Int64?
    package var consecutiveGapDays: Int64
    package var maxLineBytes: Int
    package var maxRejectsListed: Int
    /// A memory-bounded run's shard count: the state is kept per shard.
    package var shards: Int?

    /// What differs from `old` (the state's), in words; empty when nothing does.
    package func changes(from old: StateSettings) -> [String] {
        var out: [String] = []
        if toolVersion != old.toolVersion { out.append("winback \(old.toolVersion) wrote it, this is \(toolVersion)") }
        if format != old.format { out.append("the format changed from \(old.format) to \(format)") }
        if environment != old.environment {
            out.append("the environment changed from \(old.environment) to \(environment)")
        }
        if products != old.products { out.append("the product map changed") }
        if verify != old.verify {
            out.append(verify ? "signatures are now verified" : "signatures are no longer verified")
        }
        if roots != old.roots { out.append("the apple roots changed") }
        if bundleId != old.bundleId || appAppleId != old.appAppleId { out.append("the apple app checks changed") }
        if consecutiveGapDays != old.consecutiveGapDays {
            out.append("consecutiveGapDays changed from \(old.consecutiveGapDays) to \(consecutiveGapDays)")
        }
        if maxLineBytes != old.maxLineBytes { out.append("limits.maxLineBytes changed") }
        if maxRejectsListed != old.maxRejectsListed { out.append("limits.maxRejectsListed changed") }
        let shardCount = { (n: Int) in counted(n, "shard") }
        switch (old.shards, shards) {
        case (nil, let now?):
            out.append("a run in memory kept the state; this run is memory-bounded (\(shardCount(now)))")
        case (let then?, nil):
            out.append("a memory-bounded run kept the state in \(shardCount(then)); this run is in memory")
        case (let then?, let now?) where then != now:
            out.append("the state was kept in \(shardCount(then)); this run uses \(now)")
        default: break
        }
        return out
    }
}

extension StateSettings {
    /// The settings of a run of `p` (a memory-bounded run's with its `shards`).
    package init(_ p: ResolvedPipeline, shards: Int? = nil) {
        toolVersion = ToolVersion.current
        format = p.config.format.rawValue
        environment = p.config.environment
        products = p.config.format == .revenuecat ? p.config.products : [:]
        verify = p.signed?.verifies ?? false
        roots = p.signed?.roots.map(\.sha256) ?? []
        bundleId = p.signed?.bundleId
        appAppleId = p.signed?.appAppleId
        consecutiveGapDays = p.config.consecutiveGapDays
        maxLineBytes = p.config.maxLineBytes
        maxRejectsListed = p.config.maxRejectsListed
        self.shards = shards
    }
}
