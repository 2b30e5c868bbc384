import Foundation
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The keeper of a memory-bounded run's state (docs/rules.md §12): the rows kept per shard
/// (`rows-<shard>.part`), each shard merging its rows of the state with those of its part file
/// and writing its winners to the next state; the ledger completed once the partition task and
/// every shard are done. What is found, staged and swapped is ``StateFolder``'s.
package final class ShardedStateKeeper {
    package let state: StateFolder
    package let p: ResolvedPipeline

    /// Examines the state of `p` under `root` (the run's lock held), kept in `shards` shards.
    ///
    /// With `keepingMoreShards` (the shard count was estimated), a state kept in more shards
    /// keeps its count: an earlier night partitioned again because the rows did not fit
    /// (docs/rules.md §12, rule 7).
    package init(_ p: ResolvedPipeline, root: String, shards: Int, keepingMoreShards: Bool) {
        self.p = p
        state = StateFolder(p, root: root, shards: shards, keepingMoreShards: keepingMoreShards)
    }

    /// The shards the next state is kept in.
    package var shards: Int? { state.settings.shards }

    /// A memory-bounded run that needs more shards than its state was kept in: the state is
    /// given up, and the next one kept in `shards`.
    package func reshard(_ shards: Int) {
        let old = state.settings.shards ?? 1
        state.settings.shards = shards
        if state.use == .absorbed { state.rebuild("the rows no longer fit in \(old) shards; kept in \(shards) now") }
    }

    /// The ledger's renewal info with `file` the index in the run's paths.
    private var absorbedRenewals: [FoundRenewal] {
        let pathOfLedgerFile = state.pathOfLedgerFile
        return (state.ledger?.renewals ?? []).compactMap { r in
            guard r.file >= 0, r.file < pathOfLedgerFile.count else { return nil }
            var r = r
            r.file = pathOfLedgerFile[r.file]
            return r
        }
    }

    /// Begins the next state of a memory-bounded run; returns the indices of the files the
    /// state absorbed, which are not partitioned.
    package func beginShards() throws -> Set<Int> {
        _ = try state.stage()
        shardFiles = Array(repeating: nil, count: state.settings.shards ?? 1)
        return Set(state.pathOfLedgerFile)
    }

    private var shardFiles: [OutputStats?] = []

    /// What shard `k` takes from the state, and where it writes its rows of the next one.
    package func shard(_ k: Int) -> ShardState {
        ShardState(
            rows: state.ledger.map { (state.path + "/" + $0.rowsFiles[k].path, $0.rowsFiles[k]) },
            pathOfLedgerFile: state.pathOfLedgerFile, absorbedRows: state.ledger?.shardRows?[k] ?? 0,
            renewals: absorbedRenewals, next: (state.staged ?? state.root) + "/rows-\(k).part")
    }

    /// Records the rows file shard `k` wrote for the next state.
    package func shard(_ k: Int, wrote stats: OutputStats) { shardFiles[k] = stats }

    /// The absorbed files as a partition task's marker lists its inputs (`file` the index in
    /// the run's paths), and their rejects: a merge counts them with the files read now.
    package var absorbedInputs: [FileRead] {
        guard let ledger = state.ledger else { return [] }
        return zip(ledger.files, state.pathOfLedgerFile).map {
            FileRead(file: $1, counts: $0.counts)
        }
    }
    package var absorbedRejects: RejectList? { state.ledger?.rejects }

    /// Completes the next state of a memory-bounded run once its one partition task and every
    /// shard are done: the files read now (`inputs`) and the rows each shard was handed
    /// (`shardParts`, by shard), as the partition's marker lists them, with the partition's
    /// rejects and renewal info.
    package func finishShards(
        inputs: [FileRead], shardParts: [(shard: Int, rows: Int)], rejects: RejectList, renewals found: [FoundRenewal]
    ) throws {
        guard let staged = state.staged else { return }
        let ledger = state.ledger
        let pathOfLedgerFile = state.pathOfLedgerFile
        let written = shardFiles.compactMap { $0 }
        guard written.count == shardFiles.count, shardParts.count == shardFiles.count else {
            throw WinBackError(.software, "a shard wrote no rows for the next state", path: staged)
        }
        state.rowsInState = written.reduce(0) { $0 + $1.rows }
        var files = [StateLedger.File?](repeating: nil, count: p.transactionFiles.count)
        let ledgerIndex = Dictionary(pathOfLedgerFile.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        for input in absorbedInputs + inputs where input.file < files.count {
            let path = p.transactionFiles[input.file]
            let old = ledger.flatMap { l in ledgerIndex[input.file].map { l.files[$0] } }
            files[input.file] = StateLedger.File(
                path: path, etag: old?.etag ?? state.identities[input.file].etag,
                identity: state.identities[input.file].stat, counts: input.counts)
        }
        let listed = files.compactMap { $0 }
        guard listed.count == files.count else {
            throw WinBackError(.software, "the next state misses a file's counts", path: staged)
        }
        var all = rejects
        if let old = ledger?.rejects { all.merge(old) }
        all.normalize()
        let shardRows = shardParts.map { part in (ledger?.shardRows?[part.shard] ?? 0) + part.rows }
        let renewals = (absorbedRenewals + found).enumerated().sorted {
            ($0.element.file, $0.offset) < ($1.element.file, $1.offset)
        }.map(\.element)
        let next = StateLedger(
            layout: StateLedger.layout, generation: (ledger?.generation ?? 0) + 1, settings: state.settings,
            files: listed,
            rowsFiles: written, shardRows: shardRows, rejects: all, renewals: renewals)
        try IntermediateFile.writeJSON(next, to: staged + "/" + StateFolder.ledgerName)
        System.syncDirectory(staged)
    }
}

/// What one shard of a memory-bounded run takes from the state (docs/rules.md §12).
package struct ShardState {
    /// The shard's rows file in the state and what the ledger says of it; nil when none.
    package var rows: (path: String, stats: OutputStats)?
    /// Each ledger file's index in the run's paths.
    package var pathOfLedgerFile: [Int]
    /// Rows the absorbed files gave this shard, before deduplication.
    package var absorbedRows: Int
    /// Renewal info found among the absorbed files' transactions, `file` the index in the run's paths.
    package var renewals: [FoundRenewal]
    /// Where the shard writes its rows of the next state.
    package var next: String
}
