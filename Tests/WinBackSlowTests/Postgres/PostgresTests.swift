import Foundation
import Testing
import WinBackTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// PostgreSQL in and out (docs/rules.md §14) against a real server on loopback (one for the
/// suite, ``PostgresServer``), with psql as the independent client: worlds loaded by `winback
/// generate --postgres`, read from their tables and compared with the same worlds read from
/// their files.
@Suite(
    "PostgreSQL against a real server on loopback", .postgresServer, .serialized, .tags(.slow),
    .enabled(if: PostgresServer.available, "needs PostgreSQL's server and psql (Debian: apt-get install postgresql)"))
struct PostgresTests {
    /// The lines of a world's files whose name starts with `prefix` (gzip), counted here.
    static func lines(_ folder: String, prefix: String) throws -> Int {
        var n = 0
        for f in try FileManager.default.contentsOfDirectory(atPath: folder) where f.hasPrefix(prefix) {
            let r = try Helper.run("/bin/sh", ["-c", "gzip -dc '\(folder)/\(f)' | wc -l"])
            n += Int(String(decoding: r.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        return n
    }

    @Test(
        "a signed world stored one line per row (text) and a decoded world in jsonb publish what their files publish",
        arguments: [("appstore-signed", "text"), ("appstore-ndjson", "jsonb")])
    func tablesEqualFiles(format: String, type: String) throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 250, seed: 11, format: format)
        // The tables as psql sees them: one row a line of the files, in the column type asked.
        let s = PostgresWorld.schema
        #expect(
            try world.sql(
                "SELECT data_type FROM information_schema.columns WHERE table_schema = '\(s)' "
                    + "AND table_name = 'transactions' AND column_name = 'payload'"
            ).trimmingCharacters(in: .whitespacesAndNewlines) == type)
        let rows = Int(
            try world.sql("SELECT count(*) FROM \(s).transactions").trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(rows == (try Self.lines(world.folder, prefix: "transactions-")) && (rows ?? 0) > 1000)
        let files = try world.run(world.files, output: Paths.temporary())
        try #require(files.status == 0, "\(files.stderr)")
        let tables = try world.run(world.tables, output: Paths.temporary())
        try #require(tables.status == 0, "\(tables.stderr)")
        S3Run.expectSame(
            publishedFiles(S3Run.folder(tables)), publishedFiles(S3Run.folder(files)), "\(format) from tables")
        let manifest = try S3Run.manifest(S3Run.folder(tables))
        let inputs = try #require(manifest["inputs"] as? [[String: Any]])
        #expect(inputs.map { $0["path"] as? String } == ["postgres:\(s).transactions.payload#000001 (,\(rows ?? 0)]"])
        #expect(inputs.first?["rows"] as? Int == rows)
        // The connection string is in no file the run wrote (nor a password anywhere).
        for (name, data) in publishedFiles(S3Run.folder(tables)) {
            let text = String(decoding: data, as: UTF8.self)
            #expect(!text.contains("127.0.0.1:\(server.port)"), "\(name) names the server")
            #expect(!text.contains(PostgresServer.password), "\(name) holds the password")
        }
        #expect(!tables.stderr.contains(PostgresServer.password))
    }

    @Test("a table is read in ranges of rangeRows rows, each by a thread of its own, and publishes what the files do")
    func rangesOfRows() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 200, seed: 18)
        let s = PostgresWorld.schema
        let n =
            Int(try world.sql("SELECT max(id) FROM \(s).transactions").trimmingCharacters(in: .whitespacesAndNewlines))
            ?? 0
        try #require(n > 1500)
        let split = try world.pipeline("split.yaml") {
            $0.replacingOccurrences(of: "    cursor: id", with: "    rangeRows: 500\n    cursor: id")
        }
        let tables = try world.run(split, output: Paths.temporary())
        try #require(tables.status == 0, "\(tables.stderr)")
        let files = try world.run(world.files, output: Paths.temporary())
        try #require(files.status == 0, "\(files.stderr)")
        S3Run.expectSame(publishedFiles(S3Run.folder(tables)), publishedFiles(S3Run.folder(files)), "in ranges")
        // Ids 1…n: every 500th below the greatest ends a range.
        let count = (n - 1) / 500 + 1
        let expected = (0..<count).map { k -> String in
            let after = k == 0 ? "" : String(k * 500)
            let through = k == count - 1 ? String(n) : String((k + 1) * 500)
            return "postgres:\(s).transactions.payload#" + String(format: "%06d", k + 1) + " (\(after),\(through)]"
        }
        let inputs = try #require(try S3Run.manifest(S3Run.folder(tables))["inputs"] as? [[String: Any]])
        #expect(inputs.compactMap { $0["path"] as? String } == expected)
        #expect(inputs.reduce(0) { $0 + ($1["rows"] as? Int ?? 0) } == n)
    }

    @Test("with cursor: id, night 2 reads only the rows above night 1's: old rows made garbage, it equals a full read")
    func cursorNights() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 300, seed: 12)
        let s = PostgresWorld.schema
        let incremental = try world.pipeline("incremental.yaml") { $0 + "incremental: true\n" }
        let all =
            Int(try world.sql("SELECT count(*) FROM \(s).transactions").trimmingCharacters(in: .whitespacesAndNewlines))
            ?? 0
        let half = all / 2
        // Night 1 sees the first half; the rest arrives by night 2.
        try world.sql(
            "CREATE TABLE \(s).later AS SELECT * FROM \(s).transactions WHERE id > \(half); "
                + "DELETE FROM \(s).transactions WHERE id > \(half)")
        let output = Paths.temporary()
        let night1 = try world.run(incremental, output: output, ["--as-of", "2026-11-15"])
        try #require(night1.status == 0, "\(night1.stderr)")
        let fullOutput = Paths.temporary()
        let copied = try Helper.run("/bin/cp", ["-a", output + "/generated", fullOutput + "/"])
        try #require(copied.status == 0, "\(copied.stderr)")
        // Rows at or below the cursor read are the state's: make them unreadable garbage.
        try world.sql(
            "UPDATE \(s).transactions SET payload = '{\"garbage\": true}'; "
                + "INSERT INTO \(s).transactions SELECT * FROM \(s).later")
        let night2 = try world.run(incremental, output: output)
        try #require(night2.status == 0, "\(night2.stderr)")
        let manifest = try S3Run.manifest(S3Run.folder(night2))
        let summary = try #require(manifest["incremental"] as? [String: Any])
        #expect(summary["state"] as? String == "absorbed")
        #expect(summary["read"] as? [String] == ["postgres:\(s).transactions.payload#000002 (\(half),\(all)]"])
        #expect((manifest["counters"] as? [String: Any])?["rejected"] as? Int == 0, "no garbage row was read")
        // A full read of the intact data, the files, with night 1 as its baseline too.
        let full = try world.run(world.files, output: fullOutput)
        try #require(full.status == 0, "\(full.stderr)")
        #expect(full.stderr.contains("changes against 2026-11-15"), "\(full.stderr)")
        #expect(night2.stderr.contains("changes against 2026-11-15"), "\(night2.stderr)")
        S3Run.expectSame(publishedFiles(S3Run.folder(night2)), publishedFiles(S3Run.folder(full)), "night 2")
        // Without the state, the same table read whole rejects the garbage: the test can fail.
        let whole = try world.run(world.tables, output: Paths.temporary())
        #expect(whole.status == 65 && whole.stderr.contains("rejected"), "\(whole.status) \(whole.stderr)")
    }

    /// The audience table as psql reads it: key → (status, offer_id, offer_url, email, updated_at).
    static func audience(_ world: PostgresWorld) throws -> [String: [String]] {
        let text = try world.sql(
            "SELECT segment, subscription_group_id, original_transaction_id, status, offer_id, offer_url, "
                + "coalesce(email, ''), months_since_last_subscribed::text, updated_at::text "
                + "FROM \(PostgresWorld.schema).audience WHERE pipeline = 'generated'")
        var out: [String: [String]] = [:]
        for line in text.split(separator: "\n") {
            let f = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let key = f[0...2].joined(separator: "/")
            #expect(out[key] == nil, "\(key) is in the table once")
            out[key] = Array(f[3...])
        }
        return out
    }

    /// The rows of a published folder's segments that carry a link: key → (offer_id, offer_url,
    /// months_since_last_subscribed), read with Python's csv module.
    static func segments(_ folder: String) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        let files = try FileManager.default.contentsOfDirectory(atPath: folder + "/segments")
        for name in files where name.hasSuffix(".csv") && name != "holdout.csv" {
            let list = String(name.dropLast(4))
            let path = folder + "/segments/" + name
            let r0 = try Helper.run(
                "/usr/bin/env",
                [
                    "python3", "-c", "import csv,json,sys; print(json.dumps(list(csv.DictReader(open(sys.argv[1])))))",
                    path,
                ])
            let rows = try #require(try JSONSerialization.jsonObject(with: r0.stdout) as? [[String: String]])
            for r in rows where !(r["offer_url"] ?? "").isEmpty {
                out[list + "/" + r["subscription_group_id"]! + "/" + r["original_transaction_id"]!] = [
                    r["offer_id"]!, r["offer_url"]!, r["months_since_last_subscribed"]!,
                ]
            }
        }
        return out
    }

    @Test("the audience table after two nights holds every segment row once with its status; a rerun changes nothing")
    func audienceTable() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 300, seed: 13)
        let output = Paths.temporary()
        let n1 = try world.run(world.tables, output: output, ["--as-of", "2026-09-01"])
        try #require(n1.status == 0, "\(n1.stderr)")
        let n2 = try world.run(world.tables, output: output)
        try #require(n2.status == 0, "\(n2.stderr)")
        let first = try Self.segments(S3Run.folder(n1))
        let second = try Self.segments(S3Run.folder(n2))
        #expect(Set(first.keys.map { $0.split(separator: "/")[0] }).count > 3, "per-offer segments read")
        #expect(!Set(first.keys).subtracting(second.keys).isEmpty, "someone left between the nights")
        let table = try Self.audience(world)
        #expect(Set(table.keys) == Set(first.keys).union(second.keys), "every row ever published, once")
        for (key, row) in table {
            if let now = second[key] {
                #expect(row[0] == "eligible" && [row[1], row[2], row[4]] == now, "\(key): \(row) vs \(now)")
            } else {
                #expect(row[0] == "exited", "\(key) left")
            }
        }
        // The identities joined as for the destinations: a row of a customer with an email has it.
        #expect(table.values.contains { $0[3].hasSuffix("@example.com") })
        // A rerun of night 2 leaves both tables as they were, updated_at included.
        let counts =
            "SELECT date, eligible, rows, entered, changed, exited FROM \(PostgresWorld.schema).runs ORDER BY date"
        let runs = try world.sql(counts)
        #expect(runs.split(separator: "\n").count == 2)
        let again = try world.run(world.tables, output: output)
        try #require(again.status == 0, "\(again.stderr)")
        #expect(try Self.audience(world) == table)
        #expect(try world.sql(counts) == runs, "a rerun adds no change to the date's counts")
        #expect(again.stderr.contains("0 entered, 0 changed, 0 exited"), "\(again.stderr)")
    }

    @Test("a bad row is rejected as a file's line, named by its table, range, row number and cursor value")
    func badRowNamed() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 60, seed: 17)
        let s = PostgresWorld.schema
        try world.sql("INSERT INTO \(s).transactions (id, payload) VALUES (987654, '{\"bad\": 1}')")
        let rows = try world.sql("SELECT count(*) FROM \(s).transactions").trimmingCharacters(
            in: .whitespacesAndNewlines)
        let lenient = try world.pipeline("lenient.yaml") { $0 + "limits:\n  maxRejectedFraction: 0.05\n" }
        let r = try world.run(lenient, output: Paths.temporary())
        try #require(r.status == 0, "\(r.stderr)")
        let rejects = try String(contentsOfFile: S3Run.folder(r) + "/rejects.csv", encoding: .utf8)
        let lines = rejects.split(separator: "\n")
        #expect(lines.count == 2, "\(rejects)")
        #expect(
            lines.last?.hasPrefix(
                "\"postgres:\(s).transactions.payload#000001 (,987654]\",\(rows),id 987654: missing required field")
                == true,
            "\(rejects)")
    }

    @Test("a password in a connection string is 78 from run and validate, and is never printed")
    func passwordInConnection() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 40, seed: 14)
        for (name, edit) in [
            ("userinfo.yaml", { (t: String) in t.replacingOccurrences(of: "winback@", with: "winback:hunter2@") }),
            (
                "parameter.yaml",
                { (t: String) in t.replacingOccurrences(of: "/\(world.db)\"", with: "/\(world.db)?password=hunter2\"") }
            ),
        ] {
            let path = try world.pipeline(name, edit)
            #expect(try String(contentsOfFile: path, encoding: .utf8).contains("hunter2"))
            for args in [["run", path, "--output", Paths.temporary()], ["validate", path]] {
                let r = try world.winback(args)
                #expect(r.status == 78, "\(name) \(args[0]): \(r.status) \(r.stderr)")
                #expect(r.stderr.contains("PGPASSWORD"), "\(r.stderr)")
                #expect(!r.stderr.contains("hunter2") && !r.stdout.contains("hunter2"))
            }
        }
        // From a password file, as ~/.pgpass would give it: the run connects.
        let pgpass = Paths.temporary() + "/pgpass"
        try "127.0.0.1:\(server.port):*:\(PostgresServer.user):\(PostgresServer.password)\n".write(
            toFile: pgpass, atomically: true, encoding: .utf8)
        chmod(pgpass, 0o600)
        let r = try world.winback(
            ["run", world.tables, "--output", Paths.temporary()], ["PGPASSWORD": "", "PGPASSFILE": pgpass])
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test("a table name holding \"; DROP TABLE reads no such table and drops nothing")
    func injection() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 40, seed: 15)
        let s = PostgresWorld.schema
        let before = try world.sql("SELECT count(*) FROM \(s).transactions")
        for (name, field) in [("table", "table: transactions"), ("column", "column: payload")] {
            let evil =
                name == "table"
                ? "transactions\\\"; DROP TABLE \(s).transactions; --" : "payload\\\"; DROP TABLE \(s).transactions; --"
            let path = try world.pipeline("evil-\(name).yaml") {
                $0.replacingOccurrences(of: field, with: "\(name): \"\(evil)\"")
            }
            for args in [["validate", path], ["run", path, "--output", Paths.temporary()]] {
                let r = try world.winback(args)
                #expect(r.status == (name == "table" ? 66 : 78), "\(name) \(args[0]): \(r.status) \(r.stderr)")
                #expect(r.stderr.contains("does not exist"), "\(r.stderr)")
            }
        }
        #expect(try world.sql("SELECT count(*) FROM \(s).transactions") == before)
        // The user's own query runs read-only: a writing statement is refused by the server.
        let writing = try world.pipeline("writing.yaml") {
            $0.replacingOccurrences(
                of: "    schema: \(s)\n    table: transactions\n",
                with:
                    "    query: \"SELECT id, payload FROM \(s).transactions WHERE nextval('\(s).transactions_id_seq') > 0\"\n"
            )
        }
        let r = try world.winback(["run", writing, "--output", Paths.temporary()])
        #expect(r.status == 78 && r.stderr.contains("read-only"), "\(r.status) \(r.stderr)")
    }

    @Test("a stopped server is 75 with the previous run intact; a failed table write is 73, the tables as they were")
    func faults() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 60, seed: 16)
        let s = PostgresWorld.schema
        let output = Paths.temporary()
        let metrics = Paths.temporary() + "/winback.prom"
        let withMetrics = try world.pipeline("metrics.yaml") {
            $0.replacingOccurrences(of: "output:\n", with: "output:\n  metrics: \(metrics)\n")
        }
        let n1 = try world.run(withMetrics, output: output, ["--as-of", "2026-11-20"])
        try #require(n1.status == 0, "\(n1.stderr)")
        #expect(
            try String(contentsOfFile: metrics, encoding: .utf8).contains(
                "winback_postgres_behind{pipeline=\"generated\"} 0"))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: output + "/generated/latest") == "2026-11-20")

        // The table write fails at its last statement, after every row was written (a trigger
        // refuses the runs row): 73, the files published, both tables as they were to the byte,
        // the metrics say so.
        let dump = "SELECT * FROM \(s).audience ORDER BY 1, 2, 3, 4; SELECT * FROM \(s).runs ORDER BY 1, 2"
        let before = try world.sql(dump)
        try world.sql(
            "CREATE FUNCTION \(s).refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; "
                + "END $$; CREATE TRIGGER refuse BEFORE INSERT ON \(s).runs FOR EACH ROW EXECUTE FUNCTION \(s).refuse()"
        )
        let n2 = try world.run(withMetrics, output: output, ["--as-of", "2026-11-21"])
        #expect(n2.status == 73, "\(n2.stderr)")
        #expect(n2.stderr.contains("is behind") && n2.stderr.contains("refused"), "\(n2.stderr)")
        #expect(FileManager.default.fileExists(atPath: output + "/generated/2026-11-21/manifest.json"))
        #expect(try world.sql(dump) == before, "the tables as they were")
        #expect(!n2.stderr.contains("postgres: \(s).audience:"), "no write was reported")
        let prom = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(prom.contains("winback_postgres_behind{pipeline=\"generated\"} 1"), "\(prom)")
        #expect(prom.contains("winback_last_exit_code{pipeline=\"generated\"} 73"), "\(prom)")
        try world.sql("DROP TRIGGER refuse ON \(s).runs")
        // The next run brings the table up to date.
        let n3 = try world.run(withMetrics, output: output, ["--as-of", "2026-11-21"])
        #expect(n3.status == 0, "\(n3.stderr)")
        #expect(try world.sql(dump) != before)

        // A server gone mid-read, and one that stops answering: 75, nothing published.
        for mode in ["cut", "silent"] {
            let portFile = Paths.temporary() + "/port"
            let proxy = Process()
            proxy.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            proxy.arguments = [
                "python3", Paths.repo + "/Tests/Reference/tcp_proxy.py", "--target", "127.0.0.1:\(server.port)",
                "--after", "60000", "--mode", mode, "--port-file", portFile,
            ]
            proxy.standardOutput = FileHandle.nullDevice
            proxy.standardInput = FileHandle.nullDevice
            try proxy.run()
            defer {
                kill(proxy.processIdentifier, SIGKILL)
                proxy.waitUntilExit()
            }
            let deadline = Date().addingTimeInterval(20)
            while !FileManager.default.fileExists(atPath: portFile) && Date() < deadline { usleep(50_000) }
            let port = try #require(Int((try? String(contentsOfFile: portFile, encoding: .utf8)) ?? ""))
            let proxied = try world.pipeline("proxied-\(mode).yaml") {
                $0.replacingOccurrences(of: "127.0.0.1:\(server.port)", with: "127.0.0.1:\(port)")
                    + "limits:\n  networkSeconds: 4\n"
            }
            let started = Date()
            let r = try world.run(proxied, output: output, ["--as-of", "2026-11-22"])
            #expect(r.status == 75, "\(mode): \(r.status) \(r.stderr)")
            #expect(Date().timeIntervalSince(started) < 30, "\(mode): bounded")
            #expect(
                !FileManager.default.fileExists(atPath: output + "/generated/2026-11-22"), "\(mode): nothing published")
        }

        // The server stopped: 75 within the bound, the previous run intact.
        let own = try PostgresServer.start()
        let db = try own.database()
        let moved = try world.pipeline("own.yaml") {
            $0.replacingOccurrences(of: "127.0.0.1:\(server.port)/\(world.db)", with: "127.0.0.1:\(own.port)/\(db)")
        }
        try own.sql("CREATE SCHEMA \(s); CREATE TABLE \(s).transactions (id bigserial, payload jsonb)", db: db)
        own.stop()
        let r = try world.run(moved, output: output, ["--as-of", "2026-11-23"])
        #expect(r.status == 75, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("cannot connect"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: output + "/generated/2026-11-23"))
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: output + "/generated/latest") == "2026-11-21",
            "latest still the last published run")
    }

    @Test(
        "incremental nights: a table without a cursor is read whole every night; an empty table's first range reads none"
    )
    func withoutCursorAndEmpty() throws {
        let server = try #require(PostgresServer.current)
        let world = try PostgresWorld.make(server, customers: 60, seed: 19)
        let s = PostgresWorld.schema
        let noCursor = try world.pipeline("nocursor.yaml") {
            $0.replacingOccurrences(of: "    cursor: id", with: "    #cursor: id") + "incremental: true\n"
        }
        let output = Paths.temporary()
        try world.sql(
            "CREATE TABLE \(s).later AS SELECT * FROM \(s).transactions WHERE id > 300; "
                + "DELETE FROM \(s).transactions WHERE id > 300")
        let n1 = try world.run(noCursor, output: output, ["--as-of", "2026-11-15"])
        try #require(n1.status == 0, "\(n1.stderr)")
        try world.sql("INSERT INTO \(s).transactions SELECT * FROM \(s).later")
        let n2 = try world.run(noCursor, output: output)
        try #require(n2.status == 0, "\(n2.stderr)")
        let all = try world.sql("SELECT count(*) FROM \(s).transactions").trimmingCharacters(
            in: .whitespacesAndNewlines)
        let read = try #require(try S3Run.manifest(S3Run.folder(n2))["inputs"] as? [[String: Any]])
        #expect(read.first?["rows"] as? Int == Int(all), "the new rows were read: \(read)")
        #expect(n2.stderr.contains("read whole every night"), "\(n2.stderr)")

        // An empty table with a cursor: the first night's range reads none (WHERE false), and
        // the next night reads every row.
        try world.sql("CREATE TABLE \(s).empty (LIKE \(s).transactions INCLUDING ALL)")
        let empty = try world.pipeline("empty.yaml") {
            $0.replacingOccurrences(of: "    table: transactions", with: "    table: empty") + "incremental: true\n"
        }
        let emptyOutput = Paths.temporary()
        let e1 = try world.run(empty, output: emptyOutput, ["--as-of", "2026-11-15"])
        try #require(e1.status == 0, "\(e1.stderr)")
        let first = try #require(try S3Run.manifest(S3Run.folder(e1))["inputs"] as? [[String: Any]])
        #expect(first.compactMap { $0["path"] as? String } == ["postgres:\(s).empty.payload#000001 (,]"])
        try world.sql("INSERT INTO \(s).empty SELECT * FROM \(s).transactions")
        let e2 = try world.run(empty, output: emptyOutput)
        try #require(e2.status == 0, "\(e2.stderr)")
        let second = try #require(try S3Run.manifest(S3Run.folder(e2))["inputs"] as? [[String: Any]])
        #expect(second.count == 2 && second.last?["rows"] as? Int == Int(all), "\(second)")
        let files = try world.run(world.files, output: Paths.temporary())
        try #require(files.status == 0, "\(files.stderr)")
        for part in ["segments/best-offer.csv", "reports/eligibility-funnel.csv"] {
            #expect(
                publishedFiles(S3Run.folder(e2))[part] == publishedFiles(S3Run.folder(files))[part], "\(part)")
        }
    }
}
