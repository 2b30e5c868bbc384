import Foundation
import WinBackSupport

/// Where a pipeline's `postgres:` block reads from (docs/rules.md §14.1): a table (with its
/// schema) or the user's own SELECT, one column of it (or, for identities, every column), and
/// optionally a cursor column that only grows. Names are identifiers, quoted where they are used
/// (``PostgresConnection/identifier(_:)``); the query is run as the user wrote it, inside a
/// read-only transaction.
public struct PostgresSource: Sendable, Hashable {
    public var connection: String
    public var schema: String?
    public var table: String?
    public var query: String?
    /// The column read; nil reads every column (identities: a CSV with its header).
    public var column: String?
    public var cursor: String?
    /// With a cursor: the most rows of one range, each range read by a thread of its own.
    public var rangeRows: Int
    /// The pipeline field it was given in (`transactions.postgres`), for messages.
    public var field: String

    /// Rows of a range when the pipeline file does not say.
    public static let defaultRangeRows = 250_000

    public init(
        connection: String, schema: String? = nil, table: String? = nil, query: String? = nil, column: String? = nil,
        cursor: String? = nil, rangeRows: Int = PostgresSource.defaultRangeRows, field: String
    ) {
        self.rangeRows = max(1, rangeRows)
        self.connection = connection
        self.schema = schema
        self.table = table
        self.query = query
        self.column = column
        self.cursor = cursor
        self.field = field
    }

    /// What inputs read from it are called (`postgres:app.notifications.signed_payload`): its
    /// names as given, never the connection string.
    public var label: String {
        // A query is named by the block it reads for: two blocks' queries are two inputs.
        let block = field.split(separator: ".").first.map(String.init) ?? field
        let from = table.map { (schema.map { $0 + "." } ?? "") + $0 } ?? (block + "-query")
        return "postgres:" + from + (column.map { "." + $0 } ?? "")
    }

    /// The rows read from: the quoted table, or the query as a subquery.
    var from: String {
        if let table {
            return (schema.map { PostgresConnection.identifier($0) + "." } ?? "") + PostgresConnection.identifier(table)
        }
        // On lines of its own, without a closing semicolon: a comment ending the query, or a
        // `;`, does not swallow the parenthesis.
        var q = (query ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        while q.hasSuffix(";") { q = String(q.dropLast()).trimmingCharacters(in: .whitespacesAndNewlines) }
        return "(\n" + q + "\n) AS winback_query"
    }

    /// The SELECT of the rows in `range` (all when nil): the column as text (jsonb printed on one
    /// line), in cursor order when there is a cursor.
    public func select(after: String?, through: String?) -> String {
        "SELECT " + (column.map { PostgresConnection.identifier($0) + "::text" } ?? "*") + " FROM " + from
            + range(after: after, through: through)
    }

    /// The WHERE and ORDER BY of the rows in a cursor range ("" without a cursor).
    func range(after: String?, through: String?) -> String {
        guard let cursor else { return "" }
        let c = PostgresConnection.identifier(cursor)
        var conditions: [String] = []
        if let after { conditions.append("\(c) > \(PostgresConnection.literal(after))") }
        if let through { conditions.append("\(c) <= \(PostgresConnection.literal(through))") }
        // No greatest value: the table had no row; the range reads none, even of rows added since.
        if through == nil { conditions.append("false") }
        return (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")) + " ORDER BY \(c)"
    }

    /// The cursor values of rows `numbers` (1 the first) of a cursor range, in its order.
    func cursorValues(_ numbers: [Int], after: String?, through: String?) -> String {
        let c = PostgresConnection.identifier(cursor ?? "")
        return "SELECT n::text, v FROM (SELECT row_number() OVER (ORDER BY \(c)) AS n, \(c)::text AS v FROM \(from)"
            + range(after: after, through: through).replacingOccurrences(of: " ORDER BY \(c)", with: "")
            + ") AS winback_rows WHERE n = ANY($1::bigint[])"
    }

    /// The ranges of the rows above `after` now (docs/rules.md §14.1), in one read-only
    /// snapshot: the greatest cursor value (nil: no row above), and the values that end the
    /// ranges before it, every ``rangeRows``-th row in cursor order (each range read by a thread
    /// of its own).
    public func plan(_ c: PostgresConnection, after: String?) throws -> (through: String?, ends: [String]) {
        guard let cursor else { return (nil, []) }
        let q = PostgresConnection.identifier(cursor)
        try c.execute("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        defer { _ = try? c.execute("ROLLBACK") }
        let above = after.map { " WHERE \(q) > \(PostgresConnection.literal($0))" } ?? ""
        let greatest = try c.query(
            "SELECT max(\(q))::text FROM \(from)\(above)", what: "cannot read the greatest \(cursor) of \(label)")
        guard let through = greatest.first?.first ?? nil else { return (nil, []) }
        // Every rangeRows-th row's value, in the cursor's own order, below the greatest.
        let ends = try c.query(
            "SELECT DISTINCT ON (c) c::text AS v FROM (SELECT \(q) AS c, row_number() OVER (ORDER BY \(q)) AS n "
                + "FROM \(from)\(above)) AS winback_rows WHERE n % \(rangeRows) = 0 AND c < "
                + "(SELECT max(\(q)) FROM \(from)\(above)) ORDER BY c",
            what: "cannot divide the rows of \(label) into ranges")
        return (through, ends.compactMap { $0.first ?? nil })
    }

    /// Checks, before any row is read, that the rows can be read (docs/rules.md §14.1): the
    /// server reachable, the table, column and cursor there and readable (the statement run
    /// with no row asked for).
    public func check(seconds: Double) throws {
        let c = try PostgresConnection(connection, field: field + ".connection", seconds: seconds)
        try c.execute("BEGIN TRANSACTION READ ONLY")
        defer { _ = try? c.execute("ROLLBACK") }
        try c.execute(
            select(after: nil, through: nil) + " LIMIT 0", what: "cannot read \(label) (\(field))")
    }
}

/// The rows of a ``PostgresSource`` (in a cursor range) as the bytes of a file: one line a row.
///
/// Read with `COPY … TO STDOUT` in one read-only, repeatable-read transaction, a row at a time
/// (never the whole result). A column's text is decoded from COPY's escapes; a line break inside
/// a value becomes a space, so one row is always one line (a JSON value's line breaks are
/// whitespace; a signed row with one is a bad row, rejected as a file's line). A NULL is the
/// line `null`, rejected as a row that is no transaction. Identities (every column) come as CSV
/// with its header, as their file would.
public final class PostgresRowStream {
    public let label: String
    private let connection: PostgresConnection
    private var pending: [UInt8] = []
    private var offset = 0
    private var ended = false
    private let csv: Bool
    private let source: PostgresSource
    private let after: String?
    private let through: String?
    public private(set) var rows = 0

    public init(_ source: PostgresSource, after: String?, through: String?, seconds: Double) throws {
        label = source.label
        self.source = source
        self.after = after
        self.through = through
        connection = try PostgresConnection(source.connection, field: source.field + ".connection", seconds: seconds)
        csv = source.column == nil
        try connection.execute("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        let select = source.select(after: after, through: through)
        let copy = "COPY (" + select + ") TO STDOUT" + (csv ? " WITH (FORMAT csv, HEADER true)" : "")
        try connection.startCopyOut(copy, what: "cannot read \(label) (\(source.field))")
    }

    /// Fills `buffer` from the front; returns how many bytes were written, 0 at the end of the
    /// rows.
    public func read(into buffer: inout MutableSpan<UInt8>) throws -> Int {
        var written = 0
        while written < buffer.count {
            if offset == pending.count {
                if ended { break }
                pending.removeAll(keepingCapacity: true)
                offset = 0
                let more = try connection.nextCopyRow("the read of \(label) failed") { row in
                    if csv { pending.append(contentsOf: row) } else { Self.decode(row, into: &pending) }
                }
                if !more {
                    // The transaction stays open: ``cursorValues(of:)`` reads the same snapshot.
                    ended = true
                    break
                }
                rows += 1
                continue
            }
            let n = min(buffer.count - written, pending.count - offset)
            for k in 0..<n { buffer[written + k] = pending[offset + k] }
            offset += n
            written += n
        }
        return written
    }

    /// What names rows `numbers` (1 the first, in the order read) once every row is read: the
    /// cursor and its value (`id 1042`), read from the same snapshot (docs/rules.md §14.1). Empty
    /// without a cursor, or when the server cannot say (the rows keep their numbers).
    public func cursorValues(of numbers: [Int]) -> [Int: String] {
        guard ended, let cursor = source.cursor, !numbers.isEmpty else { return [:] }
        let list = "{" + numbers.map(String.init).joined(separator: ",") + "}"
        guard
            let found = try? connection.query(
                source.cursorValues(numbers, after: after, through: through), [list],
                what: "cannot name the rejected rows of \(label)")
        else { return [:] }
        var out: [Int: String] = [:]
        for row in found where row.count == 2 {
            if let n = row[0].flatMap({ Int($0) }), let v = row[1] { out[n] = "\(cursor) \(v)" }
        }
        return out
    }

    /// One row of COPY's text format (`\`-escapes, `\N` for NULL, a newline at its end) as one
    /// line of the value: escapes decoded, line breaks inside it made spaces.
    public static func decode<Row: RandomAccessCollection<UInt8>>(_ row: Row, into out: inout [UInt8])
    where Row.Index == Int {
        precondition(row.startIndex == 0, "a row's bytes from their start")
        var end = row.count
        if end > 0 && row[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        if end == 2 && row[0] == UInt8(ascii: "\\") && row[1] == UInt8(ascii: "N") {
            out.append(contentsOf: Array("null\n".utf8))
            return
        }
        var i = 0
        while i < end {
            let b = row[i]
            if b == UInt8(ascii: "\\") && i + 1 < end {
                let e = row[i + 1]
                i += 2
                switch e {
                case UInt8(ascii: "n"), UInt8(ascii: "r"): out.append(UInt8(ascii: " "))
                case UInt8(ascii: "t"): out.append(9)
                case UInt8(ascii: "b"): out.append(8)
                case UInt8(ascii: "f"): out.append(12)
                case UInt8(ascii: "v"): out.append(11)
                default: out.append(e)
                }
                continue
            }
            out.append(b == UInt8(ascii: "\n") || b == UInt8(ascii: "\r") ? UInt8(ascii: " ") : b)
            i += 1
        }
        out.append(UInt8(ascii: "\n"))
    }
}
