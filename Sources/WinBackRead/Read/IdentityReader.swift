import Foundation
import WinBackModel
import WinBackS3
import WinBackSupport

/// The team's own ids for App Store customers (docs/rules.md §10.1), read from a CSV file with a
/// header (gzip allowed), keyed by originalTransactionId or appAccountToken.
public struct IdentityTable: Sendable {
    /// The header, in file order.
    public var columns: [String]
    /// The key column's position in ``columns``.
    public var keyColumn: Int
    /// Each key's fields, in ``columns`` order: the last row of a key wins. Keys that are
    /// appAccountTokens are lowercased (a token's case carries no meaning).
    public var rows: [String: [String]] = [:]
    /// Data rows read (well-formed or not), rows rejected, and rows whose key an earlier row had.
    public var lines = 0
    public var duplicates = 0
    public var rejects = RejectList()

    /// The position of `column` in the header, if the file has it.
    public func index(of column: String) -> Int? { columns.firstIndex(of: column) }

    /// The fields of the customer with this key (an originalTransactionId, or a token in any case).
    public func fields(for key: String, token: Bool) -> [String]? { rows[token ? key.lowercased() : key] }
}

public enum IdentityReader {
    /// Reads `path` (docs/rules.md §10.1): a header that names `key`'s column, then one row per
    /// customer. A row that is not valid CSV, has another number of fields than the header or an
    /// empty key is rejected like a transaction row. Fails with 66 when the file is missing, 65
    /// when its header lacks the key column.
    public static func read(
        path: String, key: IdentitiesSource.Key, inflater: Inflater = .zlib, limits: ReadLimits = .default
    ) throws -> IdentityTable {
        guard S3Location.isURI(path) || FileManager.default.fileExists(atPath: path) else {
            throw WinBackError(.noInput, "the identities file is missing", path: path)
        }
        let source = try openSource(path: path, inflater: inflater)
        var table = IdentityTable(columns: [], keyColumn: -1)
        table.rejects = RejectList(limit: limits.maxRejectsListed)
        let token = key == .appAccountToken
        var header = true
        try CSVRecordReader(source: source, maxRecordBytes: limits.maxLineBytes).forEachRecord(
            { fields, line, raw, malformed in
                if header {
                    guard malformed == nil else {
                        throw WinBackError(.badData, "the header row is not valid CSV: \(malformed!)", path: path)
                    }
                    table.columns = fields.map { String(decoding: $0, as: UTF8.self) }
                    guard let k = table.columns.firstIndex(of: key.rawValue) else {
                        throw WinBackError(
                            .badData,
                            "the header has no column '\(key.rawValue)' to join on (it has "
                                + table.columns.map { "'\($0)'" }.joined(separator: ", ") + ")", path: path)
                    }
                    table.keyColumn = k
                    header = false
                    return
                }
                table.lines += 1
                if let malformed {
                    table.rejects.add(Reject(file: path, line: line, reason: malformed, bytes: raw))
                    return
                }
                guard fields.count == table.columns.count else {
                    table.rejects.add(
                        Reject(
                            file: path, line: line,
                            reason: "expected \(table.columns.count) fields, found \(fields.count)", bytes: raw))
                    return
                }
                var values = fields.map { String(decoding: $0, as: UTF8.self) }
                if token { values[table.keyColumn] = values[table.keyColumn].lowercased() }
                let k = values[table.keyColumn]
                guard !k.isEmpty else {
                    table.rejects.add(
                        Reject(file: path, line: line, reason: "empty \(key.rawValue)", bytes: raw))
                    return
                }
                if table.rows.updateValue(values, forKey: k) != nil { table.duplicates += 1 }
            },
            tooLong: { line, first in
                table.lines += 1
                table.rejects.add(
                    Reject(
                        file: path, line: line,
                        reason: "longer than limits.maxLineBytes (\(limits.maxLineBytes) bytes)",
                        bytes: first))
            })
        if header { throw WinBackError(.badData, "the identities file is empty (no header row)", path: path) }
        table.rejects.normalize()
        return table
    }
}
