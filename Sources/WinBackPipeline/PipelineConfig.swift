import Foundation
import WinBackModel
import WinBackPostgres
import WinBackRead
import WinBackRules
import WinBackS3
import WinBackSupport
import Yams

/// A pipeline file (docs/rules.md §2.5), validated: every problem is collected and named.
public struct PipelineConfig: Sendable {
    /// The thread counts a run accepts, from the file (`threads`) or the command line (`--threads`).
    public static let threadCounts = 1...256
    public static let threadCountsText = "a number of threads from 1 to 256"

    public enum AsOf: Sendable, Equatable {
        case today
        case now
        case instant(Int64)

        /// Parses `today`, `now`, `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.sss]Z`.
        public static func parse(_ s: String) -> AsOf? {
            switch s {
            case "today": return .today
            case "now": return .now
            default:
                if let d = Timestamp.parseDate(s) { return .instant(d * MonthMath.day) }
                return Timestamp.parseDateTime(s.utf8.span, allowSpaceForm: false).map { .instant($0) }
            }
        }

        /// Why `s` is not an as-of, for a message after the value (`'2026-02-30' is not a date
        /// (February 2026 has 28 days)`).
        public static func problem(_ s: String) -> String {
            if let why = Timestamp.whyNotADate(s) { return "'\(s)' is not a date (\(why))" }
            return "'\(s)' is not today, now, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ"
        }

        /// The instant, given the wall clock.
        public func resolve(now: Int64) -> Int64 {
            switch self {
            case .today: return MonthMath.dayNumber(now) * MonthMath.day
            case .now: return now
            case .instant(let t): return t
            }
        }
    }

    /// The pipeline file's path and folder (relative paths are relative to the folder).
    public var path: String
    public var folder: String
    public var name: String

    /// A pipeline of these defaults, before its file's blocks are read into it.
    package init(path: String, folder: String, name: String) {
        self.path = path
        self.folder = folder
        self.name = name
    }
    public var format: InputFormat = .appstoreNDJSON
    public var transactionPaths: [String] = []
    public var renewalInfoPaths: [String] = []
    public var products: [String: String] = [:]
    public var offersPath: String = ""
    public var asOf: AsOf = .today
    public var consecutiveGapDays: Int64 = 60
    public var outputDirectory: String = ""
    public var formats: [String] = ["csv", "xml"]
    /// `output.group`: the group that may read published runs (docs/rules.md §6.1); nil = only
    /// the owner.
    public var outputGroup: String?
    /// `limits.maxLineBytes`: a longer line is rejected without being held (docs/rules.md §6.1).
    public var maxLineBytes = ReadLimits.default.maxLineBytes
    /// `limits.maxRejectsListed`: rejects.csv lists at most this many rows, then a count.
    public var maxRejectsListed = ReadLimits.default.maxRejectsListed
    /// `limits.networkSeconds`: the most network time a run spends on S3 (docs/rules.md §6.2).
    public var networkSeconds = 600
    public var windowMonths: Int = 12
    /// `reports.retentionMonths`: how far back returns count in retention-after-return.csv
    /// (docs/rules.md §9.3).
    public var retentionMonths: Int = 24
    /// `experiment:`: the holdout that measures the campaign (docs/rules.md §9); nil = none.
    public var experiment: Experiment?
    /// `money:`: one reporting currency through a rates file (docs/rules.md §13.1); nil = amounts
    /// per currency.
    public var money: MoneySettings?
    /// `identities:`: the team's own ids, joined to the audiences (docs/rules.md §10.1).
    public var identities: IdentitiesSource?
    /// `output.destinations`: the tools that get import files (docs/rules.md §10.2).
    public var destinations: [Destination] = []
    /// `output.metrics`: where the Prometheus textfile goes after every run (docs/rules.md §10.3).
    public var metricsPath: String?
    /// `output.upload`: where published runs are copied in S3 (docs/rules.md §11).
    public var upload: S3Location?
    /// `output.postgres`: the tables the audience is written to after the publish
    /// (docs/rules.md §14.2).
    public var postgres: PostgresOutput?
    /// The `postgres:` blocks inputs are read from (docs/rules.md §14.1), each standing as its
    /// label where a path would.
    public var tables: [PostgresSource] = []
    /// `output.keep`: days of published runs kept before the newest; 0 keeps every run
    /// (docs/rules.md §10.6).
    public var keep = 35
    /// `output.exitDays`: the days of published runs whose destination files tonight's exited
    /// files cover (docs/rules.md §10.10); 0 covers the baseline alone.
    public var exitDays = 7
    public var maxRejectedFraction: Double = 0.001
    /// nil = auto (the number of cores).
    public var threads: Int?
    /// `limits.memory` in bytes: run partitioned under this much memory (docs/rules.md §8); nil
    /// = in memory.
    public var memoryLimit: Int?
    /// The library that inflates `.gz` inputs (an extension of docs/rules.md §2.5; default zlib).
    public var inflater: InflaterChoice = .auto
    /// `audience.requireApple`: which segment rows Apple's word keeps (docs/rules.md §4.5).
    public var requireApple: AppleRequirement = .off
    /// Which rows count: Production or Sandbox (docs/rules.md §2.7).
    public var environment = "Production"
    /// `incremental: true`: keep a state of the transaction files read, and read only new ones
    /// the next time (docs/rules.md §12).
    public var incremental = false
    /// How signed inputs are verified.
    public var apple = AppleSettings()

    public static let formatsKnown = InputFormat.allCases.map(\.rawValue)

    /// The largest pipeline file read (docs/rules.md §6.3): a pipeline of every key is a few
    /// kilobytes.
    public static let maxFileBytes = 1 << 20
    /// The longest `name` (docs/rules.md §6.3): it names a folder and every metrics series.
    public static let maxNameBytes = 100

    /// Loads and validates a pipeline file; throws a configuration error (exit 78) listing
    /// every problem.
    public static func load(path: String) throws -> PipelineConfig {
        try read(path: path).usable()
    }

    /// The pipeline file at `path` as read and parsed once: the configuration, when usable, and
    /// every problem. A run takes it with ``Read/usable()``; the metrics of a run that failed
    /// name the pipeline and find its metrics file in it, problems or not.
    public struct Read: Sendable {
        public var path: String
        public var config: PipelineConfig?
        public var problems: [String]

        /// The configuration, or the configuration error (78) listing every problem.
        public func usable() throws -> PipelineConfig {
            if let config, problems.isEmpty { return config }
            throw WinBackError(
                .configuration, "invalid pipeline file (\(counted(problems.count, "problem")))",
                path: path, details: problems)
        }
    }

    /// Reads and parses the pipeline file at `path`: 66 or 78 when it cannot be read or is not
    /// UTF-8 text, at most ``maxFileBytes``; its problems are in the result.
    public static func read(path: String) throws -> Read {
        let abs = InputFiles.absolute(path, base: System.currentDirectory)
        let bytes = try System.readConfiguration(abs, what: "pipeline file", naming: path, limit: maxFileBytes)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw WinBackError(.configuration, "pipeline file is not UTF-8 text", path: path)
        }
        let (config, problems) = parse(text, path: abs)
        return Read(path: path, config: config, problems: problems)
    }

    /// Parses pipeline YAML; returns the configuration (when usable) and every problem.
    public static func parse(_ text: String, path: String) -> (PipelineConfig?, [String]) {
        let root: Node.Mapping
        switch yaml(text, path: path) {
        case .success(let r): root = r
        case .failure(let problems): return (nil, problems.problems)
        }
        var p = YAMLChecker()
        let folder = (path as NSString).deletingLastPathComponent
        var c = PipelineConfig(path: path, folder: folder.isEmpty ? "." : folder, name: "")
        // Block by block, in the order the problems are listed.
        inputs(root, &p, &c)
        output(root, &p, &c)
        delivery(root, &p, &c)
        limits(root, &p, &c)
        running(root, &p, &c)
        // The configuration is returned even with problems, so `validate` can go on to check
        // the catalog and the inputs; `load` refuses it.
        return (c, p.problems.map { "\(path): \($0)" })
    }

    /// Problems found before any block is read.
    package struct Problems: Error {
        package var problems: [String]
    }

    /// The top-level mapping of `text`, or why it is none (YAML errors with line and column).
    private static func yaml(_ text: String, path: String) -> Result<Node.Mapping, Problems> {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch YamlError.duplicatedKeysInMapping(let keys, let context) {
            // A key given twice is never one of the two taken silently (docs/rules.md §6.3): where.
            let names = keys.map { "'\(ControlEscape.escaped($0.prefix(100)))'" }.joined(separator: ", ")
            return .failure(
                Problems(problems: [
                    "\(path): not valid YAML at line \(context.mark.line), column \(context.mark.column): the key "
                        + "\(names) is given twice in one mapping; give it once"
                ]))
        } catch {
            // The parser's message ends with the offending line and a caret under it; its line and
            // column lead the message, so the part before them is kept, on one line (control
            // characters in messages are escaped, docs/rules.md §6).
            let text = "\(error)"
            var head = text.components(separatedBy: ":\n").first ?? text
            // Yams says "4:1: error: parser: …": the file, then "line 4, column 1".
            let parts = head.split(separator: ":", maxSplits: 2)
            if parts.count == 3, let line = Int(parts[0]), let column = Int(parts[1]) {
                var rest = parts[2].trimmingCharacters(in: .whitespaces)
                if rest.hasPrefix("error: ") { rest.removeFirst("error: ".count) }
                head = "line \(line), column \(column): " + rest
            }
            return .failure(
                Problems(problems: ["\(path): not valid YAML at " + head.split(separator: "\n").joined(separator: "; ")]
                ))
        }
        guard let root = node?.mapping else {
            return .failure(Problems(problems: ["expected a mapping at the top level"]))
        }
        return .success(root)
    }

    /// The top level's keys, `name`, the inputs (`transactions`, `renewalInfo`, `products`,
    /// `offers`) and the time (`asOf`, `consecutiveGapDays`).
    private static func inputs(_ root: Node.Mapping, _ p: inout YAMLChecker, _ c: inout PipelineConfig) {
        p.allow(
            root,
            [
                "name", "transactions", "renewalInfo", "products", "offers", "asOf", "consecutiveGapDays", "output",
                "reports", "limits", "threads", "inflater", "audience", "environment", "apple", "experiment",
                "identities", "incremental", "money",
            ], at: "")
        if let name = p.string(
            root, "name", required: true,
            where: {
                // [a-z0-9-]+, byte by byte (a regular expression is compiled on every run).
                $0.utf8.count <= maxNameBytes && !$0.isEmpty
                    && $0.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
            },
            else: {
                $0.utf8.count > maxNameBytes
                    ? "\($0.utf8.count) bytes, more than \(maxNameBytes) (it names the output folder)"
                    : "'\($0)' must match [a-z0-9-]+ (it names the output folder)"
            })
        {
            c.name = name
        }
        if let t = p.field(root, "transactions", required: true),
            let m = p.mapping(
                t, at: "transactions", keys: ["format", "paths", "postgres"],
                else: "expected a mapping with format and paths (or postgres)")
        {
            if let f = p.string(
                m, "format", at: "transactions.", as: InputFormat.init(rawValue:),
                else: { "'\($0)' is not one of \(formatsKnown.joined(separator: ", "))" })
            {
                c.format = f
            }
            if let node = p.field(m, "postgres", at: "transactions.") {
                if m["paths"] != nil { p.fail("transactions", "give paths or postgres, not both") }
                if let source = p.postgres(node, at: "transactions.postgres", cursor: true, column: true) {
                    c.tables.append(source)
                    c.transactionPaths = [InputStores.register(source)]
                }
            } else {
                c.transactionPaths = p.strings(m, "paths", at: "transactions.", required: true)
                if c.transactionPaths.isEmpty && m["paths"] != nil {
                    p.fail("transactions.paths", "lists no path")
                }
            }
        }
        if let r = root["renewalInfo"] {
            if r.mapping != nil {
                if let m = p.mapping(
                    r, at: "renewalInfo", keys: ["postgres"],
                    else: "expected a list of paths, or a mapping with postgres"),
                    let node = p.field(m, "postgres", required: true, at: "renewalInfo."),
                    let source = p.postgres(node, at: "renewalInfo.postgres", cursor: false, column: true)
                {
                    c.tables.append(source)
                    c.renewalInfoPaths = [InputStores.register(source)]
                }
            } else {
                c.renewalInfoPaths = p.strings(root, "renewalInfo")
            }
        }
        if let prod = p.field(root, "products") {
            if let m = prod.mapping {
                for (k, v) in m {
                    guard let key = k.scalar?.string, let group = v.scalar?.string else {
                        p.fail("products", "expected productId: subscriptionGroupId pairs")
                        continue
                    }
                    c.products[key] = group
                }
            } else {
                p.fail("products", "expected a mapping of productId to subscription group id")
            }
        }
        if c.format == .revenuecat && c.products.isEmpty {
            p.fail("products", "required for format revenuecat (the export has no subscription group)")
        }
        if let o = p.string(root, "offers", required: true) { c.offersPath = o }
        if let a = p.string(root, "asOf", as: AsOf.parse, else: AsOf.problem) { c.asOf = a }
        if let g = p.int(root, "consecutiveGapDays", in: 0...Int.max, else: { "must be 0 or more, found \($0)" }) {
            c.consecutiveGapDays = Int64(g)
        }
    }

    /// `output`: where and how runs are published, and the metrics file's place.
    private static func output(_ root: Node.Mapping, _ p: inout YAMLChecker, _ c: inout PipelineConfig) {
        if let out = p.field(root, "output", required: true),
            let m = p.mapping(
                out, at: "output",
                keys: [
                    "directory", "formats", "group", "destinations", "metrics", "upload", "keep", "exitDays",
                    "postgres",
                ],
                else: "expected a mapping with directory (and formats)")
        {
            if let k = p.int(
                m, "keep", at: "output.", in: 0...36_500,
                else: { "must be 0 (keep every run) to 36500 days, found \($0)" })
            {
                c.keep = k
            }
            if let d = p.int(
                m, "exitDays", at: "output.", in: 0...36_500,
                else: { "must be 0 (the baseline alone) to 36500 days, found \($0)" })
            {
                c.exitDays = d
            }
            // A run of the exit window pruned before it leaves would never exit its values
            // (docs/rules.md §10.10).
            if c.keep > 0 && c.keep < c.exitDays {
                p.fail(
                    "output.keep",
                    "\(c.keep) days is fewer than output.exitDays (\(c.exitDays)): the runs the exited files cover "
                        + "must be kept; raise keep or lower exitDays")
            }
            if let u = p.string(
                m, "upload", at: "output.", as: S3Location.init(uri:),
                else: { "expected \(S3Location.prefixForm), found '\($0)'" })
            {
                c.upload = u
            }
            if let node = p.field(m, "postgres", at: "output.") { c.postgres = p.postgresOutput(node) }
            if let d = p.field(m, "destinations") { c.destinations = p.destinations(d) }
            if let path = p.string(
                m, "metrics", at: "output.", where: { !$0.isEmpty && !$0.hasSuffix("/") },
                else: { _ in "expected a file path such as /var/lib/node_exporter/textfile/winback.prom" })
            {
                c.metricsPath = path
            }
            if let d = p.string(m, "directory", at: "output.", required: true) { c.outputDirectory = d }
            if let g = p.string(
                m, "group", at: "output.",
                where: { !$0.isEmpty && !$0.contains(where: { $0 == "/" || $0 == ":" || $0.isWhitespace }) },
                else: { "'\($0)' is not a group name" })
            {
                c.outputGroup = g
            }
            if m["formats"] != nil {
                let f = p.strings(m, "formats", at: "output.")
                let bad = f.filter { $0 != "csv" && $0 != "xml" }
                if !bad.isEmpty {
                    p.fail("output.formats", "unknown format \(bad.joined(separator: ", ")); use csv and/or xml")
                } else if f.isEmpty {
                    p.fail("output.formats", "lists no format")
                } else {
                    c.formats = f
                }
            }
        }
        // docs/rules.md §6.2: a metrics file in the output folder would replace what runs publish.
        if let m = c.metricsPath, !c.outputDirectory.isEmpty,
            MetricsPlace.isInside(c.resolve(m), output: c.resolve(c.outputDirectory))
        {
            p.fail("output.metrics", MetricsPlace.insideProblem(m, output: c.resolve(c.outputDirectory)))
        }
    }

    /// `reports`, `experiment`, `identities`, `money`, `audience`, and what the blocks ask of
    /// one another.
    private static func delivery(_ root: Node.Mapping, _ p: inout YAMLChecker, _ c: inout PipelineConfig) {
        if let r = p.field(root, "reports"),
            let m = p.mapping(
                r, at: "reports", keys: ["windowMonths", "retentionMonths"],
                else: "expected a mapping with windowMonths")
        {
            if let w = p.int(m, "windowMonths", at: "reports.", in: 1...120, else: { "must be 1–120, found \($0)" }) {
                c.windowMonths = w
            }
            if let w = p.int(m, "retentionMonths", at: "reports.", in: 1...240, else: { "must be 1–240, found \($0)" })
            {
                c.retentionMonths = w
            }
        }
        if let e = p.field(root, "experiment") { c.experiment = p.experiment(e) }
        if let i = p.field(root, "identities") {
            c.identities = p.identities(i)
            if let path = c.identities?.path, InputStores.isTable(path), let source = p.identitiesTable {
                c.tables.append(source)
            }
        }
        if let m = p.field(root, "money") { c.money = p.money(m) }
        if !c.destinations.isEmpty && c.identities == nil {
            p.fail("output.destinations", "needs identities: (the file that maps customers to the tools' ids)")
        }
        // Two blocks reading the same table's column would be one input (docs/rules.md §14.1).
        let labels = c.tables.map(\.label)
        if Set(labels).count != labels.count {
            p.fail("postgres", "two blocks read the same table and column; give each its own (or drop one)")
        }
        if c.postgres != nil && !c.formats.contains("csv") {
            p.fail("output.postgres", "is written from the CSV segments: add csv to output.formats")
        }
        if !c.destinations.isEmpty && !c.formats.contains("csv") {
            p.fail("output.destinations", "are made from the CSV segments: add csv to output.formats")
        }
        if let a = p.field(root, "audience"),
            let m = p.mapping(a, at: "audience", keys: ["requireApple"], else: "expected a mapping with requireApple"),
            let r = p.string(
                m, "requireApple", at: "audience.", as: AppleRequirement.init(rawValue:),
                else: { "expected false, true or strict, found '\($0)'" })
        {
            c.requireApple = r
        }
    }

    /// `limits`.
    private static func limits(_ root: Node.Mapping, _ p: inout YAMLChecker, _ c: inout PipelineConfig) {
        if let l = p.field(root, "limits"),
            let m = p.mapping(
                l, at: "limits",
                keys: ["maxRejectedFraction", "memory", "maxLineBytes", "maxRejectsListed", "networkSeconds"],
                else: "expected a mapping with maxRejectedFraction")
        {
            if let n = p.scalar(
                m, "networkSeconds", at: "limits.", as: { Int($0).flatMap { (1...86_400).contains($0) ? $0 : nil } },
                else: "expected a number of seconds between 1 and 86400")
            {
                c.networkSeconds = n
            }
            if let bytes = p.scalar(
                m, "maxLineBytes", at: "limits.",
                as: { MemorySize.bytes($0).flatMap { (1024...(1 << 30)).contains($0) ? $0 : nil } },
                else: "expected a size between 1KiB and 1GiB, such as 16MiB")
            {
                c.maxLineBytes = bytes
            }
            if let n = p.scalar(
                m, "maxRejectsListed", at: "limits.",
                as: { Int($0).flatMap { (0...100_000_000).contains($0) ? $0 : nil } },
                else: "expected a count of rows between 0 and 100000000")
            {
                c.maxRejectsListed = n
            }
            if let v = p.field(m, "memory") {
                if let text = v.scalar?.string {
                    switch MemorySize.read(text) {
                    case .bytes(let bytes): c.memoryLimit = bytes
                    case .problem(let why): p.fail("limits.memory", why)
                    }
                } else {
                    p.fail("limits.memory", "expected a size such as 2GB, 512MB or 96MiB (at least 32 MB)")
                }
            }
            if let d = p.scalar(
                m, "maxRejectedFraction", at: "limits.", as: { Double($0).flatMap { (0...1).contains($0) ? $0 : nil } },
                else: "expected a fraction between 0 and 1")
            {
                c.maxRejectedFraction = d
            }
        }
    }

    /// `threads`, `inflater`, `environment`, `apple`, `incremental`.
    private static func running(_ root: Node.Mapping, _ p: inout YAMLChecker, _ c: inout PipelineConfig) {
        if let t = p.string(root, "threads") {
            if t == "auto" {
                c.threads = nil
            } else if let n = Int(t), PipelineConfig.threadCounts.contains(n) {
                c.threads = n
            } else {
                p.fail("threads", "expected auto or \(PipelineConfig.threadCountsText), found '\(t)'")
            }
        }
        if let i = p.string(
            root, "inflater", as: InflaterChoice.init(rawValue:), else: { "expected zlib, isal or auto, found '\($0)'" }
        ) {
            c.inflater = i
        }
        if let e = p.string(
            root, "environment", where: AppleSettings.environments.contains,
            else: { "expected Production or Sandbox, found '\($0)'" })
        {
            c.environment = e
        }
        if let a = p.field(root, "apple") { c.apple = p.apple(a) }
        if let v = p.string(root, "incremental", as: Bool.init, else: { "expected true or false, found '\($0)'" }) {
            c.incremental = v
        }
    }

    /// An absolute path for a path of the file (relative ones are relative to its folder).
    public func resolve(_ p: String) -> String { InputFiles.absolute(p, base: folder) }
}

/// Reads typed fields out of YAML nodes, collecting a message per problem.
package struct YAMLChecker {
    package var problems: [String] = []
    /// The identities' `postgres:` block, once read.
    package var identitiesTable: PostgresSource?

    /// A `postgres:` block of an input (docs/rules.md §14.1): connection, then table (with
    /// schema) or query, column (`column`: required of a table's transactions and renewal
    /// info; identities read every column) and cursor (`cursor`: transactions only).
    package mutating func postgres(_ node: Node, at field: String, cursor: Bool, column: Bool) -> PostgresSource? {
        var keys: Set<String> = ["connection", "schema", "table", "query"]
        if column { keys.insert("column") }
        if cursor { keys.formUnion(["cursor", "rangeRows"]) }
        guard
            let m = mapping(
                node, at: field, keys: keys,
                else: "expected a mapping with connection and table (or query)"
                    + (column ? " and column" : ""))
        else { return nil }
        let prefix = field + "."
        let connection = string(m, "connection", at: prefix, required: true)
        let table = string(m, "table", at: prefix)
        let query = string(m, "query", at: prefix)
        let schema = string(m, "schema", at: prefix)
        let col = column ? string(m, "column", at: prefix, required: query == nil) : nil
        let cur = cursor ? string(m, "cursor", at: prefix) : nil
        let rangeRows =
            cursor
            ? int(
                m, "rangeRows", at: prefix, in: 1...1_000_000_000, else: { "must be 1 to 1000000000 rows, found \($0)" }
            )
            : nil
        if (table == nil) == (query == nil) { fail(field, "give table or query, one of them") }
        if schema != nil && table == nil { fail(field + ".schema", "goes with table") }
        for (k, v) in [("table", table), ("schema", schema), ("column", col), ("cursor", cur)] {
            if let v, v.isEmpty || v.utf8.count > 63 || v.utf8.contains(0) {
                fail(prefix + k, "expected a name of 1 to 63 bytes (PostgreSQL's limit)")
            }
        }
        if let q = query,
            !q.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().hasPrefix("select")
                && !q.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().hasPrefix("with")
        {
            fail(prefix + "query", "expected a SELECT (it runs in a read-only transaction)")
        }
        if cur != nil && query != nil && col == nil { fail(prefix + "column", "is needed with a query and a cursor") }
        guard let connection = checked(connection, field: prefix + "connection") else { return nil }
        if rangeRows != nil && cur == nil { fail(prefix + "rangeRows", "goes with cursor") }
        return PostgresSource(
            connection: connection, schema: schema, table: table, query: query, column: col, cursor: cur,
            rangeRows: rangeRows ?? PostgresSource.defaultRangeRows, field: field)
    }

    /// `connection` when libpq reads it and it holds no password; else nil, the problem noted.
    package mutating func checked(_ connection: String?, field: String) -> String? {
        guard let connection, !connection.isEmpty else { return nil }
        do { try PostgresConnection.checkConnection(connection, field: field) } catch {
            problems.append((error as? WinBackError)?.message ?? SystemError.words(error))
            return nil
        }
        return connection
    }

    /// `output.postgres` (docs/rules.md §14.2): connection and schema.
    package mutating func postgresOutput(_ node: Node) -> PostgresOutput? {
        guard
            let m = mapping(
                node, at: "output.postgres", keys: ["connection", "schema"],
                else: "expected a mapping with connection and schema")
        else { return nil }
        let connection = string(m, "connection", at: "output.postgres.", required: true)
        let schema = string(m, "schema", at: "output.postgres.") ?? "winback"
        if schema.isEmpty || schema.utf8.count > 63 || schema.utf8.contains(0) {
            fail("output.postgres.schema", "expected a name of 1 to 63 bytes (PostgreSQL's limit)")
        }
        guard let connection = checked(connection, field: "output.postgres.connection") else { return nil }
        return PostgresOutput(connection: connection, schema: schema)
    }

    /// The `identities:` block (docs/rules.md §10.1): path and key.
    package mutating func identities(_ node: Node) -> IdentitiesSource? {
        guard
            let m = mapping(
                node, at: "identities", keys: ["path", "key", "columns", "postgres"],
                else: "expected a mapping with path and key")
        else { return nil }
        var path: String?
        if let node = field(m, "postgres", at: "identities.") {
            if m["path"] != nil { fail("identities", "give path or postgres, not both") }
            identitiesTable = postgres(node, at: "identities.postgres", cursor: false, column: false)
            path = identitiesTable.map { InputStores.register($0) }
        } else {
            path = string(m, "path", at: "identities.", required: true)
        }
        // A destination's identity column under the name the team's file gives it (§10.10).
        var columns: [String: String] = [:]
        if let c = field(m, "columns", at: "identities.") {
            if let pairs = c.mapping {
                for (k, v) in pairs {
                    guard let from = k.scalar?.string, let to = v.scalar?.string, !to.isEmpty else {
                        fail("identities.columns", "expected pairs such as email: \"E-mail Address\"")
                        continue
                    }
                    guard IdentitiesSource.mappable.contains(from) else {
                        let known = IdentitiesSource.mappable.sorted().joined(separator: ", ")
                        fail("identities.columns.\(from)", "not a destination's identity column (one of \(known))")
                        continue
                    }
                    columns[from] = to
                }
            } else {
                fail(
                    "identities.columns", "expected a mapping such as {email: \"E-mail Address\", external_id: user_id}"
                )
            }
        }
        let key =
            string(
                m, "key", at: "identities.", as: IdentitiesSource.Key.init(rawValue:),
                else: { "expected original_transaction_id or app_account_token, found '\($0)'" })
            ?? .originalTransactionId
        guard let path, !path.isEmpty else { return nil }
        return IdentitiesSource(path: path, key: key, columns: columns)
    }

    /// `output.destinations` (docs/rules.md §10.2): tool names, or entries with type, audience,
    /// maxRows and maxBytes.
    package mutating func destinations(_ node: Node) -> [Destination] {
        guard let seq = node.sequence else {
            fail("output.destinations", "expected a list such as [braze, klaviyo]")
            return []
        }
        let names = DestinationType.allCases.map(\.rawValue)
        let known = names.joined(separator: ", ")
        func unknown(_ name: String) -> String {
            "unknown destination '\(name)'"
                + (KnownKeys.nearest(name, in: names).map { " (did you mean '\($0)'?)" } ?? "") + "; known: \(known)"
        }
        var out: [Destination] = []
        for (i, item) in seq.enumerated() {
            let at = "output.destinations[\(i)]"
            if let name = item.scalar?.string {
                guard let type = DestinationType(rawValue: name) else {
                    fail(at, unknown(name))
                    continue
                }
                out.append(Destination(type: type))
                continue
            }
            guard
                let m = mapping(
                    item, at: at, keys: ["type", "audience", "maxRows", "maxBytes"],
                    else: "expected a destination name or a mapping with type")
            else { continue }
            guard let name = string(m, "type", at: at + ".", required: true) else { continue }
            guard let type = DestinationType(rawValue: name) else {
                fail(at + ".type", unknown(name))
                continue
            }
            var d = Destination(type: type)
            if let a = string(
                m, "audience", at: at + ".", as: Destination.Audience.init(rawValue:),
                else: { "expected best-offer or per-offer, found '\($0)'" })
            {
                d.audience = a
            }
            if let n = string(
                m, "maxRows", at: at + ".", as: { Int($0).flatMap { $0 >= 1 ? $0 : nil } },
                else: { _ in "expected a count of rows of 1 or more" })
            {
                d.maxRows = n
            }
            if let n = string(
                m, "maxBytes", at: at + ".", as: { MemorySize.bytes($0).flatMap { $0 >= 1024 ? $0 : nil } },
                else: { _ in "expected a size of at least 1KiB, such as 50MB" })
            {
                d.maxBytes = n
            }
            out.append(d)
        }
        var seen: Set<String> = []
        for d in out where !seen.insert(d.type.rawValue + "/" + d.audience.rawValue).inserted {
            fail("output.destinations", "\(d.type.rawValue) with audience \(d.audience.rawValue) is listed twice")
        }
        return out
    }

    /// The `experiment:` block (docs/rules.md §9.1): name, holdout and start, all required.
    package mutating func experiment(_ node: Node) -> Experiment? {
        guard
            let m = mapping(
                node, at: "experiment", keys: ["name", "holdout", "start"],
                else: "expected a mapping with name, holdout and start")
        else { return nil }
        let name = string(
            m, "name", at: "experiment.", required: true, where: Experiment.isValidName,
            else: { "'\($0)' must match [A-Za-z0-9._-]{1,64}" })
        let basisPoints = string(
            m, "holdout", at: "experiment.", required: true, as: Experiment.basisPoints,
            else: { "'\($0)' is not a share from 0.01% to 50% in steps of 0.01% (write 10%, 2.5% or 0.1)" })
        let start = string(
            m, "start", at: "experiment.", required: true, as: { Timestamp.parseDate($0).map { $0 * MonthMath.day } },
            else: { s in
                Timestamp.whyNotADate(s).map { "'\(s)' is not a date (\($0))" } ?? "'\(s)' is not a date YYYY-MM-DD"
            })
        guard let name, let basisPoints, let start else { return nil }
        return Experiment(name: name, basisPoints: basisPoints, start: start)
    }

    /// The `money:` block (docs/rules.md §13.1): currency, rates and horizonMonths.
    package mutating func money(_ node: Node) -> MoneySettings? {
        guard
            let m = mapping(
                node, at: "money", keys: ["currency", "rates", "horizonMonths"],
                else: "expected a mapping with currency and rates")
        else { return nil }
        let currency = string(
            m, "currency", at: "money.", required: true, where: MoneySettings.isCurrency,
            else: { "'\($0)' is not a currency code (three capital letters, ISO 4217)" })
        let rates = string(m, "rates", at: "money.", required: true)
        if rates?.isEmpty == true { fail("money.rates", "expected the path of a rates file") }
        let horizon = int(m, "horizonMonths", at: "money.", in: 1...36, else: { "must be 1–36, found \($0)" }) ?? 3
        guard let currency, let rates, !rates.isEmpty else { return nil }
        return MoneySettings(currency: currency, ratesPath: rates, horizonMonths: horizon)
    }

    package mutating func fail(_ field: String, _ why: String) { problems.append("field '\(field)': \(why)") }

    /// The mapping `node` holds, its keys checked against `keys`; nil, with the problem
    /// `problem` at `field`, when it holds something else.
    package mutating func mapping(_ node: Node, at field: String, keys: Set<String>, else problem: String) -> Node
        .Mapping?
    {
        guard let m = node.mapping else {
            fail(field, problem)
            return nil
        }
        allow(m, keys, at: field + ".")
        return m
    }

    package mutating func allow(_ m: Node.Mapping, _ keys: Set<String>, at prefix: String) {
        for k in m.keys {
            guard let s = k.scalar?.string else {
                problems.append("a key under '\(prefix)' is not a plain string")
                continue
            }
            if !keys.contains(s) {
                let near = KnownKeys.nearest(s, in: keys.sorted())
                problems.append(
                    "unknown key '\(prefix)\(s)'" + (near.map { " (did you mean '\(prefix)\($0)'?)" } ?? "")
                        + "; known keys: \(keys.sorted().joined(separator: ", "))")
            }
        }
    }

    package mutating func field(_ m: Node.Mapping, _ key: String, required: Bool = false, at prefix: String = "")
        -> Node?
    {
        guard let v = m[key] else {
            if required { fail(prefix + key, "required") }
            return nil
        }
        // YAML's null: an empty plain value, `~` or `null`.
        if let s = v.scalar, s.style == .plain, s.string == "" || s.string == "~" || s.string == "null" {
            if required { fail(prefix + key, "required") }
            return nil
        }
        return v
    }

    package mutating func string(_ m: Node.Mapping, _ key: String, at prefix: String = "", required: Bool = false)
        -> String?
    {
        guard let v = field(m, key, required: required, at: prefix) else { return nil }
        guard let s = v.scalar?.string else {
            fail(prefix + key, "expected a single value")
            return nil
        }
        return s
    }

    package mutating func int(_ m: Node.Mapping, _ key: String, at prefix: String = "") -> Int? {
        string(m, key, at: prefix, as: { Int($0) }, else: { "expected a whole number, found '\($0)'" })
    }

    /// A whole number in `range`; nil, with the problem `problem(n)`, when it is outside.
    package mutating func int(
        _ m: Node.Mapping, _ key: String, at prefix: String = "", in range: ClosedRange<Int>,
        else problem: (Int) -> String
    ) -> Int? {
        guard let n = int(m, key, at: prefix) else { return nil }
        guard range.contains(n) else {
            fail(prefix + key, problem(n))
            return nil
        }
        return n
    }

    /// A single value read by `parse`; nil, with the problem `problem(value)`, when `parse`
    /// refuses it.
    package mutating func string<T>(
        _ m: Node.Mapping, _ key: String, at prefix: String = "", required: Bool = false, as parse: (String) -> T?,
        else problem: (String) -> String
    ) -> T? {
        guard let s = string(m, key, at: prefix, required: required) else { return nil }
        guard let value = parse(s) else {
            fail(prefix + key, problem(s))
            return nil
        }
        return value
    }

    /// A single value that `valid` accepts; nil, with the problem `problem(value)`, when it
    /// does not.
    package mutating func string(
        _ m: Node.Mapping, _ key: String, at prefix: String = "", required: Bool = false,
        where valid: (String) -> Bool, else problem: (String) -> String
    ) -> String? {
        string(m, key, at: prefix, required: required, as: { valid($0) ? $0 : nil }, else: problem)
    }

    /// A value that `parse` reads from a scalar; nil, with the problem `problem`, when the value
    /// is not a scalar or `parse` refuses it.
    package mutating func scalar<T>(
        _ m: Node.Mapping, _ key: String, at prefix: String, as parse: (String) -> T?, else problem: String
    ) -> T? {
        guard let v = field(m, key) else { return nil }
        guard let value = v.scalar.flatMap({ parse($0.string) }) else {
            fail(prefix + key, problem)
            return nil
        }
        return value
    }

    /// A list of strings; a single string counts as a one-item list.
    package mutating func strings(_ m: Node.Mapping, _ key: String, at prefix: String = "", required: Bool = false)
        -> [String]
    {
        guard let v = field(m, key, required: required, at: prefix) else { return [] }
        if let s = v.scalar { return [s.string] }
        guard let seq = v.sequence else {
            fail(prefix + key, "expected a list of strings")
            return []
        }
        var out: [String] = []
        for item in seq {
            guard let s = item.scalar?.string else {
                fail(prefix + key, "expected a list of strings")
                return []
            }
            out.append(s)
        }
        return out
    }
}
