import Foundation
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackS3
import WinBackSupport
import Yams

/// A pipeline file (docs/rules.md §2.5), validated: every problem is collected and named.
public struct PipelineConfig: Sendable {
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
                var s = s
                return s.withUTF8 { Timestamp.parseDateTime($0, allowSpaceForm: false) }.map { .instant($0) }
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
    public var maxLineBytes = 16 << 20
    /// `limits.maxRejectsListed`: rejects.csv lists at most this many rows, then a count.
    public var maxRejectsListed = 100_000
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
    /// `output.keep`: days of published runs kept before the newest; 0 keeps every run
    /// (docs/rules.md §10.6).
    public var keep = 35
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

    /// Loads and validates a pipeline file; throws a configuration error (exit 78) listing
    /// every problem.
    public static func load(path: String) throws -> PipelineConfig {
        let abs = InputFiles.absolute(path, base: FileManager.default.currentDirectoryPath)
        guard let data = FileManager.default.contents(atPath: abs), let text = String(data: data, encoding: .utf8)
        else {
            throw WinBackError(.configuration, "pipeline file is missing or unreadable", path: path)
        }
        let (config, problems) = parse(text, path: abs)
        if let config, problems.isEmpty { return config }
        throw WinBackError(
            .configuration, "invalid pipeline file (\(problems.count) problem\(problems.count == 1 ? "" : "s"))",
            path: path, details: problems)
    }

    /// Parses pipeline YAML; returns the configuration (when usable) and every problem.
    public static func parse(_ text: String, path: String) -> (PipelineConfig?, [String]) {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
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
            return (nil, ["\(path): not valid YAML at " + head.split(separator: "\n").joined(separator: "; ")])
        }
        guard let root = node?.mapping else { return (nil, ["expected a mapping at the top level"]) }
        var p = YAMLChecker()
        let folder = (path as NSString).deletingLastPathComponent
        var c = PipelineConfig(path: path, folder: folder.isEmpty ? "." : folder, name: "")

        p.allow(
            root,
            [
                "name", "transactions", "renewalInfo", "products", "offers", "asOf", "consecutiveGapDays", "output",
                "reports", "limits", "threads", "inflater", "audience", "environment", "apple", "experiment",
                "identities", "incremental", "money",
            ], at: "")
        if let name = p.string(root, "name", required: true) {
            if name.range(of: "^[a-z0-9-]+$", options: .regularExpression) == nil {
                p.fail("name", "'\(name)' must match [a-z0-9-]+ (it names the output folder)")
            } else {
                c.name = name
            }
        }
        if let t = p.field(root, "transactions", required: true) {
            if let m = t.mapping {
                p.allow(m, ["format", "paths"], at: "transactions.")
                if let f = p.string(m, "format", at: "transactions.") {
                    if let known = InputFormat(rawValue: f) {
                        c.format = known
                    } else {
                        p.fail("transactions.format", "'\(f)' is not one of \(formatsKnown.joined(separator: ", "))")
                    }
                }
                c.transactionPaths = p.strings(m, "paths", at: "transactions.", required: true)
                if c.transactionPaths.isEmpty && m["paths"] != nil {
                    p.fail("transactions.paths", "lists no path")
                }
            } else {
                p.fail("transactions", "expected a mapping with format and paths")
            }
        }
        if root["renewalInfo"] != nil { c.renewalInfoPaths = p.strings(root, "renewalInfo") }
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
        if let a = p.string(root, "asOf") {
            if let v = AsOf.parse(a) {
                c.asOf = v
            } else {
                p.fail("asOf", AsOf.problem(a))
            }
        }
        if let g = p.int(root, "consecutiveGapDays") {
            if g < 0 {
                p.fail("consecutiveGapDays", "must be 0 or more, found \(g)")
            } else {
                c.consecutiveGapDays = Int64(g)
            }
        }
        if let out = p.field(root, "output", required: true) {
            if let m = out.mapping {
                p.allow(
                    m, ["directory", "formats", "group", "destinations", "metrics", "upload", "keep"], at: "output.")
                if let k = p.int(m, "keep", at: "output.") {
                    if k < 0 || k > 36_500 {
                        p.fail("output.keep", "must be 0 (keep every run) to 36500 days, found \(k)")
                    } else {
                        c.keep = k
                    }
                }
                if let u = p.string(m, "upload", at: "output.") {
                    if let location = S3Location(uri: u) {
                        c.upload = location
                    } else {
                        p.fail("output.upload", "expected \(S3Location.prefixForm), found '\(u)'")
                    }
                }
                if let d = p.field(m, "destinations") { c.destinations = p.destinations(d) }
                if let path = p.string(m, "metrics", at: "output.") {
                    if path.isEmpty || path.hasSuffix("/") {
                        p.fail(
                            "output.metrics",
                            "expected a file path such as /var/lib/node_exporter/textfile/winback.prom")
                    } else {
                        c.metricsPath = path
                    }
                }
                if let d = p.string(m, "directory", at: "output.", required: true) { c.outputDirectory = d }
                if let g = p.string(m, "group", at: "output.") {
                    if g.isEmpty || g.contains(where: { $0 == "/" || $0 == ":" || $0.isWhitespace }) {
                        p.fail("output.group", "'\(g)' is not a group name")
                    } else {
                        c.outputGroup = g
                    }
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
            } else {
                p.fail("output", "expected a mapping with directory (and formats)")
            }
        }
        // docs/rules.md §6.2: a metrics file in the output folder would replace what runs publish.
        if let m = c.metricsPath, !c.outputDirectory.isEmpty,
            MetricsFile.isInside(c.resolve(m), output: c.resolve(c.outputDirectory))
        {
            p.fail("output.metrics", MetricsFile.insideProblem(m, output: c.resolve(c.outputDirectory)))
        }
        if let r = p.field(root, "reports") {
            if let m = r.mapping {
                p.allow(m, ["windowMonths", "retentionMonths"], at: "reports.")
                if let w = p.int(m, "windowMonths", at: "reports.") {
                    if w < 1 || w > 120 {
                        p.fail("reports.windowMonths", "must be 1–120, found \(w)")
                    } else {
                        c.windowMonths = w
                    }
                }
                if let w = p.int(m, "retentionMonths", at: "reports.") {
                    if w < 1 || w > 240 {
                        p.fail("reports.retentionMonths", "must be 1–240, found \(w)")
                    } else {
                        c.retentionMonths = w
                    }
                }
            } else {
                p.fail("reports", "expected a mapping with windowMonths")
            }
        }
        if let e = p.field(root, "experiment") { c.experiment = p.experiment(e) }
        if let i = p.field(root, "identities") { c.identities = p.identities(i) }
        if let m = p.field(root, "money") { c.money = p.money(m) }
        if !c.destinations.isEmpty && c.identities == nil {
            p.fail("output.destinations", "needs identities: (the file that maps customers to the tools' ids)")
        }
        if !c.destinations.isEmpty && !c.formats.contains("csv") {
            p.fail("output.destinations", "are made from the CSV segments: add csv to output.formats")
        }
        if let a = p.field(root, "audience") {
            if let m = a.mapping {
                p.allow(m, ["requireApple"], at: "audience.")
                if let v = p.string(m, "requireApple", at: "audience.") {
                    if let r = AppleRequirement(rawValue: v) {
                        c.requireApple = r
                    } else {
                        p.fail("audience.requireApple", "expected false, true or strict, found '\(v)'")
                    }
                }
            } else {
                p.fail("audience", "expected a mapping with requireApple")
            }
        }
        if let l = p.field(root, "limits") {
            if let m = l.mapping {
                p.allow(
                    m, ["maxRejectedFraction", "memory", "maxLineBytes", "maxRejectsListed", "networkSeconds"],
                    at: "limits.")
                if let v = p.field(m, "networkSeconds") {
                    if let n = v.scalar.flatMap({ Int($0.string) }), n >= 1, n <= 86_400 {
                        c.networkSeconds = n
                    } else {
                        p.fail("limits.networkSeconds", "expected a number of seconds between 1 and 86400")
                    }
                }
                if let v = p.field(m, "maxLineBytes") {
                    if let bytes = v.scalar.flatMap({ MemorySize.bytes($0.string) }), bytes >= 1024, bytes <= 1 << 30 {
                        c.maxLineBytes = bytes
                    } else {
                        p.fail("limits.maxLineBytes", "expected a size between 1KiB and 1GiB, such as 16MiB")
                    }
                }
                if let v = p.field(m, "maxRejectsListed") {
                    if let n = v.scalar.flatMap({ Int($0.string) }), n >= 0, n <= 100_000_000 {
                        c.maxRejectsListed = n
                    } else {
                        p.fail("limits.maxRejectsListed", "expected a count of rows between 0 and 100000000")
                    }
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
                if let v = p.field(m, "maxRejectedFraction") {
                    if let d = v.scalar.flatMap({ Double($0.string) }), d >= 0, d <= 1 {
                        c.maxRejectedFraction = d
                    } else {
                        p.fail("limits.maxRejectedFraction", "expected a fraction between 0 and 1")
                    }
                }
            } else {
                p.fail("limits", "expected a mapping with maxRejectedFraction")
            }
        }
        if let t = p.string(root, "threads") {
            if t == "auto" {
                c.threads = nil
            } else if let n = Int(t), n >= 1, n <= 256 {
                c.threads = n
            } else {
                p.fail("threads", "expected auto or a number of threads from 1 to 256, found '\(t)'")
            }
        }
        if let i = p.string(root, "inflater") {
            if let choice = InflaterChoice(rawValue: i) {
                c.inflater = choice
            } else {
                p.fail("inflater", "expected zlib, isal or auto, found '\(i)'")
            }
        }
        if let e = p.string(root, "environment") {
            if AppleSettings.environments.contains(e) {
                c.environment = e
            } else {
                p.fail("environment", "expected Production or Sandbox, found '\(e)'")
            }
        }
        if let a = p.field(root, "apple") { c.apple = p.apple(a) }
        if let v = p.string(root, "incremental") {
            switch v {
            case "true": c.incremental = true
            case "false": c.incremental = false
            default: p.fail("incremental", "expected true or false, found '\(v)'")
            }
        }
        // The configuration is returned even with problems, so `validate` can go on to check
        // the catalog and the inputs; `load` refuses it.
        return (c, p.problems.map { "\(path): \($0)" })
    }

    /// An absolute path for a path of the file (relative ones are relative to its folder).
    public func resolve(_ p: String) -> String { InputFiles.absolute(p, base: folder) }
}

/// Reads typed fields out of YAML nodes, collecting a message per problem.
struct YAMLChecker {
    var problems: [String] = []

    /// The `identities:` block (docs/rules.md §10.1): path and key.
    mutating func identities(_ node: Node) -> IdentitiesSource? {
        guard let m = node.mapping else {
            fail("identities", "expected a mapping with path and key")
            return nil
        }
        allow(m, ["path", "key"], at: "identities.")
        let path = string(m, "path", at: "identities.", required: true)
        var key = IdentitiesSource.Key.originalTransactionId
        if let k = string(m, "key", at: "identities.") {
            if let known = IdentitiesSource.Key(rawValue: k) {
                key = known
            } else {
                fail("identities.key", "expected original_transaction_id or app_account_token, found '\(k)'")
            }
        }
        guard let path, !path.isEmpty else { return nil }
        return IdentitiesSource(path: path, key: key)
    }

    /// `output.destinations` (docs/rules.md §10.2): tool names, or entries with type, audience,
    /// maxRows and maxBytes.
    mutating func destinations(_ node: Node) -> [Destination] {
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
            guard let m = item.mapping else {
                fail(at, "expected a destination name or a mapping with type")
                continue
            }
            allow(m, ["type", "audience", "maxRows", "maxBytes"], at: at + ".")
            guard let name = string(m, "type", at: at + ".", required: true) else { continue }
            guard let type = DestinationType(rawValue: name) else {
                fail(at + ".type", unknown(name))
                continue
            }
            var d = Destination(type: type)
            if let a = string(m, "audience", at: at + ".") {
                if let audience = Destination.Audience(rawValue: a) {
                    d.audience = audience
                } else {
                    fail(at + ".audience", "expected best-offer or per-offer, found '\(a)'")
                }
            }
            if let v = string(m, "maxRows", at: at + ".") {
                if let n = Int(v), n >= 1 {
                    d.maxRows = n
                } else {
                    fail(at + ".maxRows", "expected a count of rows of 1 or more")
                }
            }
            if let v = string(m, "maxBytes", at: at + ".") {
                if let n = MemorySize.bytes(v), n >= 1024 {
                    d.maxBytes = n
                } else {
                    fail(at + ".maxBytes", "expected a size of at least 1KiB, such as 50MB")
                }
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
    mutating func experiment(_ node: Node) -> Experiment? {
        guard let m = node.mapping else {
            fail("experiment", "expected a mapping with name, holdout and start")
            return nil
        }
        allow(m, ["name", "holdout", "start"], at: "experiment.")
        var name: String?
        if let n = string(m, "name", at: "experiment.", required: true) {
            if Experiment.isValidName(n) {
                name = n
            } else {
                fail("experiment.name", "'\(n)' must match [A-Za-z0-9._-]{1,64}")
            }
        }
        var basisPoints: Int?
        if let h = string(m, "holdout", at: "experiment.", required: true) {
            basisPoints = Experiment.basisPoints(h)
            if basisPoints == nil {
                fail(
                    "experiment.holdout",
                    "'\(h)' is not a share from 0.01% to 50% in steps of 0.01% (write 10%, 2.5% or 0.1)")
            }
        }
        var start: Int64?
        if let s = string(m, "start", at: "experiment.", required: true) {
            if let d = Timestamp.parseDate(s) {
                start = d * MonthMath.day
            } else {
                fail(
                    "experiment.start",
                    Timestamp.whyNotADate(s).map { "'\(s)' is not a date (\($0))" }
                        ?? "'\(s)' is not a date YYYY-MM-DD")
            }
        }
        guard let name, let basisPoints, let start else { return nil }
        return Experiment(name: name, basisPoints: basisPoints, start: start)
    }

    /// The `money:` block (docs/rules.md §13.1): currency, rates and horizonMonths.
    mutating func money(_ node: Node) -> MoneySettings? {
        guard let m = node.mapping else {
            fail("money", "expected a mapping with currency and rates")
            return nil
        }
        allow(m, ["currency", "rates", "horizonMonths"], at: "money.")
        var currency: String?
        if let c = string(m, "currency", at: "money.", required: true) {
            if MoneySettings.isCurrency(c) {
                currency = c
            } else {
                fail("money.currency", "'\(c)' is not a currency code (three capital letters, ISO 4217)")
            }
        }
        let rates = string(m, "rates", at: "money.", required: true)
        if rates?.isEmpty == true { fail("money.rates", "expected the path of a rates file") }
        var horizon = 3
        if let h = int(m, "horizonMonths", at: "money.") {
            if (1...36).contains(h) {
                horizon = h
            } else {
                fail("money.horizonMonths", "must be 1–36, found \(h)")
            }
        }
        guard let currency, let rates, !rates.isEmpty else { return nil }
        return MoneySettings(currency: currency, ratesPath: rates, horizonMonths: horizon)
    }

    mutating func fail(_ field: String, _ why: String) { problems.append("field '\(field)': \(why)") }

    mutating func allow(_ m: Node.Mapping, _ keys: Set<String>, at prefix: String) {
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

    mutating func field(_ m: Node.Mapping, _ key: String, required: Bool = false, at prefix: String = "") -> Node? {
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

    mutating func string(_ m: Node.Mapping, _ key: String, at prefix: String = "", required: Bool = false) -> String? {
        guard let v = field(m, key, required: required, at: prefix) else { return nil }
        guard let s = v.scalar?.string else {
            fail(prefix + key, "expected a single value")
            return nil
        }
        return s
    }

    mutating func int(_ m: Node.Mapping, _ key: String, at prefix: String = "") -> Int? {
        guard let s = string(m, key, at: prefix) else { return nil }
        guard let i = Int(s) else {
            fail(prefix + key, "expected a whole number, found '\(s)'")
            return nil
        }
        return i
    }

    /// A list of strings; a single string counts as a one-item list.
    mutating func strings(_ m: Node.Mapping, _ key: String, at prefix: String = "", required: Bool = false) -> [String]
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
