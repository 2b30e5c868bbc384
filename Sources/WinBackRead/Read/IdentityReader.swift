import Foundation
import WinBackModel
import WinBackS3
import WinBackSupport

/// What an identity value may hold (docs/rules.md §10.1, §6.2): values reach the destinations
/// exactly as written, so a value that a tool or a spreadsheet would misread is refused, never
/// rewritten.
package enum IdentityValues {
    /// The longest value, in bytes.
    package static let maxBytes = 512

    /// Why `v` cannot be an identity value, or nil: longer than ``maxBytes``, a control byte
    /// (U+0000–U+001F, U+007F), bytes that are not UTF-8, or the start of a spreadsheet formula (`=`, `@`, or `+`/`-` not
    /// followed by a number `[0-9 ().-]*`, so `+14155550100` stays a value).
    package static func problem(_ v: UnsafeRawBufferPointer) -> String? {
        if v.count > maxBytes { return "longer than \(maxBytes) bytes" }
        var ascii = true
        for b in v {
            if b < 0x20 || b == 0x7F {
                return "holds the control byte \\x" + String(b, radix: 16, uppercase: true).leftPadded(2)
            }
            if b >= 0x80 { ascii = false }
        }
        // A value that is not UTF-8 could only reach a tool changed (docs/rules.md §6.2).
        if !ascii && String(validating: v, as: UTF8.self) == nil { return "is not UTF-8" }
        guard let first = v.first else { return nil }
        switch first {
        case UInt8(ascii: "="), UInt8(ascii: "@"):
            return "starts a spreadsheet formula ('\(Character(Unicode.Scalar(first)))')"
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            for b in v.dropFirst() where !isNumberByte(b) {
                return "starts a spreadsheet formula ('\(Character(Unicode.Scalar(first)))' not followed by a number)"
            }
            return nil
        default:
            return nil
        }
    }

    @inline(__always)
    private static func isNumberByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || b == 0x20 || b == 0x28 || b == 0x29 || b == 0x2E || b == 0x2D
    }
}

extension String {
    fileprivate func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// What reading an identities file found, besides its rows (docs/rules.md §10.1).
public struct IdentityScan: Sendable {
    /// The columns asked for that the header has, in the order asked (nil: absent).
    public var positions: [Int?]
    /// Data rows read (well-formed or not).
    public var lines = 0
    public var rejects = RejectList()
}

/// The team's own ids for App Store customers (docs/rules.md §10.1), read from a CSV file with a
/// header (gzip allowed), keyed by originalTransactionId or appAccountToken; only the columns a
/// run uses are kept, compactly (``IdentityIndex``).
public struct IdentityTable: @unchecked Sendable {
    /// The columns kept, in the order asked (every header column when none was asked).
    public var columns: [String]
    /// The columns asked for that the file lacks.
    public var missing: [String]
    /// The key column's position in the file's header.
    public var keyColumn: Int
    package var index: IdentityIndex
    /// Data rows read (well-formed or not), rows rejected, and rows whose key an earlier row had.
    public var lines = 0
    public var duplicates: Int { index.replaced }
    public var rejects = RejectList()

    /// Distinct keys kept.
    public var count: Int { index.count }

    /// The position of `column` among ``columns``, if kept.
    public func index(of column: String) -> Int? { columns.firstIndex(of: column) }

    /// The kept values of the customer with this key (an originalTransactionId, or a token in
    /// any case).
    public func fields(for key: String, token: Bool) -> [String]? {
        let k = token ? IdentityReader.lowercasedASCII(key) : key
        return index.find(k).map { index.values($0) }
    }
}

public enum IdentityReader {
    /// The most columns an identities file's header may have (65 past it).
    public static let maxColumns = 1024

    /// Reads `path` (docs/rules.md §10.1) into a table of the `columns` a run uses (nil: every
    /// column of the header).
    public static func read(
        path: String, key: IdentitiesSource.Key, columns: [String]? = nil, inflater: Inflater = .zlib,
        limits: ReadLimits = .default
    ) throws -> IdentityTable {
        var index: IdentityIndex?
        var names: [String] = []
        var keyColumn = -1
        let scan = try self.scan(
            path: path, key: key, columns: columns, inflater: inflater, limits: limits,
            header: { header, k in
                names = columns ?? header
                keyColumn = k
            },
            row: { k, values in
                if index == nil { index = IdentityIndex(columns: values.count) }
                index!.insert(key: k, values: values)
            })
        let kept = zip(names, scan.positions).compactMap { $1 == nil ? nil : $0 }
        return IdentityTable(
            columns: kept, missing: zip(names, scan.positions).compactMap { $1 == nil ? $0 : nil },
            keyColumn: keyColumn, index: index ?? IdentityIndex(columns: kept.count), lines: scan.lines,
            rejects: scan.rejects)
    }

    /// Streams `path`: a header that names `key`'s column, then one row per customer. Each valid
    /// row is handed to `row` as its key (lowercased for tokens) and the values of the asked
    /// `columns` the header has (all of them when nil), in that order, valid during the call
    /// only. A row that is not valid CSV, has another number of fields than the header, an empty
    /// key or a value ``IdentityValues`` refuses, is rejected like a transaction row. Fails with
    /// 66 when the file is missing, 65 when it is empty or its header lacks the key column.
    public static func scan(
        path: String, key: IdentitiesSource.Key, columns: [String]?, inflater: Inflater = .zlib,
        limits: ReadLimits = .default, header: ([String], Int) -> Void = { _, _ in },
        row: (UnsafeRawBufferPointer, [UnsafeRawBufferPointer]) throws -> Void
    ) throws -> IdentityScan {
        guard InputStores.exists(path) else {
            throw WinBackError(.noInput, "the identities file is missing", path: path)
        }
        let source = try openSource(path: path, inflater: inflater)
        var scan = IdentityScan(positions: [])
        scan.rejects = RejectList(limit: limits.maxRejectsListed)
        let token = key == .appAccountToken
        var inHeader = true
        var width = 0
        var keyColumn = 0
        var values: [UnsafeRawBufferPointer] = []
        var lowered: [UInt8] = []
        func reject(_ line: Int, _ reason: String, _ raw: UnsafeRawBufferPointer) {
            scan.rejects.add(
                Reject(
                    file: path, line: line, reason: reason,
                    bytes: UnsafeRawBufferPointer(rebasing: raw.prefix(LineCursor.excerptBytes))))
        }
        let reader = CSVRecordReader(source: source, maxRecordBytes: limits.maxLineBytes)
        reader.maxFields = maxColumns
        var maxRecordBytes = limits.maxLineBytes
        try reader.forEachRecord(
            { fields, line, raw, malformed in
                if inHeader {
                    if let malformed { throw headerProblem(malformed, fields: fields.count, path: path) }
                    let names = fields.map { String(decoding: $0, as: UTF8.self) }
                    guard let k = names.firstIndex(where: { IdentitiesSource.sameColumn($0, key.rawValue) }) else {
                        let shown = names.prefix(20).map { "'\($0)'" }.joined(separator: ", ")
                        throw WinBackError(
                            .badData,
                            "the header has no column '\(key.rawValue)' to join on (it has "
                                + shown + (names.count > 20 ? ", … \(names.count) columns in all" : "") + ")",
                            path: path)
                    }
                    keyColumn = k
                    width = names.count
                    // Headers as teams write them: `Email` is `email` (docs/rules.md §10.10).
                    scan.positions = (columns ?? names).map { c in
                        names.firstIndex(of: c) ?? names.firstIndex { IdentitiesSource.sameColumn($0, c) }
                    }
                    header(names, k)
                    inHeader = false
                    // No valid row is longer than its values at their longest, each quoted with
                    // every byte a doubled quote: a longer one is rejected unread, and a row of
                    // far more fields than the header is not split past a few more
                    // (docs/rules.md §6.2).
                    maxRecordBytes = min(limits.maxLineBytes, width * (2 * IdentityValues.maxBytes + 3) + 2)
                    reader.maxRecordBytes = maxRecordBytes
                    reader.maxFields = width + 16
                    return
                }
                scan.lines += 1
                if let malformed { return reject(line, malformed, raw) }
                guard fields.count == width else {
                    return reject(line, "expected \(width) fields, found \(fields.count)", raw)
                }
                for (i, f) in fields.enumerated() {
                    if let why = IdentityValues.problem(f) {
                        return reject(line, "field \(i + 1): \(why)", raw)
                    }
                }
                let k = fields[keyColumn]
                guard !k.isEmpty else { return reject(line, "empty \(key.rawValue)", raw) }
                values.removeAll(keepingCapacity: true)
                for p in scan.positions {
                    if let p { values.append(fields[p]) }
                }
                if token {
                    lowered.removeAll(keepingCapacity: true)
                    lowered.append(contentsOf: k)
                    lowercaseASCII(&lowered)
                    try lowered.withUnsafeBytes { try row($0, values) }
                } else {
                    try row(k, values)
                }
            },
            tooLong: { line, first in
                scan.lines += 1
                reject(
                    line,
                    maxRecordBytes < limits.maxLineBytes
                        ? "longer than any valid identity row of \(width) fields (\(maxRecordBytes) bytes)"
                        : "longer than limits.maxLineBytes (\(limits.maxLineBytes) bytes)", first)
            })
        if inHeader { throw WinBackError(.badData, "the identities file is empty (no header row)", path: path) }
        scan.rejects.normalize()
        return scan
    }

    /// The header of `path`: its column names, read without reading the rows (a configuration
    /// check before a run reads anything, docs/rules.md §10.7). 66 when the file is missing,
    /// 65 when it is empty or its header is not CSV.
    public static func header(path: String, inflater: Inflater = .zlib) throws -> [String] {
        guard InputStores.exists(path) else {
            throw WinBackError(.noInput, "the identities file is missing", path: path)
        }
        let reader = CSVRecordReader(source: try openSource(path: path, inflater: inflater), chunkSize: 64 << 10)
        reader.maxFields = maxColumns
        var names: [String]?
        struct Done: Error {}
        do {
            try reader.forEachRecord { fields, _, _, malformed in
                if let malformed { throw headerProblem(malformed, fields: fields.count, path: path) }
                names = fields.map { String(decoding: $0, as: UTF8.self) }
                throw Done()
            }
        } catch is Done {}
        guard let names else {
            throw WinBackError(.badData, "the identities file is empty (no header row)", path: path)
        }
        return names
    }

    /// The keys (originalTransactionIds, or appAccountTokens lowercased) of every valid row of
    /// `path` holding `value` in any column, in file order, each once: `explain --customer`
    /// given an email or the team's user id (docs/rules.md §10.7).
    public static func keys(
        matching value: String, path: String, key: IdentitiesSource.Key, inflater: Inflater = .zlib,
        limits: ReadLimits = .default
    ) throws -> [String] {
        try matches(value, path: path, key: key, inflater: inflater, limits: limits).map(\.key)
    }

    /// ``keys(matching:path:key:inflater:limits:)``, each with whether a later row of the same
    /// key left `value` out: superseded, the run's destinations use that later row's values
    /// (docs/rules.md §10.1, §6.3), which `explain` says.
    public static func matches(
        _ value: String, path: String, key: IdentitiesSource.Key, inflater: Inflater = .zlib,
        limits: ReadLimits = .default
    ) throws -> [(key: String, superseded: Bool)] {
        // An email is compared without regard to ASCII case (docs/rules.md §10.10); other values
        // exactly.
        let email = value.contains("@")
        var wanted = Array(value.utf8)
        if email { lowercaseASCII(&wanted) }
        func same(_ v: UnsafeRawBufferPointer) -> Bool {
            guard v.count == wanted.count else { return false }
            guard email else { return v.elementsEqual(wanted) }
            return zip(v, wanted).allSatisfy { ($0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0) == $1 }
        }
        var found: [String] = []
        var lastHolds: [String: Bool] = [:]
        _ = try scan(path: path, key: key, columns: nil, inflater: inflater, limits: limits) { k, values in
            let holds = values.contains(where: same)
            guard holds || !lastHolds.isEmpty else { return }
            let s = String(decoding: k, as: UTF8.self)
            if holds && lastHolds[s] == nil { found.append(s) }
            if holds || lastHolds[s] != nil { lastHolds[s] = holds }
        }
        return found.map { ($0, lastHolds[$0] == false) }
    }

    /// Why a header row cannot be read (65): too many columns, or not CSV.
    static func headerProblem(_ malformed: String, fields: Int, path: String) -> WinBackError {
        WinBackError(
            .badData,
            fields >= maxColumns
                ? "the header has more than \(maxColumns) columns, more than any identities file needs"
                : "the header row is not valid CSV: \(malformed)", path: path)
    }

    /// ASCII letters lowered: an appAccountToken is a UUID, whose case carries no meaning.
    static func lowercaseASCII(_ b: inout [UInt8]) {
        for i in b.indices where b[i] >= 0x41 && b[i] <= 0x5A { b[i] |= 0x20 }
    }

    /// `s` with its ASCII letters lowered.
    package static func lowercasedASCII(_ s: String) -> String {
        var b = Array(s.utf8)
        lowercaseASCII(&b)
        return String(decoding: b, as: UTF8.self)
    }
}
