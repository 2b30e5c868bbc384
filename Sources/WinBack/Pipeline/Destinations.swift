import Foundation
import WinBackModel
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
}

/// What the identities file held (docs/rules.md §10.1), for the manifest.
public struct IdentityCount: Sendable, Equatable {
    public var path: String
    public var rows: Int
    public var duplicates: Int
    public var rejected: Int
}

extension Stage {
    /// The columns every destination file carries after the tool's own first column.
    static let destinationColumns = [
        "winback_offer_id", "winback_offer_url", "winback_eligible_offer_ids", "winback_months_since_last_subscribed",
        "winback_as_of",
    ]

    /// Writes every destination's files into `directory/destinations/<type>/` from the CSV
    /// segments already in `directory/segments/` (docs/rules.md §10.2), so that a run in
    /// memory, a memory-bounded run and a merge write the same files from the same segments.
    /// The identities' rejected rows are added to `rejects`; more of them than
    /// `maxRejectedFraction` allows fails the run (65).
    static func writeDestinations(
        _ p: ResolvedPipeline, to directory: String, rejects: inout RejectList, sync: DiskSync
    ) throws -> (outputs: [OutputStats], counts: [DestinationCount], identities: IdentityCount?) {
        guard let source = p.config.identities, !p.config.destinations.isEmpty else { return ([], [], nil) }
        let path = p.config.resolve(source.path)
        let table = try IdentityReader.read(path: path, key: source.key, inflater: p.inflater, limits: p.limits)
        rejects.merge(table.rejects)
        rejects.normalize()
        let identities = IdentityCount(
            path: path, rows: table.lines, duplicates: table.duplicates, rejected: table.rejects.total)
        if table.lines > 0 && Double(table.rejects.total) / Double(table.lines) > p.config.maxRejectedFraction {
            throw WinBackError(
                .badData,
                "\(table.rejects.total) of \(table.lines) identity rows rejected, more than maxRejectedFraction "
                    + "\(p.config.maxRejectedFraction) allows; see rejects.csv in the .failed folder", path: path)
        }
        var outputs: [OutputStats] = []
        var counts: [DestinationCount] = []
        let asOf = Timestamp.date(p.asOf)
        for d in p.config.destinations {
            guard let column = table.index(of: d.type.identityColumn) else {
                throw WinBackError(
                    .badData,
                    "\(d.type.rawValue) needs the column '\(d.type.identityColumn)', which the identities file lacks",
                    path: path)
            }
            let folder = "destinations/\(d.type.rawValue)"
            try OutputFile.makeFolder(directory + "/destinations")
            try OutputFile.makeFolder(directory + "/" + folder)
            let lists = d.audience == .bestOffer ? ["best-offer"] : p.catalog.offers.map(\.offerId)
            var count = DestinationCount(type: d.type, audience: d.audience, files: 0, rows: 0, unaddressable: 0)
            for list in lists {
                var out = DestinationSplitter(
                    directory: directory, prefix: folder + "/" + list,
                    header: [d.type.firstColumn] + destinationColumns,
                    maxRows: d.maxRows, maxBytes: d.maxBytes, sync: sync)
                var record = CSVRecord()
                try forEachSegmentRow(directory + "/segments/" + list + ".csv") { f in
                    // Columns of docs/rules.md §4.1.
                    let key = source.key == .originalTransactionId ? f[1] : f[2]
                    guard !key.isEmpty, let fields = table.fields(for: key, token: source.key == .appAccountToken),
                        !fields[column].isEmpty
                    else {
                        count.unaddressable += 1
                        return
                    }
                    record.reset()
                    record.field(fields[column])
                    record.field(f[9])
                    record.field(f[12])
                    record.field(f[11])
                    record.field(f[8])
                    record.field(asOf)
                    record.end()
                    try out.write(record.bytes)
                    count.rows += 1
                }
                let files = try out.finish()
                count.files += files.count
                outputs += files
            }
            counts.append(count)
        }
        return (outputs, counts, identities)
    }

    /// Calls `row` with the fields of every data row of a segment CSV file.
    static func forEachSegmentRow(_ path: String, _ row: ([String]) throws -> Void) throws {
        var header = true
        try CSVRecordReader(source: try openSource(path: path), maxRecordBytes: 1 << 30).forEachRecord {
            fields, _, _, bad in
            if header {
                header = false
                return
            }
            guard bad == nil, fields.count == SegmentWriter.columns.count else {
                throw WinBackError(.badData, "a segment row is not what this run wrote", path: path)
            }
            try row(fields.map { String(decoding: $0, as: UTF8.self) })
        }
    }
}

/// Writes `<prefix>-001.csv`, `<prefix>-002.csv`, …: each file starts with the header, and a
/// row that would take a file past `maxRows` data rows or `maxBytes` bytes starts the next.
/// At least one file is written, with the header alone when no row comes.
struct DestinationSplitter {
    let directory: String
    let prefix: String
    let header: [UInt8]
    let maxRows: Int?
    let maxBytes: Int?
    let sync: DiskSync
    private var file: OutputFile?
    private var rows = 0
    private var bytes = 0
    private var done: [OutputStats] = []

    init(
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

    mutating func write(_ row: [UInt8]) throws {
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
    mutating func finish() throws -> [OutputStats] {
        if file == nil && done.isEmpty { try open() }
        try close()
        return done
    }
}
