import Crypto
import Foundation
import WinBackHistory
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The rows of a destination file set that left since the baseline run (docs/rules.md §10.5):
/// every identity value of the baseline's files of the set that tonight's files lack, once, in
/// the baseline's order, written to `<audience>-exited-NNN.csv` with `winback_status` `exited`,
/// tonight's date and every other `winback_` column empty. Importing tonight's files and these,
/// in either order, leaves a tool whose segment is "winback_status is eligible" holding exactly
/// tonight's audience.
package enum DestinationExits {
    /// The longest line of a baseline's destination file read (a longer one is not a row this
    /// tool wrote).
    package static let maxLineBytes = 16 << 20

    /// The baseline's files of the set `destinations/<type>/<list>-NNN.csv`, in their order,
    /// as its manifest lists them (path relative to its folder, SHA-256).
    package static func files(of baseline: BaselineFiles, type: DestinationType, list: String) -> [(String, String)] {
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
    package static func lists(of baseline: BaselineFiles, type: DestinationType) -> Set<String> {
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
    package static func write(
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
            for _ in 0..<(Delivery.destinationColumns.count - 1) { record.empty() }
            record.field(asOf)
            record.field(exited)
            record.end()
            try out.write(record.bytes)
            rows += 1
        }
        return rows
    }

    /// `value` with its ASCII letters lowered: how an email is compared (docs/rules.md §6.3).
    package static func folded(_ value: [UInt8]) -> [UInt8] { value.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 } }

    package static func folded(_ value: String) -> String { String(decoding: folded(Array(value.utf8)), as: UTF8.self) }

    /// `winback_status` of tonight's rows and of the rows that left.
    package static let eligible = "eligible"
    package static let exited = "exited"

    /// Calls `value` with the identity value of every eligible row of the destination file at
    /// `path`, in order; then checks the bytes read against `expectedSHA256`.
    package static func read(
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
