import Foundation
import WinBackSupport

/// `<schema>.audience` and `<schema>.runs` (docs/rules.md §14.2): what reverse-ETL and
/// ingestion tools sync from, by `updated_at`.
///
/// In one transaction: tonight's rows go to a temporary table with COPY; a row of the audience
/// whose values differ, or that had exited, takes tonight's values (`eligible`); a new one is
/// inserted; an eligible row tonight lacks becomes `exited`. `as_of` and `updated_at` change
/// only with the row, so a rerun of a date changes nothing; `runs` keeps one row per
/// (pipeline, date), its counts the date's changes in all (a rerun that changes nothing adds
/// none), its manifest the date's published one. A failure rolls everything back: the tables stay as they were.
public enum AudienceTable {
    /// The columns of a segment row (docs/rules.md §4.1), with their types.
    public static let segmentColumns: [(name: String, type: String)] = [
        ("subscription_group_id", "text"), ("original_transaction_id", "text"), ("app_account_token", "text"),
        ("storefront", "text"), ("product_id", "text"), ("paid_months", "integer"), ("paid_run_start", "timestamptz"),
        ("last_subscribed_end", "timestamptz"), ("months_since_last_subscribed", "integer"), ("offer_id", "text"),
        ("offer_rank", "integer"), ("eligible_offer_ids", "text"), ("offer_url", "text"), ("apple_eligible", "text"),
    ]

    /// What one write did.
    public struct Written: Sendable, Equatable {
        public var rows = 0
        public var entered = 0
        public var changed = 0
        public var exited = 0
        public init() {}
    }

    /// The run's facts for `runs`.
    public struct Run: Sendable {
        public var pipeline: String
        public var date: String
        /// ISO 8601 UTC.
        public var asOf: String
        public var publishedAt: String
        public var manifestSHA256: String
        public var eligible: Int

        public init(
            pipeline: String, date: String, asOf: String, publishedAt: String, manifestSHA256: String, eligible: Int
        ) {
            self.pipeline = pipeline
            self.date = date
            self.asOf = asOf
            self.publishedAt = publishedAt
            self.manifestSHA256 = manifestSHA256
            self.eligible = eligible
        }
    }

    /// Writes tonight's rows: `rows` calls its argument with each row's segment, its 14 segment
    /// fields and its identity values (`identityColumns`, "" for none), in any order.
    public static func write(
        connection: String, schema: String, run: Run, identityColumns: [String], seconds: Double,
        rows: ((_ segment: String, _ fields: [String], _ identities: [String]) throws -> Void) throws -> Void
    ) throws -> Written {
        let c = try PostgresConnection(connection, field: "output.postgres.connection", seconds: seconds)
        let s = PostgresConnection.identifier(schema)
        let q = PostgresConnection.identifier
        let values = segmentColumns.dropFirst(2).map(\.name) + identityColumns
        let keys = ["segment", "subscription_group_id", "original_transaction_id"]
        let what = "cannot write \(schema).audience"
        try c.execute("BEGIN", what: what)
        var committed = false
        defer { if !committed { _ = try? c.execute("ROLLBACK") } }
        try makeTables(c, schema: schema, identityColumns: identityColumns, what: what)
        let tonightColumns =
            ["segment text"] + segmentColumns.map { "\(q($0.name)) \($0.type)" }
            + identityColumns.map { "\(q($0)) text" }
        try c.execute(
            "CREATE TEMPORARY TABLE winback_tonight (\(tonightColumns.joined(separator: ", ")), "
                + "PRIMARY KEY (segment, subscription_group_id, original_transaction_id)) ON COMMIT DROP", what: what)
        var written = Written()
        let all = (["segment"] + segmentColumns.map(\.name) + identityColumns).map(q).joined(separator: ", ")
        try c.copyIn("COPY winback_tonight (\(all)) FROM STDIN", what: what) { send0 in
            var line: [UInt8] = []
            try withoutActuallyEscaping(send0) { send in
                try rows { segment, fields, identities in
                    line.removeAll(keepingCapacity: true)
                    for (i, v) in ([segment] + fields + identities).enumerated() {
                        if i > 0 { line.append(9) }
                        escape(v, into: &line)
                    }
                    line.append(10)
                    written.rows += 1
                    try send(line.span)
                }
            }
        }
        let match = keys.dropFirst().map { "a.\(q($0)) = t.\(q($0))" }.joined(separator: " AND ")
        let mine = values.map { "a.\(q($0))" }.joined(separator: ", ")
        let theirs = values.map { "t.\(q($0))" }.joined(separator: ", ")
        let params: [String?] = [run.pipeline, run.asOf, run.publishedAt]
        let changed = try c.query(
            """
            WITH u AS (UPDATE \(s).audience a SET (\(values.map(q).joined(separator: ", ")), status, as_of, \
            updated_at) = (\(theirs), 'eligible', $2::timestamptz, $3::timestamptz) FROM winback_tonight t \
            WHERE a.pipeline = $1 AND a.segment = t.segment AND \(match) \
            AND (a.status <> 'eligible' OR ROW(\(mine)) IS DISTINCT FROM ROW(\(theirs))) RETURNING a.status) \
            SELECT count(*)::text FROM u
            """, params, what: what)
        let cols = (segmentColumns.map(\.name) + identityColumns).map(q).joined(separator: ", ")
        let tcols = (segmentColumns.map(\.name) + identityColumns).map { "t.\(q($0))" }.joined(separator: ", ")
        let entered = try c.query(
            """
            WITH i AS (INSERT INTO \(s).audience (pipeline, segment, \(cols), status, as_of, updated_at) \
            SELECT $1, t.segment, \(tcols), 'eligible', $2::timestamptz, $3::timestamptz FROM winback_tonight t \
            ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*)::text FROM i
            """, params, what: what)
        let exited = try c.query(
            """
            WITH e AS (UPDATE \(s).audience a SET status = 'exited', as_of = $2::timestamptz, \
            updated_at = $3::timestamptz WHERE a.pipeline = $1 AND a.status = 'eligible' AND NOT EXISTS \
            (SELECT 1 FROM winback_tonight t WHERE t.segment = a.segment AND \(match)) RETURNING 1) \
            SELECT count(*)::text FROM e
            """, params, what: what)
        written.changed = Int(changed.first?.first.flatMap { $0 } ?? "0") ?? 0
        written.entered = Int(entered.first?.first.flatMap { $0 } ?? "0") ?? 0
        written.exited = Int(exited.first?.first.flatMap { $0 } ?? "0") ?? 0
        try c.execute(
            """
            INSERT INTO \(s).runs (pipeline, date, as_of, manifest_sha256, eligible, rows, entered, changed, exited, \
            published_at) VALUES ($1, $4::date, $2::timestamptz, $5, $6::integer, $7::integer, $8::integer, \
            $9::integer, $10::integer, $3::timestamptz) ON CONFLICT (pipeline, date) DO UPDATE SET \
            as_of = EXCLUDED.as_of, manifest_sha256 = EXCLUDED.manifest_sha256, eligible = EXCLUDED.eligible, \
            rows = EXCLUDED.rows, entered = runs.entered + EXCLUDED.entered, \
            changed = runs.changed + EXCLUDED.changed, exited = runs.exited + EXCLUDED.exited, \
            published_at = EXCLUDED.published_at
            """,
            params + [
                run.date, run.manifestSHA256, String(run.eligible), String(written.rows), String(written.entered),
                String(written.changed), String(written.exited),
            ], what: what)
        try c.execute("COMMIT", what: what)
        committed = true
        return written
    }

    /// The schema, `audience` (with a column for each identity column) and `runs`, when missing.
    static func makeTables(_ c: PostgresConnection, schema: String, identityColumns: [String], what: String) throws {
        let s = PostgresConnection.identifier(schema)
        let q = PostgresConnection.identifier
        try c.execute("CREATE SCHEMA IF NOT EXISTS \(s)", what: what)
        let columns = segmentColumns.map { "\(q($0.name)) \($0.type)" }.joined(separator: ", ")
        try c.execute(
            """
            CREATE TABLE IF NOT EXISTS \(s).audience (pipeline text NOT NULL, segment text NOT NULL, \(columns), \
            status text NOT NULL, as_of timestamptz NOT NULL, updated_at timestamptz NOT NULL, \
            PRIMARY KEY (pipeline, segment, subscription_group_id, original_transaction_id))
            """, what: what)
        try c.execute("CREATE INDEX IF NOT EXISTS audience_updated_at ON \(s).audience (updated_at)", what: what)
        for id in identityColumns {
            try c.execute("ALTER TABLE \(s).audience ADD COLUMN IF NOT EXISTS \(q(id)) text", what: what)
        }
        try c.execute(
            """
            CREATE TABLE IF NOT EXISTS \(s).runs (pipeline text NOT NULL, date date NOT NULL, \
            as_of timestamptz NOT NULL, manifest_sha256 text NOT NULL, eligible integer NOT NULL, \
            rows integer NOT NULL, entered integer NOT NULL, changed integer NOT NULL, exited integer NOT NULL, \
            published_at timestamptz NOT NULL, PRIMARY KEY (pipeline, date))
            """, what: what)
    }

    /// `value` as a field of COPY's text format: empty is NULL (`\N`); `\`, tab, line breaks
    /// escaped.
    static func escape(_ value: String, into out: inout [UInt8]) {
        if value.isEmpty {
            out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
            return
        }
        for b in value.utf8 {
            switch b {
            case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
            case 9: out.append(contentsOf: [92, UInt8(ascii: "t")])
            case 10: out.append(contentsOf: [92, UInt8(ascii: "n")])
            case 13: out.append(contentsOf: [92, UInt8(ascii: "r")])
            default: out.append(b)
            }
        }
    }
}
