import Foundation
import Testing
import WinBackTestSupport
import WinBackTesting

/// Worlds and files for the delivery tests (docs/rules.md §10), made and read without the
/// code under test: the world by Tests/Reference/make_world.py, the transactions read through
/// /usr/bin/gzip and JSONSerialization, CSV parsed and written here.
enum DeliveryFixture {
    /// The as-of date of make_world.py's pipeline.
    static let asOf = "2026-11-22"

    /// A world winback did not generate: `dir/pipeline.yaml`, two transaction files, offers.json
    /// and an experiment with a 20 % holdout. Returns the pipeline's path.
    static func makeWorld(customers: Int, seed: Int, in dir: String = Paths.temporary() + "/world") throws -> String {
        let r = try run(
            "/usr/bin/python3",
            [Paths.repo + "/Tests/Reference/make_world.py", dir, "--customers", "\(customers)", "--seed", "\(seed)"])
        #expect(r.status == 0, "make_world.py: \(r.stderr)")
        return dir + "/pipeline.yaml"
    }

    /// Runs a program to its end; its status, stdout and stderr.
    static func run(_ program: String, _ args: [String], stdin: String? = nil) throws -> (
        status: Int32, stdout: Data, stderr: String
    ) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: program)
        p.arguments = args
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        if let stdin {
            let input = Pipe()
            p.standardInput = input
            try p.run()
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        } else {
            p.standardInput = FileHandle.nullDevice
            try p.run()
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, o, String(decoding: e, as: UTF8.self))
    }

    /// A customer of the world's transaction files: its originalTransactionId and, when a row
    /// carries one, its appAccountToken as written.
    struct Customer {
        var originalTransactionId: String
        var token: String?
    }

    /// Every originalTransactionId of the world's `transactions-*.jsonl.gz` files, sorted.
    static func customers(worldFolder: String) throws -> [Customer] {
        var tokens: [String: String?] = [:]
        let names = try FileManager.default.contentsOfDirectory(atPath: worldFolder)
            .filter { $0.hasPrefix("transactions-") && $0.hasSuffix(".jsonl.gz") }
        #expect(names.count == 2)
        for name in names.sorted() {
            let r = try run("/usr/bin/gzip", ["-dc", worldFolder + "/" + name])
            #expect(r.status == 0, "\(r.stderr)")
            for line in r.stdout.split(separator: 0x0A) {
                let trimmed = line.last == 0x0D ? line.dropLast() : line
                if trimmed.isEmpty { continue }
                guard let object = try JSONSerialization.jsonObject(with: Data(trimmed)) as? [String: Any],
                    let otid = object["originalTransactionId"] as? String
                else { continue }
                let token = object["appAccountToken"] as? String
                if let existing = tokens[otid], existing != nil { continue }
                tokens.updateValue(token, forKey: otid)
            }
        }
        return tokens.keys.sorted().map { Customer(originalTransactionId: $0, token: tokens[$0] ?? nil) }
    }

    // MARK: CSV (RFC 4180), written and read here

    /// A field as docs/rules.md §4.1 writes it: quoted, `"` doubled, only when it holds a comma,
    /// a quote, CR or LF.
    static func field(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }) else {
            return s
        }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func line(_ fields: [String]) -> String { fields.map(field).joined(separator: ",") + "\n" }

    /// The records of CSV bytes (a last record without a line end included).
    static func parse(_ bytes: [UInt8]) -> [[String]] {
        var records: [[String]] = []
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        var started = false
        var i = 0
        func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }
        while i < bytes.count {
            let b = bytes[i]
            i += 1
            if quoted {
                if b == 0x22 {
                    if i < bytes.count && bytes[i] == 0x22 {
                        field.append(0x22)
                        i += 1
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(b)
                }
                continue
            }
            started = true
            switch b {
            case 0x22: quoted = true
            case 0x2C:
                fields.append(text(field))
                field = []
            case 0x0A:
                fields.append(text(field))
                records.append(fields)
                fields = []
                field = []
                started = false
            default: field.append(b)
            }
        }
        if started {
            fields.append(text(field))
            records.append(fields)
        }
        return records
    }

    static func bytes(_ path: String) -> [UInt8] { FileManager.default.contents(atPath: path).map { Array($0) } ?? [] }

    /// A CSV file as rows of named fields (its header gives the names).
    static func table(_ path: String) -> (header: [String], rows: [[String: String]]) {
        let records = parse(bytes(path))
        guard let header = records.first else { return ([], []) }
        let rows = records.dropFirst().map { r in
            Dictionary(uniqueKeysWithValues: zip(header, r).map { ($0, $1) })
        }
        return (header, rows)
    }

    // MARK: identities

    /// An identities file and what it means: the fields the last row of each key gives.
    struct Identities {
        /// The file's text (header included).
        var text: String
        /// Key (an originalTransactionId, or a token lowercased) → column → value, last row winning.
        var map: [String: [String: String]]
        /// Rows whose key an earlier row had.
        var duplicates: Int
        /// Data rows.
        var rows: Int
        /// Customers given no row.
        var withoutRow: Int
    }

    static let identityColumns = ["original_transaction_id", "app_account_token", "external_id", "email"]

    /// Identities for about 90 % of `customers`: 10 % get no row, some an empty email or
    /// external_id, some ids with a comma, a quote or non-ASCII letters, and a few keys appear
    /// twice (an earlier stale row, the row that counts at the end of the file), one of them
    /// with an empty email replacing a filled one. Keyed by token, only customers with a token
    /// get a row, their token in either case.
    static func identities(for customers: [Customer], byToken: Bool = false, seed: UInt64 = 5) -> Identities {
        var rng = SplitMix64(seed: seed)  // seeded, so the identities are the same every run
        var body: [[String]] = []
        var later: [[String]] = []
        var map: [String: [String: String]] = [:]
        var duplicates = 0
        var without = 0
        for c in customers {
            let r = rng.below(100)
            if r < 10 || (byToken && c.token == nil) {
                without += 1
                continue
            }
            let otid = c.originalTransactionId
            var token = c.token ?? ""
            if byToken && rng.below(2) == 0 { token = token.uppercased() }
            var external = "user-\(otid)"
            var email = "c\(otid)@example.com"
            switch r {
            case 10..<13: external = "ext,\(otid)"
            case 13..<15: external = "ext \"\(otid)\" q"
            case 15..<17: external = "Zoë-\(otid)"
            case 17..<19: email = "\"Zoë \(otid)\" <z\(otid)@example.com>"
            case 20..<27: email = ""
            case 27..<31: external = ""
            default: break
            }
            let row = [otid, token, external, email]
            let key = byToken ? token.lowercased() : otid
            if r >= 90 {
                // A stale row first; the row that counts comes at the end of the file.
                let stale = [otid, byToken ? token.lowercased() : token, "stale-\(otid)", "stale\(otid)@example.com"]
                body.append(stale)
                var final = row
                if r >= 96 { final[3] = "" }  // the last row empties the email
                later.append(final)
                duplicates += 1
                map[key] = ["external_id": final[2], "email": final[3]]
            } else {
                body.append(row)
                map[key] = ["external_id": external, "email": email]
            }
        }
        let all = body + later
        let text = line(identityColumns) + all.map(line).joined()
        return Identities(text: text, map: map, duplicates: duplicates, rows: all.count, withoutRow: without)
    }

    /// Writes `text` gzip-compressed by /usr/bin/gzip at `path` (which ends in .gz).
    static func writeGzip(_ text: String, to path: String) throws {
        let plain = String(path.dropLast(3))
        try text.write(toFile: plain, atomically: true, encoding: .utf8)
        let r = try run("/usr/bin/gzip", ["-f", "-n", plain])
        #expect(r.status == 0, "\(r.stderr)")
    }

    // MARK: pipeline text

    /// Adds `lines` under the pipeline's `output:` block (make_world.py's ends with `formats`).
    static func addToOutput(_ pipeline: String, _ lines: String) throws {
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        let anchor = "  formats: [csv]\n"
        #expect(text.contains(anchor))
        let indented = lines.split(separator: "\n").map { "  " + $0 + "\n" }.joined()
        text = text.replacingOccurrences(of: anchor, with: anchor + indented)
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
    }

    /// Appends top-level lines to the pipeline file.
    static func append(_ pipeline: String, _ lines: String) throws {
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try (text + lines).write(toFile: pipeline, atomically: true, encoding: .utf8)
    }

    static func replace(_ pipeline: String, _ old: String, _ new: String) throws {
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        #expect(text.contains(old), "\(old) is not in the pipeline file")
        try text.replacingOccurrences(of: old, with: new).write(toFile: pipeline, atomically: true, encoding: .utf8)
    }

    /// The published folder's manifest as JSON.
    static func manifest(_ folder: String) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: folder + "/manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The catalog's offer ids, in catalog order.
    static func offerIds(worldFolder: String) throws -> [String] {
        let data = try #require(FileManager.default.contents(atPath: worldFolder + "/offers.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let offers = try #require(object["offers"] as? [[String: Any]])
        return offers.compactMap { $0["offerId"] as? String }
    }

    /// The catalog's ranking of its offers (docs/rules.md §3): HIGH priority first, then catalog
    /// order; offer id → rank, smaller first.
    static func offerRanks(worldFolder: String) throws -> [String: Int] {
        let data = try #require(FileManager.default.contents(atPath: worldFolder + "/offers.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let offers = try #require(object["offers"] as? [[String: Any]])
        var ranks: [String: Int] = [:]
        for (i, o) in offers.enumerated() {
            guard let id = o["offerId"] as? String else { continue }
            ranks[id] = (o["priority"] as? String == "HIGH" ? 0 : offers.count) + i
        }
        return ranks
    }

    /// The catalog's offers without an `appleId`: no link, so left out of the destinations and
    /// of their `winback_eligible_offer_ids` (docs/rules.md §10.10).
    static func offersWithoutLink(worldFolder: String) throws -> Set<String> {
        let data = try #require(FileManager.default.contents(atPath: worldFolder + "/offers.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let offers = try #require(object["offers"] as? [[String: Any]])
        return Set(offers.filter { ($0["appleId"] as? String ?? "").isEmpty }.compactMap { $0["offerId"] as? String })
    }
}
