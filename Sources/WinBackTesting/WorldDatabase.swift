import Foundation
import WinBackModel
import WinBackPostgres
import WinBackRead
import WinBackSupport

/// `winback generate --postgres`: a generated world loaded into PostgreSQL as teams keep what
/// Apple sends (docs/rules.md §14), and a pipeline file that reads it there.
///
/// In `<schema>`: `transactions (id bigserial, payload)` and `renewal_info (id bigserial,
/// payload)`, one line of the world's files a row (`text` for signed lines, `jsonb` for decoded
/// ones), and `identities` with the identities file's columns. `postgres-pipeline.yaml` reads
/// them (transactions by the cursor `id`) and writes the audience to `<schema>.audience`.
public enum WorldDatabase {
    public struct Loaded: Sendable, Equatable {
        public var transactions = 0
        public var renewals = 0
        public var identities = 0
    }

    public static let pipelineName = "postgres-pipeline.yaml"

    /// Loads the world generated in `folder` (its `pipeline.yaml`'s files) into `schema`, in one
    /// transaction; a table of the schema already there is 78 (nothing is dropped).
    public static func load(folder: String, format: InputFormat, connection: String, schema: String) throws -> Loaded {
        guard format == .appstoreSigned || format == .appstoreNDJSON else {
            throw WinBackError(
                .usage,
                "--postgres loads the App Store's forms (appstore-signed, appstore-ndjson), not \(format.rawValue)")
        }
        let c = try PostgresConnection(connection, field: "--postgres", seconds: 3600)
        let s = PostgresConnection.identifier(schema)
        try c.execute("BEGIN")
        var committed = false
        defer { if !committed { _ = try? c.execute("ROLLBACK") } }
        try c.execute("CREATE SCHEMA IF NOT EXISTS \(s)", what: "cannot make the schema \(schema)")
        for table in ["transactions", "renewal_info", "identities"] {
            let found = try c.query("SELECT to_regclass($1)::text", ["\(s).\(PostgresConnection.identifier(table))"])
            if (found.first?.first ?? nil) != nil {
                throw WinBackError(
                    .configuration,
                    "\(schema).\(table) is there already: give another --postgres-schema, or drop it first")
            }
        }
        let type = format == .appstoreSigned ? "text" : "jsonb"
        var loaded = Loaded()
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).sorted(by: FileName.precedes)
        for (table, names) in [
            ("transactions", files.filter { $0.hasPrefix("transactions-") }),
            ("renewal_info", ["renewal-info.jsonl.gz"]),
        ] {
            try c.execute("CREATE TABLE \(s).\(table) (id bigserial PRIMARY KEY, payload \(type) NOT NULL)")
            var rows = 0
            try c.copyIn("COPY \(s).\(table) (payload) FROM STDIN", what: "cannot load \(schema).\(table)") { send in
                for name in names where FileManager.default.fileExists(atPath: folder + "/" + name) {
                    rows += try copyLines(folder + "/" + name, send)
                }
            }
            if table == "transactions" { loaded.transactions = rows } else { loaded.renewals = rows }
        }
        let identities = folder + "/identities.csv.gz"
        let header = try IdentityReader.header(path: identities, inflater: .zlib)
        let columns = header.map { PostgresConnection.identifier($0) + " text" }.joined(separator: ", ")
        try c.execute("CREATE TABLE \(s).identities (\(columns))")
        try c.copyIn(
            "COPY \(s).identities FROM STDIN WITH (FORMAT csv, HEADER true)", what: "cannot load \(schema).identities"
        ) { send in
            let source = try openSource(path: identities)
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = try source.read(into: &chunk)
                if n == 0 { break }
                try send(chunk.span.extracting(0..<n))
                loaded.identities += chunk[0..<n].filter { $0 == 10 }.count
            }
        }
        loaded.identities = max(0, loaded.identities - 1)
        try c.execute("COMMIT")
        committed = true
        try pipeline(folder: folder, connection: connection, schema: schema)
        return loaded
    }

    /// Sends the lines of `path` (gzip or plain) to a COPY in text format: one row each, its
    /// `\`, tab and CR escaped. Returns the rows.
    static func copyLines(_ path: String, _ send: (Span<UInt8>) throws -> Void) throws -> Int {
        let source = try openSource(path: path)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var out: [UInt8] = []
        var rows = 0
        var last: UInt8 = 10
        while true {
            let n = try source.read(into: &chunk)
            if n == 0 { break }
            out.removeAll(keepingCapacity: true)
            for b in chunk[0..<n] {
                switch b {
                case 92: out += [92, 92]
                case 9: out += [92, UInt8(ascii: "t")]
                case 13: out += [92, UInt8(ascii: "r")]
                case 10:
                    rows += 1
                    out.append(10)
                default: out.append(b)
                }
                last = b
            }
            try send(out.span)
        }
        if last != 10 {
            rows += 1
            try send([UInt8(10)].span)
        }
        return rows
    }

    /// `postgres-pipeline.yaml` beside the world's `pipeline.yaml`: the same pipeline, reading the
    /// tables and writing the audience to `<schema>.audience`, its output in `out-postgres`.
    static func pipeline(folder: String, connection: String, schema: String) throws {
        var text = try String(contentsOfFile: folder + "/pipeline.yaml", encoding: .utf8)
        let conn =
            "\"" + connection.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            + "\""
        func block(_ indent: String, _ lines: [String]) -> String {
            lines.map { indent + $0 }.joined(separator: "\n")
        }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for i in lines.indices {
            if lines[i].hasPrefix("  paths: [\"transactions-") {
                lines[i] = block(
                    "  ",
                    [
                        "postgres:                  # one line of the export a row (docs/rules.md §14.1)",
                        "  connection: \(conn)", "  schema: \(schema)", "  table: transactions", "  column: payload",
                        "  cursor: id               # rows above the greatest id read are new",
                    ])
            } else if lines[i].hasPrefix("renewalInfo: ") {
                lines[i] =
                    "renewalInfo:\n"
                    + block(
                        "  ",
                        [
                            "postgres:", "  connection: \(conn)", "  schema: \(schema)", "  table: renewal_info",
                            "  column: payload",
                        ])
            } else if lines[i].hasPrefix("  path: identities.csv.gz") {
                lines[i] = block(
                    "  ", ["postgres:", "  connection: \(conn)", "  schema: \(schema)", "  table: identities"])
            } else if lines[i].hasPrefix("  directory: out") {
                lines[i] = block(
                    "  ",
                    [
                        "directory: out-postgres",
                        "postgres:                 # the audience for sync tools (docs/rules.md §14.2)",
                        "  connection: \(conn)", "  schema: \(schema)",
                    ])
            } else if lines[i].hasPrefix("# runs on this folder.") {
                lines[i] = "# runs on this folder, reading the world loaded into PostgreSQL by --postgres."
            }
        }
        text = lines.joined(separator: "\n")
        try WorldGenerator.write(text, to: folder + "/" + pipelineName)
    }
}
