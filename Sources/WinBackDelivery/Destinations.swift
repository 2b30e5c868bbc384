import Foundation
import WinBackHistory
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport
import WinBackWrite

/// What one destination received (docs/rules.md §10.2), for the manifest.
public struct DestinationCount: Sendable, Equatable {
    public var type: DestinationType
    public var audience: Destination.Audience
    public var files: Int
    public var rows: Int
    /// Segment rows left out: no identity row, or an empty identity column.
    public var unaddressable: Int
    /// Identity values in the baseline run's files and not in tonight's: the rows of the
    /// `-exited-` files (docs/rules.md §10.5).
    public var exited = 0
    /// Segment rows left out because another row of the file set holds the same identity value
    /// (docs/rules.md §10.10).
    public var folded = 0
    /// Segment rows left out because their offer has no link (no `appleId`, §10.10).
    public var withoutLink = 0
    /// ``rows`` and ``unaddressable`` per list read (an offer id or `best-offer`), for the first
    /// screen of report.html (docs/rules.md §4.3).
    public var rowsByList: [String: Int] = [:]
    public var unaddressableByList: [String: Int] = [:]
    public var foldedByList: [String: Int] = [:]
    public var withoutLinkByList: [String: Int] = [:]
}

/// What the identities file held (docs/rules.md §10.1), for the manifest.
public struct IdentityCount: Sendable, Equatable {
    public var path: String
    public var rows: Int
    public var duplicates: Int
    public var rejected: Int
}

package enum Delivery {
    /// The columns every destination file carries after the tool's own first column.
    package static let destinationColumns = [
        "winback_offer_id", "winback_offer_url", "winback_eligible_offer_ids", "winback_months_since_last_subscribed",
        "winback_as_of",
    ]

    /// The last column of every destination row: `eligible` in tonight's files, `exited` in the
    /// files of those who left (docs/rules.md §10.5).
    package static let statusColumn = "winback_status"

    /// Writes every destination's files into `directory/destinations/<type>/` from tonight's
    /// segment lists (docs/rules.md §10.2), as a run in memory holds them or as a merge merges
    /// them again, so that both write the same files from the same rows.
    /// The identities' rejected rows are added to `rejects`; more of them than
    /// `maxRejectedFraction` allows fails the run (65). Under `bounds` (a memory-bounded run)
    /// the identities are joined from files in its work folder, never held whole
    /// (docs/rules.md §6.2).
    ///
    /// Each file set (type × list) also gets `<list>-exited-NNN.csv`: the identity values of the
    /// baseline run's files of the set that tonight's lack (``DestinationExits``, §10.5); the
    /// baseline is the one the segment changes compare with (``Changes/baseline(_:)``, found
    /// once per run under its lock and handed to both). Tonight's values are held per file set
    /// as a compact set of bytes (``IdentityValueSet``), or under `bounds` split on disk by
    /// their hash (``TonightValues``).
    package static func writeDestinations(
        _ p: ResolvedPipeline, tonight lists: SegmentSource, baseline: Baseline?, to directory: String,
        rejects: inout RejectList, sync: DiskSync, bounds: IdentityJoin.Bounds? = nil
    ) throws -> (outputs: [OutputStats], counts: [DestinationCount], identities: IdentityCount?) {
        guard let source = p.config.identities, !p.config.destinations.isEmpty else { return ([], [], nil) }
        var join = try joinIdentities(p, source: source, rejects: &rejects, bounds: bounds)
        defer { join.discard() }
        // Each list once, with every destination that reads it.
        var names: [String] = []
        for d in p.config.destinations {
            for list in d.audience == .bestOffer ? ["best-offer"] : p.catalog.offers.map(\.offerId)
            where !names.contains(list) {
                names.append(list)
            }
        }
        try join.prepare(lists: names, from: lists)
        try OutputFile.makeFolder(directory + "/destinations")
        for d in p.config.destinations { try OutputFile.makeFolder(directory + "/destinations/\(d.type.rawValue)") }
        // Tonight's values of each destination, whatever list they are in: in one destination a
        // value tonight's files hold in any list never exits from another (docs/rules.md §6.3),
        // so the order in which a tool imports the files never decides. Under bounds, on disk
        // beside the identities' buckets (§6.2).
        var writer = try DestinationListWriter(
            p, join: join, source: source, directory: directory, sync: sync, bounds: bounds)
        defer { writer.discard() }
        for name in names { try writer.write(list: name, from: lists) }
        // The exit window (docs/rules.md §10.10): the baseline and the runs of the days before.
        let history = try Baseline.window(
            root: p.outputDirectory + "/" + p.config.name, name: p.config.name, before: writer.asOf,
            days: p.config.exitDays, baseline: baseline, memory: p.memoryLimit
        ).map { try BaselineFiles($0, memory: p.memoryLimit) }
        let outputs = try writer.writeExits(history: history)
        let scan = join.scan
        let identities = IdentityCount(
            path: p.config.resolve(source.path), rows: scan.lines, duplicates: join.duplicates,
            rejected: scan.rejects.total)
        return (outputs, writer.counts, identities)
    }

    /// The identities joined for the destinations (``IdentityJoin``): their rejected rows added
    /// to `rejects`, more than `maxRejectedFraction` of them 65, a destination's column missing 65.
    package static func joinIdentities(
        _ p: ResolvedPipeline, source: IdentitiesSource, rejects: inout RejectList, bounds: IdentityJoin.Bounds?
    ) throws -> IdentityJoin {
        let path = p.config.resolve(source.path)
        // The file's columns that hold the destinations' identity columns (identities.columns).
        var columns: [String] = []
        for d in p.config.destinations where !columns.contains(source.fileColumn(d.type.identityColumn)) {
            columns.append(source.fileColumn(d.type.identityColumn))
        }
        let join = try IdentityJoin.load(p, source: source, columns: columns, bounds: bounds)
        let scan = join.scan
        rejects.merge(scan.rejects)
        rejects.normalize()
        if scan.lines > 0 && Double(scan.rejects.total) / Double(scan.lines) > p.config.maxRejectedFraction {
            join.discard()
            throw WinBackError(
                .badData,
                "\(scan.rejects.total) of \(scan.lines) identity rows rejected, more than maxRejectedFraction "
                    + "\(p.config.maxRejectedFraction) allows; see rejects.csv in the .failed folder", path: path)
        }
        for d in p.config.destinations where join.position(of: source.fileColumn(d.type.identityColumn)) == nil {
            join.discard()
            throw WinBackError(
                .badData,
                "\(d.type.rawValue) needs the column '\(source.fileColumn(d.type.identityColumn))', which the "
                    + "identities file lacks", path: path)
        }
        return join
    }

    /// Says once per offer without `appleId` that its customers are left out of the
    /// destination files (docs/rules.md §10.10: a row never carries an empty link), as
    /// `validate` warns; nothing when the pipeline has no destinations.
    package static func warnOffersWithoutLink(_ p: ResolvedPipeline, progress: Progress) {
        guard p.config.identities != nil, !p.config.destinations.isEmpty else { return }
        for o in p.catalog.offers where (o.appleId ?? "").isEmpty {
            progress.warn(
                "offer_without_link",
                "offer '\(o.offerId)' has no appleId: its customers are left out of the destination files (a row "
                    + "never carries an empty link); the id is on the offer's page in App Store Connect",
                fields: ["offerId": o.offerId])
        }
    }

    /// The identities file's header against what the pipeline asks of it, before anything is
    /// read (docs/rules.md §10.7): the key column, and each destination's identity column; a
    /// column missing is a configuration error (78) naming the destination, the column and the
    /// file.
    public static func checkIdentities(_ config: PipelineConfig, inflater: Inflater) throws {
        guard let source = config.identities else { return }
        let path = config.resolve(source.path)
        let header = try IdentityReader.header(path: path, inflater: inflater)
        var problems: [String] = []
        func has(_ column: String) -> Bool { header.contains { IdentitiesSource.sameColumn($0, column) } }
        if !has(source.key.rawValue) {
            problems.append("identities.key is \(source.key.rawValue), a column the identities file lacks")
        }
        for (from, to) in source.columns.sorted(by: { $0.key < $1.key }) where !has(to) {
            problems.append("identities.columns maps \(from) to '\(to)', a column the identities file lacks")
        }
        for d in config.destinations
        where source.columns[d.type.identityColumn] == nil && !has(d.type.identityColumn) {
            problems.append(
                "output.destinations: \(d.type.rawValue) needs the column '\(d.type.identityColumn)', which the "
                    + "identities file lacks (identities.columns maps it from a column of another name)")
        }
        guard problems.isEmpty else {
            let shown = header.prefix(20).map { "'\($0)'" }.joined(separator: ", ")
            throw WinBackError(
                .configuration,
                problems.joined(separator: "; ") + " (it has " + shown
                    + (header.count > 20 ? ", … \(header.count) columns in all" : "") + ")", path: path)
        }
    }
}

/// Writes `<prefix>-001.csv`, `<prefix>-002.csv`, …: each file starts with the header, and a
/// row that would take a file past `maxRows` data rows or `maxBytes` bytes starts the next.
/// At least one file is written, with the header alone when no row comes.
package struct DestinationSplitter {
    package let directory: String
    package let prefix: String
    package let header: [UInt8]
    package let maxRows: Int?
    package let maxBytes: Int?
    package let sync: DiskSync
    private var file: OutputFile?
    private var rows = 0
    private var bytes = 0
    private var done: [OutputStats] = []

    package init(
        directory: String, prefix: String, header: [String], maxRows: Int?, maxBytes: Int?, sync: DiskSync
    ) {
        self.directory = directory
        self.prefix = prefix
        self.header = CSVRecord.header(header)
        self.maxRows = maxRows
        self.maxBytes = maxBytes
        self.sync = sync
    }

    private var name: String {
        let n = String(done.count + 1)
        return prefix + "-" + String(repeating: "0", count: max(0, 3 - n.count)) + n + ".csv"
    }

    private mutating func open() throws {
        let f = try OutputFile(path: directory + "/" + name, sync: sync)
        try f.write(header)
        file = f
        rows = 0
        bytes = header.count
    }

    private mutating func close() throws {
        guard let f = file else { return }
        let (n, sha) = try f.finish()
        done.append(OutputStats(path: name, bytes: n, rows: rows, sha256: sha))
        file = nil
    }

    package mutating func write(_ row: [UInt8]) throws {
        if file == nil { try open() }
        let full = (maxRows.map { rows + 1 > $0 } ?? false) || (maxBytes.map { bytes + row.count > $0 } ?? false)
        if full && rows > 0 {
            try close()
            try open()
        }
        try file!.write(row)
        rows += 1
        bytes += row.count
    }

    /// Closes the last file; returns every file written.
    package mutating func finish() throws -> [OutputStats] {
        if file == nil && done.isEmpty { try open() }
        try close()
        return done
    }
}

/// Writes the destinations' files list by list, then their exited files (docs/rules.md §10.2,
/// §10.5, §10.10), counting what each destination received.
package struct DestinationListWriter {
    package let p: ResolvedPipeline
    package let join: IdentityJoin
    package let source: IdentitiesSource
    package let directory: String
    package let sync: DiskSync
    package let bounds: IdentityJoin.Bounds?
    /// Tonight's date, as the rows carry it.
    package let asOf: String
    /// §3's ranking of the offers (HIGH priority, then catalog order): which of the rows
    /// holding one identity value stays (§10.10).
    package let rank: [String: Int]
    /// Per destination, tonight's values, whatever list they are in.
    package let tonight: [TonightValues]
    private(set) var counts: [DestinationCount]
    /// Per destination, per list, the files written.
    private var files: [[String: [OutputStats]]]
    private var record = CSVRecord()

    package init(
        _ p: ResolvedPipeline, join: IdentityJoin, source: IdentitiesSource, directory: String, sync: DiskSync,
        bounds: IdentityJoin.Bounds?
    ) throws {
        self.p = p
        self.join = join
        self.source = source
        self.directory = directory
        self.sync = sync
        self.bounds = bounds
        asOf = Timestamp.date(p.asOf)
        var rank: [String: Int] = [:]
        for (i, o) in p.catalog.offers.enumerated() where rank[o.offerId] == nil {
            rank[o.offerId] = (o.priority == .high ? 0 : p.catalog.offers.count) + i
        }
        self.rank = rank
        tonight = try p.config.destinations.indices.map { i in
            try TonightValues(folder: bounds.map { $0.folder + "-exits-\(i)" })
        }
        counts = p.config.destinations.map {
            DestinationCount(type: $0.type, audience: $0.audience, files: 0, rows: 0, unaddressable: 0)
        }
        files = Array(repeating: [:], count: p.config.destinations.count)
    }

    package func discard() { for t in tonight { t.discard() } }

    /// The files of segment list `list` for every destination that reads it: one row per
    /// identity value (a first pass finds each value's row), never a row without a link.
    package mutating func write(list: String, from lists: SegmentSource) throws {
        let destinations = p.config.destinations
        let readers = destinations.indices.filter { i in
            destinations[i].audience == .bestOffer ? list == "best-offer" : list != "best-offer"
        }
        var outs = readers.map { i in
            DestinationSplitter(
                directory: directory, prefix: "destinations/\(destinations[i].type.rawValue)/" + list,
                header: [destinations[i].type.firstColumn] + Delivery.destinationColumns + [Delivery.statusColumn],
                maxRows: destinations[i].maxRows, maxBytes: destinations[i].maxBytes, sync: sync)
        }
        let positions = readers.map { join.position(of: source.fileColumn(destinations[$0].type.identityColumn))! }
        // An email is one value whatever its case (docs/rules.md §6.3): folded and compared so.
        let email = readers.map { destinations[$0].type.identityColumn == "email" }
        func key(_ k: Int, _ value: String) -> String { email[k] ? DestinationExits.folded(value) : value }
        var written = [Int](repeating: 0, count: readers.count)
        var unaddressable = [Int](repeating: 0, count: readers.count)
        let folds = try readers.indices.map { k in try FoldedValues(folder: bounds.map { $0.folder + "-fold-\(k)" }) }
        defer { for f in folds { f.discard() } }
        var position = 0
        let rank = self.rank
        try join.rows(of: list, from: lists) { row, values in
            defer { position += 1 }
            guard !row.offerURL.isEmpty, let values else { return }
            let offer = String(decoding: row.offer, as: UTF8.self)
            for k in readers.indices where !values[positions[k]].isEmpty {
                try folds[k].add(key(k, values[positions[k]]), rank: rank[offer] ?? Int.max / 2, position: position)
            }
        }
        for f in folds { try f.finish() }
        position = 0
        var counts = self.counts
        var record = self.record
        let (asOf, tonight) = (self.asOf, self.tonight)
        // winback_eligible_offer_ids names only offers whose customers the files can reach.
        let unlinked = Set(p.catalog.offers.filter { ($0.appleId ?? "").isEmpty }.map(\.offerId))
        func linked(_ ids: String) -> String {
            unlinked.isEmpty
                ? ids : ids.split(separator: ";").filter { !unlinked.contains(String($0)) }.joined(separator: ";")
        }
        try join.rows(of: list, from: lists) { row, values in
            defer { position += 1 }
            for (k, i) in readers.enumerated() {
                // Never an empty link (docs/rules.md §10.10): an offer without appleId.
                guard !row.offerURL.isEmpty else {
                    counts[i].withoutLink += 1
                    counts[i].withoutLinkByList[list, default: 0] += 1
                    continue
                }
                // Columns of docs/rules.md §4.1; the identity value exactly as written.
                guard let values, !values[positions[k]].isEmpty else {
                    counts[i].unaddressable += 1
                    unaddressable[k] += 1
                    continue
                }
                guard folds[k].keeps(key(k, values[positions[k]]), position: position) else {
                    counts[i].folded += 1
                    counts[i].foldedByList[list, default: 0] += 1
                    continue
                }
                record.reset()
                record.field(verbatim: values[positions[k]])
                record.field(bytes: row.offer)
                record.field(bytes: row.offerURL)
                record.field(linked(String(decoding: row.eligible, as: UTF8.self)))
                record.field(bytes: row.monthsSince)
                record.field(asOf)
                record.field(DestinationExits.eligible)
                record.end()
                try outs[k].write(record.bytes)
                try tonight[i].insert(key(k, values[positions[k]]))
                counts[i].rows += 1
                written[k] += 1
            }
        }
        self.record = record
        for (k, i) in readers.enumerated() {
            let done = try outs[k].finish()
            files[i][list] = done
            counts[i].files += done.count
            counts[i].rowsByList[list] = written[k]
            counts[i].unaddressableByList[list] = unaddressable[k]
        }
        self.counts = counts
    }

    /// Who left each file set within the exit window `history` (docs/rules.md §10.5, §10.10):
    /// tonight's lists and then, once more, the lists of offers that left the catalog (§6.3).
    /// Returns every destination file, in the manifest's order.
    package mutating func writeExits(history: [BaselineFiles]) throws -> [OutputStats] {
        var outputs: [OutputStats] = []
        for (i, d) in p.config.destinations.enumerated() {
            let own = d.audience == .bestOffer ? ["best-offer"] : p.catalog.offers.map(\.offerId)
            let gone = history.reduce(into: Set<String>()) {
                $0.formUnion(DestinationExits.lists(of: $1, type: d.type))
            }
            .subtracting(own).sorted()
            for list in own + gone {
                var exits = DestinationSplitter(
                    directory: directory, prefix: "destinations/\(d.type.rawValue)/\(list)-exited",
                    header: [d.type.firstColumn] + Delivery.destinationColumns + [Delivery.statusColumn],
                    maxRows: d.maxRows, maxBytes: d.maxBytes, sync: sync)
                if !history.isEmpty {
                    counts[i].exited += try DestinationExits.write(
                        history: history, type: d.type, list: list, tonight: tonight[i], asOf: asOf, into: &exits)
                }
                outputs += (files[i][list] ?? []) + (try exits.finish())
            }
        }
        return outputs
    }
}
