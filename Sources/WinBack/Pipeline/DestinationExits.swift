import Crypto
import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The identity values one destination file set holds tonight (docs/rules.md §10.5), as a set
/// of bytes: an ``IdentityIndex`` with no columns, the values its keys. A value costs its bytes
/// and a slot of the table, never a Swift `String` each, also in a memory-bounded run (§6.2).
struct IdentityValueSet {
    private let index = IdentityIndex(columns: 0)

    /// Adds `value` (at most ``IdentityValues/maxBytes`` bytes: checked when it was read).
    func insert(_ value: String) {
        var v = value
        v.withUTF8 { index.insert(key: UnsafeRawBufferPointer($0), values: []) }
    }

    /// Adds `value`, when it may be an identity value at all (a longer one is never tonight's).
    func insert(bytes value: [UInt8]) {
        guard value.count <= IdentityValues.maxBytes else { return }
        value.withUnsafeBytes { index.insert(key: $0, values: []) }
    }

    func contains(bytes value: [UInt8]) -> Bool {
        value.withUnsafeBytes { index.find($0) != nil }
    }

    /// Adds `value` (at most ``IdentityValues/maxBytes`` bytes: a bucket's record).
    func insert(raw value: UnsafeRawBufferPointer) { index.insert(key: value, values: []) }

    func contains(raw value: UnsafeRawBufferPointer) -> Bool { index.find(value) != nil }

    /// Distinct values held.
    var count: Int { index.count }
}

/// Tonight's identity values of one destination file set (docs/rules.md §10.5): a set in
/// memory, or, in a memory-bounded run, records split on disk by the hash of the value, so that
/// tonight's audience is never held whole (§6.2). The exits are then found bucket by bucket
/// (``exits(_:)``).
final class TonightValues {
    private enum Storage {
        case memory(IdentityValueSet)
        /// The work folder of the buckets.
        case disk(String)
    }
    private let storage: Storage
    private var writers: [IntermediateWriter] = []
    /// On disk, tonight's buckets once written (the first ``exits(_:)``), kept for the next.
    private var written: [(bytes: Int, sha256: String)]?
    private var record: [UInt8] = []

    /// In memory, or with `folder` (made anew; what a killed run left there goes first) on disk.
    init(folder: String?) throws {
        guard let folder else {
            storage = .memory(IdentityValueSet())
            return
        }
        storage = .disk(folder)
        writers = try IdentityBuckets.writers(in: folder, named: "tonight", for: "the exits")
    }

    /// Adds one of tonight's values (an identity value: at most ``IdentityValues/maxBytes`` bytes).
    func insert(_ value: String) throws {
        if case .memory(let memory) = storage { return memory.insert(value) }
        var v = value
        try v.withUTF8 { p in
            let key = UnsafeRawBufferPointer(p)
            record.removeAll(keepingCapacity: true)
            IdentityIndex.appendRecord(key: key, values: [], to: &record)
            try writers[IdentityBuckets.bucket(key)].write(record)
        }
    }

    /// Which of the baseline's values exit, given every one of them in order by `values`
    /// (called once or twice): `exits(i, value)` for the `i`-th, in order. A value exits when
    /// it is not empty, not tonight's, and not seen before in this call (a value held twice
    /// exits once; each call, one baseline file set, is asked anew;
    /// one longer than an identity value can be is never tonight's nor kept, and exits each
    /// time, as in memory). On disk the baseline's values are split like tonight's, each
    /// bucket's pair is loaded in turn and the exiting rows marked in a bitset of the
    /// baseline's rows: the rows then come out in the baseline's order, the same as in memory.
    func exits(_ values: ((([UInt8]) throws -> Void) throws -> Void)) throws -> (Int, [UInt8]) -> Bool {
        let folder: String
        switch storage {
        case .memory(let memory):
            let seen = IdentityValueSet()
            return { _, value in
                guard !value.isEmpty, !memory.contains(bytes: value), !seen.contains(bytes: value) else { return false }
                seen.insert(bytes: value)
                return true
            }
        case .disk(let f): folder = f
        }
        let tonight = try written ?? writers.map { w in try w.finish() }.map { ($0.bytes, $0.sha256) }
        written = tonight
        writers = []
        let baseline = try (0..<IdentityBuckets.bucketCount).map {
            try IntermediateWriter(path: folder + "/baseline-\($0)")
        }
        var marks: [UInt64] = []
        var n = 0
        func mark(_ i: Int) { marks[i >> 6] |= 1 << UInt64(i & 63) }
        try values { value in
            let i = n
            n += 1
            if i & 63 == 0 { marks.append(0) }
            guard !value.isEmpty else { return }
            guard value.count <= IdentityValues.maxBytes else { return mark(i) }
            var at = UInt64(i).littleEndian
            try value.withUnsafeBytes { v in
                try withUnsafeBytes(of: &at) { index in
                    record.removeAll(keepingCapacity: true)
                    IdentityIndex.appendRecord(key: v, values: [index], to: &record)
                    try baseline[IdentityBuckets.bucket(v)].write(record)
                }
            }
        }
        let written = try baseline.map { try $0.finish() }
        for b in 0..<IdentityBuckets.bucketCount {
            let set = IdentityValueSet()
            try IntermediateReader(
                path: folder + "/tonight-\(b)", bytes: tonight[b].bytes, sha256: tonight[b].sha256
            ).forEachRecord(columns: 0) { key, _ in set.insert(raw: key) }
            try IntermediateReader(
                path: folder + "/baseline-\(b)", bytes: written[b].bytes, sha256: written[b].sha256
            ).forEachRecord(columns: 1) { key, index in
                guard !set.contains(raw: key) else { return }
                set.insert(raw: key)
                guard index[0].count == 8 else { return }
                mark(Int(UInt64(littleEndian: index[0].loadUnaligned(as: UInt64.self))))
            }
            System.unlinkIfPresent(folder + "/baseline-\(b)")
        }
        return { i, _ in i >> 6 < marks.count && marks[i >> 6] & (1 << UInt64(i & 63)) != 0 }
    }

    /// Removes the work folder, when on disk.
    func discard() {
        if case .disk(let folder) = storage { IdentityBuckets.removeFolder(folder) }
    }
}

/// The rows of a destination file set that left since the baseline run (docs/rules.md §10.5):
/// every identity value of the baseline's files of the set that tonight's files lack, once, in
/// the baseline's order, written to `<audience>-exited-NNN.csv` with `winback_status` `exited`,
/// tonight's date and every other `winback_` column empty. Importing tonight's files and these,
/// in either order, leaves a tool whose segment is "winback_status is eligible" holding exactly
/// tonight's audience.
enum DestinationExits {
    /// The longest line of a baseline's destination file read (a longer one is not a row this
    /// tool wrote).
    static let maxLineBytes = 16 << 20

    /// The baseline's files of the set `destinations/<type>/<list>-NNN.csv`, in their order,
    /// as its manifest lists them (path relative to its folder, SHA-256).
    static func files(of baseline: BaselineFiles, type: DestinationType, list: String) -> [(String, String)] {
        let prefix = "destinations/\(type.rawValue)/\(list)-"
        var found: [(Int, String, String)] = []
        for (path, sha) in baseline.sha256 where path.hasPrefix(prefix) && path.hasSuffix(".csv") {
            let middle = path.dropFirst(prefix.count).dropLast(4)
            guard middle.count >= 3, middle.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int(middle) else {
                continue
            }
            found.append((n, path, sha))
        }
        return found.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
    }

    /// The lists of destination `type` whose files the baseline's manifest lists
    /// (`destinations/<type>/<list>-NNN.csv`, exited files aside), by name.
    static func lists(of baseline: BaselineFiles, type: DestinationType) -> Set<String> {
        let prefix = "destinations/\(type.rawValue)/"
        var lists: Set<String> = []
        for path in baseline.sha256.keys where path.hasPrefix(prefix) && path.hasSuffix(".csv") {
            let name = path.dropFirst(prefix.count).dropLast(4)
            guard let dash = name.lastIndex(of: "-"), !name.contains("/") else { continue }
            let number = name[name.index(after: dash)...]
            let list = String(name[..<dash])
            guard number.count >= 3, number.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), !list.isEmpty,
                !list.hasSuffix("-exited")
            else { continue }
            lists.insert(list)
        }
        return lists
    }

    /// Writes the exited rows of the set (type `type`, list `list`) into `out`: the identity
    /// values of the baseline's files absent from `tonight` (``TonightValues/exits(_:)``: a
    /// value the baseline held twice exits once). Returns the rows written.
    ///
    /// The baseline's files are read by their header's names (a file from before
    /// `winback_status` has no such column): the identity column is the tool's first column; a
    /// record that is not well-formed CSV is skipped. A file its manifest lists that is gone,
    /// or whose bytes differ from what the manifest recorded, is bad data (65).
    ///
    /// `history` is the exit window (docs/rules.md §10.10): the baseline first, then the other
    /// runs it covers, newest first; a value any of them held exits once.
    static func write(
        history: [BaselineFiles], type: DestinationType, list: String, tonight: TonightValues, asOf: String,
        into out: inout DestinationSplitter
    ) throws -> Int {
        let files = try history.flatMap { run in
            try Self.files(of: run, type: type, list: list).compactMap { rel, sha in
                try run.path(of: rel).map { ($0, sha) }
            }
        }
        func values(_ body: ([UInt8]) throws -> Void) throws {
            for (path, sha) in files { try read(path, firstColumn: type.firstColumn, expectedSHA256: sha, body) }
        }
        // An email is one value whatever its case, as the tools match it (docs/rules.md §6.3).
        let email = type.identityColumn == "email"
        let exits = try tonight.exits { body in try values { try body(email ? Self.folded($0) : $0) } }
        var rows = 0
        var i = 0
        var record = CSVRecord()
        try values { value in
            defer { i += 1 }
            guard exits(i, email ? Self.folded(value) : value) else { return }
            record.reset()
            record.field(verbatim: String(decoding: value, as: UTF8.self))
            for _ in 0..<(Stage.destinationColumns.count - 1) { record.empty() }
            record.field(asOf)
            record.field(exited)
            record.end()
            try out.write(record.bytes)
            rows += 1
        }
        return rows
    }

    /// `value` with its ASCII letters lowered: how an email is compared (docs/rules.md §6.3).
    static func folded(_ value: [UInt8]) -> [UInt8] { value.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 } }

    static func folded(_ value: String) -> String { String(decoding: folded(Array(value.utf8)), as: UTF8.self) }

    /// `winback_status` of tonight's rows and of the rows that left.
    static let eligible = "eligible"
    static let exited = "exited"

    /// Calls `value` with the identity value of every eligible row of the destination file at
    /// `path`, in order; then checks the bytes read against `expectedSHA256`.
    static func read(
        _ path: String, firstColumn: String, expectedSHA256: String, _ value: ([UInt8]) throws -> Void
    ) throws {
        let cursor = LineCursor(source: try PlainFileSource(path: path), chunkSize: 1 << 18, maxLineBytes: maxLineBytes)
        var hasher = SHA256()
        var record: [UInt8] = []
        var quoted = false
        var atFieldStart = true
        var justClosed = false
        let (quote, comma, newline) = (UInt8(ascii: "\""), UInt8(ascii: ","), UInt8(ascii: "\n"))
        var header: [String]?
        var identity = 0
        var status: Int?
        func take(_ bytes: [UInt8]) throws {
            var r = bytes
            if r.last == UInt8(ascii: "\n") { r.removeLast() }
            if r.last == UInt8(ascii: "\r") { r.removeLast() }
            guard let fields = SegmentRecords.split(r) else { return }  // not CSV: skipped
            guard header != nil else {
                let names = fields.map { String(decoding: $0, as: UTF8.self) }
                guard let i = names.firstIndex(of: firstColumn) else {
                    throw WinBackError(
                        .badData, "the baseline's destination file has no column '\(firstColumn)'", path: path)
                }
                header = names
                identity = i
                status = names.firstIndex(of: "winback_status")
                return
            }
            guard fields.count > identity else { return }
            if let status, fields.count > status, fields[status] != Array(eligible.utf8) { return }
            try value(fields[identity])
        }
        while let line = try cursor.next() {
            if cursor.cut {
                throw WinBackError(
                    .badData, "the baseline's destination file has a line longer than \(maxLineBytes) bytes",
                    path: path)
            }
            hasher.update(bufferPointer: line)
            record.append(contentsOf: line)
            if record.count > maxLineBytes {
                throw WinBackError(
                    .badData, "the baseline's destination file has a record longer than \(maxLineBytes) bytes",
                    path: path)
            }
            // A record goes on past a line end only inside a quoted field: a quote opens one at a
            // field's start alone, so a stray quote inside a field carries no row after it along.
            for b in line {
                if quoted {
                    quoted = b != quote  // a quote closes the field, or starts a doubled quote
                    justClosed = !quoted
                    atFieldStart = false
                } else if b == quote && (atFieldStart || justClosed) {
                    quoted = true  // opens a quoted field, or is the second quote of a doubled one
                    justClosed = false
                    atFieldStart = false
                } else {
                    justClosed = false
                    atFieldStart = b == comma || b == newline
                }
            }
            if !quoted {
                try take(record)
                record.removeAll(keepingCapacity: true)
                atFieldStart = true
                justClosed = false
            }
        }
        if !record.isEmpty { try take(record) }
        guard Hex.string(hasher.finalize()) == expectedSHA256 else {
            throw WinBackError(
                .badData,
                "the baseline's destination file differs from the one its manifest recorded (changed since it was "
                    + "published): remove that run or restore the file",
                path: path)
        }
    }
}

/// One row per identity value in a destination file set (docs/rules.md §10.10): of the rows of
/// a segment list holding the same value, the one whose offer ranks first (§3: HIGH priority,
/// then catalog order), then the earlier in the segment. A first pass over the list adds every
/// row (``add(_:rank:position:)``); ``finish()``; a second asks which rows stay
/// (``keeps(_:position:)``). In memory the best row of each value is kept in a table keyed by
/// the value; under a memory limit the rows are split on disk by the hash of the value, each
/// bucket decided in turn into a bitset of the rows that stay (§6.2).
final class FoldedValues {
    private enum Storage {
        case memory(IdentityIndex)
        case disk(String)
    }
    private let storage: Storage
    private var writers: [IntermediateWriter] = []
    private var marks: [UInt64] = []
    private var record: [UInt8] = []
    /// Rows added, and distinct values among them.
    private var added = 0
    private var distinct = 0
    /// One past the greatest position added: the bitset's size.
    private var positions = 0

    /// In memory, or with `folder` (made anew) on disk.
    init(folder: String?) throws {
        guard let folder else {
            storage = .memory(IdentityIndex(columns: 1))
            return
        }
        storage = .disk(folder)
        writers = try IdentityBuckets.writers(in: folder, named: "fold", for: "the destinations")
    }

    /// The rows left out because another row of the set holds their value.
    var folded: Int { added - distinct }

    /// A row's rank and position, as the table keeps them: better is smaller, compared as text.
    private static func key(rank: Int, position: Int) -> String {
        let r = String(min(max(rank, 0), 999_999_999_999))
        let p = String(max(position, 0))
        return String(repeating: "0", count: 12 - r.count) + r + ":" + String(repeating: "0", count: 20 - p.count) + p
    }

    private static func position(_ key: String) -> Int { Int(key.split(separator: ":").last ?? "") ?? -1 }

    /// Adds row `position` of the list (in order), holding `value`, its offer's rank `rank`.
    func add(_ value: String, rank: Int, position: Int) throws {
        added += 1
        positions = max(positions, position + 1)
        let entry = Self.key(rank: rank, position: position)
        switch storage {
        case .memory(let index):
            if let r = index.find(value) {
                guard entry < index.value(r, 0) else { return }
            } else {
                distinct += 1
            }
            var v = value
            var e = entry
            v.withUTF8 { key in
                e.withUTF8 { index.insert(key: UnsafeRawBufferPointer(key), values: [UnsafeRawBufferPointer($0)]) }
            }
        case .disk:
            var v = value
            var e = entry
            try v.withUTF8 { key in
                try e.withUTF8 { en in
                    record.removeAll(keepingCapacity: true)
                    let k = UnsafeRawBufferPointer(key)
                    IdentityIndex.appendRecord(key: k, values: [UnsafeRawBufferPointer(en)], to: &record)
                    try writers[IdentityBuckets.bucket(k)].write(record)
                }
            }
        }
    }

    /// After the last row: on disk, each bucket decided into the bitset of the rows that stay.
    func finish() throws {
        guard case .disk(let folder) = storage else { return }
        let written = try writers.map { try $0.finish() }
        writers = []
        marks = [UInt64](repeating: 0, count: (positions + 63) / 64)
        for b in 0..<IdentityBuckets.bucketCount {
            let path = folder + "/fold-\(b)"
            let best = IdentityIndex(columns: 1)
            try IntermediateReader(path: path, bytes: written[b].bytes, sha256: written[b].sha256).forEachRecord(
                columns: 1
            ) { key, values in
                if let r = best.find(key) {
                    guard String(decoding: values[0], as: UTF8.self) < best.value(r, 0) else { return }
                } else {
                    distinct += 1
                }
                best.insert(key: key, values: values)
            }
            // Every value's best row, marked.
            try IntermediateReader(path: path, bytes: written[b].bytes, sha256: written[b].sha256).forEachRecord(
                columns: 1
            ) { key, values in
                let entry = String(decoding: values[0], as: UTF8.self)
                guard let r = best.find(key), best.value(r, 0) == entry else { return }
                let i = Self.position(entry)
                if i >= 0 && i >> 6 < marks.count { marks[i >> 6] |= 1 << UInt64(i & 63) }
            }
            System.unlinkIfPresent(path)
        }
    }

    /// Whether row `position`, holding `value`, is the one its value keeps.
    func keeps(_ value: String, position: Int) -> Bool {
        switch storage {
        case .memory(let index):
            guard let r = index.find(value) else { return false }
            return Self.position(index.value(r, 0)) == position
        case .disk:
            return position >> 6 < marks.count && marks[position >> 6] & (1 << UInt64(position & 63)) != 0
        }
    }

    /// Removes the work folder, when on disk.
    func discard() {
        if case .disk(let folder) = storage { IdentityBuckets.removeFolder(folder) }
    }
}
