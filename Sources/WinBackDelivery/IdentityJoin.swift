import Crypto
import Foundation
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The identities joined to the segment lists the destinations read (docs/rules.md §10.1,
/// §6.2): the values of the identity columns the destinations use, for every segment row, in
/// segment order.
///
/// A run in memory keeps the identity rows in one compact table (``IdentityIndex``): its valid
/// rows' worth of the used columns. A memory-bounded run never holds the whole file: the rows
/// are split by the hash of their key into ``bucketCount`` files in its work folder; groups of
/// buckets that fit a quarter of the memory limit are loaded one after another, each answering
/// the segment rows whose key falls in it into a file per list; the lists are then read once
/// more with one reader per group, which hands back the answers in segment order. Every file is
/// checked (size and SHA-256) before it is read.
package struct IdentityJoin {
    /// The identity columns used, in the order the destinations first name them.
    package let columns: [String]
    /// What the read found; duplicates are counted as buckets load.
    private(set) var scan: IdentityScan
    private(set) var duplicates = 0
    package let token: Bool
    private let storage: Storage

    private enum Storage {
        case memory(IdentityIndex)
        case disk(IdentityBuckets)
    }

    /// Where a memory-bounded run may keep its files, and its limit.
    package struct Bounds {
        package var folder: String
        package var memory: Int

        package init(folder: String, memory: Int) {
            self.folder = folder
            self.memory = memory
        }
    }

    /// Reads the identities file of `source` for `columns`, into memory, or split on disk
    /// under `bounds`.
    package static func load(
        _ p: ResolvedPipeline, source: IdentitiesSource, columns: [String], bounds: Bounds?
    ) throws -> IdentityJoin {
        let path = p.config.resolve(source.path)
        let token = source.key == .appAccountToken
        if let bounds {
            let buckets = try IdentityBuckets(folder: bounds.folder, columns: columns.count, budget: bounds.memory / 4)
            let scan = try IdentityReader.scan(
                path: path, key: source.key, columns: columns, inflater: p.inflater, limits: p.limits
            ) { key, values in try buckets.add(key: key, values: values) }
            try buckets.close()
            return IdentityJoin(columns: columns, scan: scan, token: token, storage: .disk(buckets))
        }
        var index: IdentityIndex?
        let scan = try IdentityReader.scan(
            path: path, key: source.key, columns: columns, inflater: p.inflater, limits: p.limits
        ) { key, values in
            if index == nil { index = IdentityIndex(columns: values.count) }
            index!.insert(key: key, values: values)
        }
        let kept = scan.positions.compactMap { $0 }.count
        let table = index ?? IdentityIndex(columns: kept)
        var join = IdentityJoin(columns: columns, scan: scan, token: token, storage: .memory(table))
        join.duplicates = table.replaced
        return join
    }

    /// The position among the kept values of `column`, or nil when the file lacks it.
    package func position(of column: String) -> Int? {
        guard let i = columns.firstIndex(of: column), scan.positions[i] != nil else { return nil }
        return scan.positions[..<i].filter { $0 != nil }.count
    }

    /// The key of a segment row as the identities are keyed.
    package func key(_ row: SegmentRow) -> String {
        token
            ? IdentityReader.lowercasedASCII(String(decoding: row.token, as: UTF8.self))
            : String(decoding: row.original, as: UTF8.self)
    }

    /// Prepares the answers for segment lists `names` of `lists`, in the order they will be
    /// read; a run in memory has nothing to prepare.
    package mutating func prepare(lists names: [String], from lists: SegmentSource) throws {
        guard case .disk(let buckets) = storage else { return }
        duplicates = try buckets.answer(lists: names, from: lists) { row in key(row) }
    }

    /// Calls `row` with every row of segment list `name` of `lists` and the kept identity
    /// values of its customer (nil: no identity row).
    package func rows(of name: String, from lists: SegmentSource, _ row: (SegmentRow, [String]?) throws -> Void) throws
    {
        switch storage {
        case .memory(let index):
            try lists.forEachRow(of: name) { r in
                try row(r, index.find(key(r)).map { index.values($0) })
            }
        case .disk(let buckets):
            try buckets.read(list: name, from: lists, key: { key($0) }, row)
        }
    }

    /// Removes what a bounded join wrote.
    package func discard() {
        if case .disk(let buckets) = storage { buckets.discard() }
    }
}
