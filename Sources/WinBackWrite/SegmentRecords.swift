import Crypto
import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport

/// One row of a segment CSV as the changes need it (docs/rules.md §10.5): the customer and the
/// row's offer, unescaped.
package struct SegmentKey: Equatable, Hashable, Sendable {
    package var group: [UInt8]
    package var original: [UInt8]
    package var offer: [UInt8]

    package init(group: [UInt8], original: [UInt8], offer: [UInt8]) {
        self.group = group
        self.original = original
        self.offer = offer
    }

    /// The customer order of the segment files (docs/rules.md §4.1): bytewise by group, then
    /// originalTransactionId. Negative, zero or positive.
    package static func compare(_ a: SegmentKey, _ b: SegmentKey) -> Int {
        SegmentRow.compare(group: a.group, a.original, group: b.group, b.original)
    }
}

/// Reads a segment CSV (docs/rules.md §4.1) one record at a time, for the merge-join of two of
/// them: RFC 4180 records (a quoted field may hold line breaks), the header checked, every row's
/// field count checked, and rows checked to be in customer order, strictly (a customer once).
/// The bytes read are hashed (unless told not to: tonight's own files), so that a published file
/// can be checked against its manifest once read (``sha256()``).
package final class SegmentRecords {
    package let path: String
    private let cursor: LineCursor
    private var hasher: SHA256?
    private var record: [UInt8] = []
    package private(set) var rows = 0
    private let maxLineBytes: Int

    /// Where the fields the changes need are (``SegmentWriter/columns``).
    package static let groupColumn = 0
    package static let originalColumn = 1
    package static let offerColumn = 9
    package static let keyColumns: Set<Int> = [groupColumn, originalColumn, offerColumn]

    /// Opens `path` and checks its header (`columns`: a segment's, unless said): a file that is
    /// not of that form is bad data (65).
    ///
    /// A line or record longer than `maxLineBytes` (docs/rules.md §6.1's line limit, §6.3) is
    /// bad data (65) at once, never held whole: no segment row is near it.
    package init(
        path: String, columns: [String] = SegmentWriter.columns, hashed: Bool = true,
        maxLineBytes: Int = ReadLimits.default.maxLineBytes
    ) throws {
        self.path = path
        self.maxLineBytes = maxLineBytes
        hasher = hashed ? SHA256() : nil
        cursor = LineCursor(
            source: try PlainFileSource(path: path, hashed: false), chunkSize: 1 << 18, maxLineBytes: maxLineBytes)
        guard let header = try nextRecord() else {
            throw WinBackError(.badData, "empty file: it has no header", path: path)
        }
        guard let fields = SegmentRecords.split(header),
            fields.map({ String(decoding: $0, as: UTF8.self) }) == columns
        else {
            throw WinBackError(
                .badData, "unexpected header: not \(columns.joined(separator: ",")) (docs/rules.md §10.5)",
                path: path)
        }
    }

    /// The fields of the next record, unquoted, nil at the end; a record that is not
    /// well-formed CSV is bad data (65).
    package func nextFields(only wanted: Set<Int>? = nil, first: UnsafeRawBufferPointer? = nil) throws -> [[UInt8]]? {
        guard let bytes = try nextRecord(first: first) else { return nil }
        rows += 1
        guard let fields = SegmentRecords.split(bytes, only: wanted) else {
            throw WinBackError(.badData, "row \(rows) is not well-formed CSV", path: path)
        }
        return fields
    }

    /// The row ``advance()`` read last, and the one before it (for the order check): their
    /// arrays are refilled in place, so a row read costs no allocation unless a caller kept it.
    package private(set) var current = SegmentKey(group: [], original: [], offer: [])
    private var previous = SegmentKey(group: [], original: [], offer: [])

    /// The next row, nil at the end (see ``advance()``).
    package func next() throws -> SegmentKey? { try advance() ? current : nil }

    /// Reads the next row into ``current``; false at the end. A row that is not well-formed, or
    /// not after the one before it in customer order, is bad data (65) naming the file and the
    /// row.
    package func advance() throws -> Bool {
        // Only the fields the changes need are copied out. A line without a quote (nearly every
        // row) is a whole record, split where it lies.
        guard let line = try nextLine() else { return false }
        hasher?.update(bufferPointer: line)
        swap(&previous, &current)
        if line.isEmpty || memchr(line.baseAddress!, 0x22, line.count) == nil {
            rows += 1
            guard SegmentRecords.fill(&current, unquoted: line) else {
                throw WinBackError(
                    .badData, "row \(rows) of a segment file is not \(SegmentWriter.columns.count) CSV fields",
                    path: path)
            }
        } else {
            guard let fields = try nextFields(only: SegmentRecords.keyColumns, first: line) else { return false }
            guard fields.count == SegmentWriter.columns.count else {
                throw WinBackError(
                    .badData, "row \(rows) of a segment file is not \(SegmentWriter.columns.count) CSV fields",
                    path: path)
            }
            current = SegmentKey(
                group: fields[SegmentRecords.groupColumn], original: fields[SegmentRecords.originalColumn],
                offer: fields[SegmentRecords.offerColumn])
        }
        if rows > 1, SegmentKey.compare(previous, current) >= 0 {
            throw WinBackError(
                .badData,
                "row \(rows) of a segment file is not after the row before it in customer order "
                    + "(docs/rules.md §4.1)", path: path)
        }
        return true
    }

    /// The next line, its `\n` kept; a line longer than ``maxLineBytes`` is bad data (65).
    private func nextLine() throws -> UnsafeRawBufferPointer? {
        guard let line = try cursor.next() else { return nil }
        if cursor.cut { throw tooLong("line") }
        return line
    }

    private func tooLong(_ what: String) -> WinBackError {
        WinBackError(
            .badData,
            "a \(what) longer than \(maxLineBytes) bytes (limits.maxLineBytes) after \(rows) rows: not a segment "
                + "file this tool wrote (docs/rules.md §6.3)", path: path)
    }

    /// The file's SHA-256 (hex), once every row was read; empty when it was not hashed.
    package func sha256() -> String { hasher.map { Hex.string($0.finalize()) } ?? "" }

    /// Fills `key` from a record that is one line without a quote (its `\n` kept, or none at
    /// the end): fields split at each comma; false unless it has a segment's number of fields.
    package static func fill(_ key: inout SegmentKey, unquoted line: UnsafeRawBufferPointer) -> Bool {
        var n = line.count
        if n > 0 && line[n - 1] == UInt8(ascii: "\n") { n -= 1 }
        var field = 0
        var i = 0
        func set(_ a: inout [UInt8], _ from: Int, _ to: Int) {
            a.removeAll(keepingCapacity: true)
            a.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[from..<to]))
        }
        while true {
            var end = n
            if i < n, let comma = memchr(line.baseAddress! + i, 0x2C, n - i) {
                end = UnsafeRawPointer(line.baseAddress!).distance(to: UnsafeRawPointer(comma))
            }
            switch field {
            case groupColumn: set(&key.group, i, end)
            case originalColumn: set(&key.original, i, end)
            case offerColumn: set(&key.offer, i, end)
            default: break
            }
            field += 1
            if end == n { break }
            i = end + 1
        }
        return field == SegmentWriter.columns.count
    }

    /// One record's bytes, its lines joined while a quoted field is open, without the last `\n`;
    /// `first`: its first line, already read (and hashed).
    private func nextRecord(first: UnsafeRawBufferPointer? = nil) throws -> [UInt8]? {
        record.removeAll(keepingCapacity: true)
        var quotes = 0
        var any = false
        var pending = first
        while let line = try pending ?? nextLine() {
            if pending == nil { hasher?.update(bufferPointer: line) }
            pending = nil
            any = true
            guard record.count + line.count <= maxLineBytes + 1 else { throw tooLong("record") }
            record.append(contentsOf: line)
            for b in line where b == UInt8(ascii: "\"") { quotes += 1 }
            if quotes % 2 == 0 { break }
        }
        guard any else { return nil }
        if record.last == UInt8(ascii: "\n") { record.removeLast() }
        return record
    }

    /// The fields of one record, unquoted (RFC 4180); nil when a quote is misplaced. With
    /// `wanted`, the other fields are checked and counted but given empty.
    package static func split(_ r: [UInt8], only wanted: Set<Int>? = nil) -> [[UInt8]]? {
        var fields: [[UInt8]] = []
        var field: [UInt8] = []
        var i = 0
        let quote = UInt8(ascii: "\"")
        let comma = UInt8(ascii: ",")
        while true {
            field.removeAll(keepingCapacity: true)
            if i < r.count, r[i] == quote {
                i += 1
                while true {
                    guard i < r.count else { return nil }
                    if r[i] == quote {
                        if i + 1 < r.count, r[i + 1] == quote {
                            field.append(quote)
                            i += 2
                            continue
                        }
                        i += 1
                        break
                    }
                    field.append(r[i])
                    i += 1
                }
                guard i == r.count || r[i] == comma else { return nil }
            } else {
                while i < r.count, r[i] != comma {
                    if r[i] == quote { return nil }
                    field.append(r[i])
                    i += 1
                }
            }
            fields.append(wanted.map { $0.contains(fields.count) } ?? true ? field : [])
            if i == r.count { return fields }
            i += 1  // the comma
        }
    }
}
