import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackPipeline
@testable import WinBackPostgres
@testable import WinBackRead
@testable import WinBackSupport

/// What docs/rules.md §14 asks of the pipeline file's `postgres:` blocks and of the text that
/// crosses the wire, in this process (no server): names quoted, values escaped both ways, a
/// cursor range named and read back, a password refused.
@Suite("PostgreSQL blocks and text (docs/rules.md §14)")
struct PostgresConfigTests {
    static func parse(_ transactions: String, output: String = "") -> (PipelineConfig?, [String]) {
        let text = """
            name: nightly
            transactions:
            \(transactions)
            offers: offers.json
            output:
              directory: out
            \(output)
            """
        return PipelineConfig.parse(text, path: "/srv/p/nightly.yaml")
    }

    @Test("a postgres: block stands as its label where a path would, and is read back as it was given")
    func block() throws {
        let (c, problems) = Self.parse(
            """
              format: appstore-signed
              postgres:
                connection: postgresql://winback@db.internal:5432/app?sslmode=verify-full
                schema: app
                table: notifications
                column: signed_payload
                cursor: id
            """,
            output: "  postgres: {connection: \"host=db.internal dbname=app user=winback\", schema: audiences}")
        #expect(problems.isEmpty, "\(problems)")
        let config = try #require(c)
        #expect(config.transactionPaths == ["postgres:app.notifications.signed_payload"])
        let source = try #require(config.tables.first)
        #expect(source.table == "notifications" && source.schema == "app" && source.cursor == "id")
        #expect(
            config.postgres
                == PostgresOutput(connection: "host=db.internal dbname=app user=winback", schema: "audiences"))
        #expect(InputStores.isTable(config.transactionPaths[0]) && InputStores.isObject(config.transactionPaths[0]))
        // Resolved against the pipeline's folder, a label stays itself.
        #expect(config.resolve(config.transactionPaths[0]) == config.transactionPaths[0])
    }

    @Test(
        "a password in the connection string, both table and query, a schema without a table, a bad name: each named",
        arguments: [
            ("postgres: {connection: \"postgresql://u:hunter2@h/db\", table: t, column: c}", "holds a password"),
            ("postgres: {connection: \"host=h password=hunter2\", table: t, column: c}", "holds a password"),
            (
                "postgres: {connection: \"postgresql://u@h/db\", table: t, query: \"SELECT 1\", column: c}",
                "table or query"
            ),
            (
                "postgres: {connection: \"postgresql://u@h/db\", schema: s, query: \"SELECT c FROM t\", column: c}",
                "goes with table"
            ),
            ("postgres: {connection: \"postgresql://u@h/db\", table: \"\", column: c}", "1 to 63 bytes"),
            (
                "postgres: {connection: \"postgresql://u@h/db\", query: \"DELETE FROM t\", column: c}",
                "expected a SELECT"
            ),
            ("postgres: {connection: \"postgresql://u@h/db\", table: t}", "column"),
            ("postgres: {connection: \"not a = connection = string\", table: t, column: c}", "libpq reads"),
            ("paths: [a.gz]\n  postgres: {connection: \"postgresql://u@h/db\", table: t, column: c}", "not both"),
            ("postgres: {connection: \"postgresql://u:hunter2%zz@h/db\", table: t, column: c}", "libpq reads"),
            (
                "postgres: {connection: \"dbname='postgresql://u:hunter2@h/db'\", table: t, column: c}",
                "itself a connection"
            ),
        ])
    func refused(block: String, says: String) {
        let (c, problems) = Self.parse("  " + block)
        #expect(!problems.isEmpty, "\(block): \(String(describing: c?.transactionPaths))")
        #expect(problems.contains { $0.contains(says) }, "\(block): \(problems)")
        #expect(!problems.joined().contains("hunter2"), "the password is never repeated")
    }

    @Test("two blocks reading one table's column, and output.postgres without csv, are refused")
    func refusedTogether() {
        let (_, same) = Self.parse(
            "  postgres: {connection: \"postgresql://u@h/db\", table: t, column: c}\nrenewalInfo:\n"
                + "  postgres: {connection: \"postgresql://u@h/db\", table: t, column: c}")
        #expect(same.contains { $0.contains("same table and column") }, "\(same)")
        let (_, queries) = Self.parse(
            "  postgres: {connection: \"postgresql://u@h/db\", query: \"SELECT c FROM t\", column: c}\nrenewalInfo:\n"
                + "  postgres: {connection: \"postgresql://u@h/db\", query: \"SELECT c FROM r\", column: c}")
        #expect(queries.isEmpty, "two queries are two inputs: \(queries)")
        let (_, xml) = Self.parse(
            "  paths: [a.gz]", output: "  formats: [xml]\n  postgres: {connection: \"postgresql://u@h/db\"}")
        #expect(xml.contains { $0.contains("add csv") }, "\(xml)")
    }

    @Test("names are quoted, values are literals: nothing a name holds becomes SQL")
    func quoting() {
        #expect(PostgresConnection.identifier("t") == "\"t\"")
        #expect(PostgresConnection.identifier("a\"; DROP TABLE t; --") == "\"a\"\"; DROP TABLE t; --\"")
        #expect(PostgresConnection.literal("it's") == "'it''s'")
        let s = PostgresSource(
            connection: "", schema: "s\"x", table: "t;", column: "c\"", cursor: "id", field: "transactions.postgres")
        #expect(
            s.select(after: "10", through: "2026-11-28 10:00:00+00'")
                == "SELECT \"c\"\"\"::text FROM \"s\"\"x\".\"t;\" WHERE \"id\" > '10' AND \"id\" <= '2026-11-28 10:00:00+00''' "
                + "ORDER BY \"id\"")
        #expect(s.label == "postgres:s\"x.t;.c\"")
        let q = PostgresSource(connection: "", query: "SELECT id, p FROM n", column: "p", field: "f")
        #expect(q.label == "postgres:f-query.p")
        #expect(
            q.select(after: nil, through: nil) == "SELECT \"p\"::text FROM (\nSELECT id, p FROM n\n) AS winback_query")
        // A closing semicolon or comment does not swallow the parenthesis; no greatest value reads none.
        let commented = PostgresSource(
            connection: "", query: "SELECT id, p FROM n; ", column: "p", cursor: "id", field: "transactions.postgres")
        #expect(
            commented.select(after: nil, through: nil)
                == "SELECT \"p\"::text FROM (\nSELECT id, p FROM n\n) AS winback_query WHERE false ORDER BY \"id\"")
    }

    @Test("a cursor range is named so names sort in cursor order, and read back from its name")
    func ranges() {
        let label = "postgres:app.notifications.payload"
        let cases = [
            TableRange(sequence: 1, after: nil, through: "1000", bytes: 0),
            TableRange(sequence: 2, after: "1000", through: "1500", bytes: 0),
            TableRange(sequence: 12, after: "2026-11-27 05:30:00.123+00", through: "2026-11-28 05:30:00+00", bytes: 0),
            TableRange(sequence: 3, after: "7", through: nil, bytes: 0),
            TableRange(sequence: 4, after: "a,b#c(d]e%f", through: "z\u{1}é", bytes: 0),
        ]
        for r in cases {
            let (l, back) = TableRange.parse(r.name(label))
            #expect(l == label && back == r, "\(r.name(label))")
        }
        #expect(cases[1].name(label) == "postgres:app.notifications.payload#000002 (1000,1500]")
        #expect(cases[4].name(label) == "postgres:app.notifications.payload#000004 (a%2Cb%23c%28d%5De%25f,z%01é]")
        let names = (1...12).map { TableRange(sequence: $0, after: nil, through: nil, bytes: 0).name(label) }
        #expect(names.sorted(by: FileName.precedes) == names)
        // A label alone (a table without a cursor) has no range.
        #expect(TableRange.parse(label).range == nil)
    }

    @Test("COPY's text is decoded into one line a row; fields written to COPY are escaped")
    func copyText() {
        func decode(_ s: String) -> String {
            var out: [UInt8] = []
            Array(s.utf8).withUnsafeBytes { PostgresRowStream.decode($0, into: &out) }
            return String(decoding: out, as: UTF8.self)
        }
        #expect(decode("{\"a\": \"x\\\\y\"}\n") == "{\"a\": \"x\\y\"}\n")
        #expect(decode("{\"a\":\\n 1}\n") == "{\"a\":  1}\n")
        #expect(decode("a\\tb\\rc\n") == "a\tb c\n")
        #expect(decode("\\N\n") == "null\n")
        #expect(decode("eyJ\nabc") == "eyJ abc\n")
        func escape(_ s: String) -> String {
            var out: [UInt8] = []
            AudienceTable.escape(s, into: &out)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(escape("") == "\\N")
        #expect(escape("a\tb\nc\\d\re") == "a\\tb\\nc\\\\d\\re")
        // What one side writes, the other reads back (a line break inside a value: a space).
        #expect(decode(escape("x\ty\\z") + "\n") == "x\ty\\z\n")
    }
}
