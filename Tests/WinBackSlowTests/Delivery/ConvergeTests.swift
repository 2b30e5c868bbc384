import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackSupport

/// The tool converges whatever nights it missed (docs/rules.md §10.10): simulated tools import
/// the files a run publishes, some every night, some not, and after each import hold exactly
/// that night's audience; one row per identity value; never an empty link; identity columns as
/// teams name them.
@Suite("Delivery: the tool converges whatever nights it missed", .serialized, .tags(.slow))
struct ConvergeTests {
    /// A generated world of `customers`, Braze on best-offer and Klaviyo per offer; one identities
    /// row in ten takes the email of the row before it (an inbox two customers share).
    static func world(customers: Int = 600) throws -> String {
        let pipeline = try HostileInputTests.world(customers: customers)
        let folder = HostileInputTests.folder(pipeline)
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        text = text.replacingOccurrences(
            of: "destinations: [braze, klaviyo]", with: "destinations: [braze, {type: klaviyo, audience: per-offer}]")
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        let r = try DeliveryFixture.run("/usr/bin/gzip", ["-dc", folder + "/identities.csv.gz"])
        var rows = DeliveryFixture.parse(Array(r.stdout))
        let email = try #require(rows.first?.firstIndex(of: "email"))
        for i in stride(from: 2, to: rows.count, by: 10) where !rows[i - 1][email].isEmpty {
            rows[i][email] = rows[i - 1][email]
        }
        try write(rows, gzipped: folder + "/identities.csv.gz")
        return pipeline
    }

    static func write(_ rows: [[String]], gzipped path: String) throws {
        let text = rows.map(DeliveryFixture.line).joined()
        let w = try DeliveryFixture.run("/bin/sh", ["-c", "gzip -c > '\(path)'"], stdin: text)
        #expect(w.status == 0)
    }

    static func night(_ pipeline: String, _ date: String, output: String) throws -> String {
        var o = RunOptions(pipelinePath: pipeline, asOf: date, output: output, threads: 2)
        o.now = ms(date)
        return try PipelineRun.run(o, progress: Progress(mode: .quiet)).published
    }

    /// The rows of the files of one destination in `folder`, tonight's and the exited, each with
    /// its list; the header's names as keys.
    static func files(_ folder: String, _ type: String) throws -> (
        tonight: [(String, [String: String])], exited: [(String, [String: String])]
    ) {
        let dir = folder + "/destinations/" + type
        var tonight: [(String, [String: String])] = []
        var exited: [(String, [String: String])] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: dir).sorted() {
            let records = DeliveryFixture.parse(DeliveryFixture.bytes(dir + "/" + name))
            guard let header = records.first else { continue }
            let isExited = name.contains("-exited-")
            let list = String(
                name.prefix(upTo: name.range(of: isExited ? "-exited-" : "-", options: .backwards)!.lowerBound))
            for r in records.dropFirst() {
                let row = Dictionary(uniqueKeysWithValues: zip(header, r))
                if isExited { exited.append((list, row)) } else { tonight.append((list, row)) }
            }
        }
        return (tonight, exited)
    }

    /// A tool that imports CSV files into profiles keyed by their first column: a non-empty cell
    /// sets the attribute, a blank one leaves it (Braze, Klaviyo: docs/rules.md §10.5).
    struct Store {
        var profiles: [String: [String: String]] = [:]

        mutating func importRows(_ rows: [(String, [String: String])], key: String) {
            for (_, row) in rows {
                guard let k = row[key] else { continue }
                for (c, v) in row where c != key && !v.isEmpty { profiles[k, default: [:]][c] = v }
            }
        }

        var eligible: Set<String> { Set(profiles.filter { $0.value["winback_status"] == "eligible" }.keys) }
    }

    @Test(
        "34 daily nights: tools importing every night, every other night, or after six missed nights hold exactly that night's audience and offers; one row per value; every row has its link"
    )
    func thirtyFourNights() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        // Which nights each tool imports (0-based): every night, every other night, all but 10–15.
        let schedules: [(String, (Int) -> Bool)] = [
            ("every night", { _ in true }), ("every other night", { $0 % 2 == 0 }),
            ("six missed", { !(10...15).contains($0) }),
        ]
        var braze = Array(repeating: Store(), count: schedules.count)
        var klaviyo = Array(repeating: Store(), count: schedules.count)
        var changesSeen = 0
        var folded = 0
        var previous: Set<String> = []
        for n in 0..<34 {
            let date = Timestamp.date(ms("2026-10-01") + Int64(n) * 86_400_000)
            let folder = try Self.night(pipeline, date, output: output)
            let b = try Self.files(folder, "braze")
            let k = try Self.files(folder, "klaviyo")
            // One row per identity value in a file set; every row carries its offer's link.
            for (name, files) in [("braze", b.tonight), ("klaviyo", k.tonight)] {
                var seen: Set<[String]> = []
                for (list, row) in files {
                    let key = row["external_id"] ?? row["Email"] ?? ""
                    #expect(seen.insert([list, key]).inserted, "\(date) \(name) \(list): \(key) twice")
                    #expect(!(row["winback_offer_url"] ?? "").isEmpty, "\(date) \(name): a row without its link")
                }
            }
            let audience = Set(b.tonight.compactMap { $0.1["external_id"] })
            let offers = Dictionary(b.tonight.map { ($0.1["external_id"]!, $0.1["winback_offer_id"]!) }) { a, _ in a }
            let emails = Set(k.tonight.compactMap { $0.1["Email"] })
            if audience != previous { changesSeen += 1 }
            previous = audience
            let manifest = try DeliveryFixture.manifest(folder)
            for d in manifest["destinations"] as? [[String: Any]] ?? [] {
                folded += d["folded"] as? Int ?? 0
                #expect(d["without_link"] as? Int == 0)
            }
            for (i, schedule) in schedules.enumerated() where schedule.1(n) {
                // Tonight's files and the exited files; either order gives the same store.
                braze[i].importRows(b.tonight, key: "external_id")
                braze[i].importRows(b.exited, key: "external_id")
                klaviyo[i].importRows(k.exited, key: "Email")
                klaviyo[i].importRows(k.tonight, key: "Email")
                #expect(braze[i].eligible == audience, "\(date) braze, \(schedule.0)")
                #expect(klaviyo[i].eligible == emails, "\(date) klaviyo, \(schedule.0)")
                for v in audience {
                    #expect(braze[i].profiles[v]?["winback_offer_id"] == offers[v], "\(date) braze \(v), \(schedule.0)")
                }
            }
        }
        #expect(changesSeen > 10, "the audience changed on \(changesSeen) nights")
        #expect(folded > 0, "some rows were folded")
    }

    @Test("without the exit window a tool that missed a night keeps people who left: the window is what converges")
    func windowNeeded() throws {
        let pipeline = try Self.world()
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try text.replacingOccurrences(of: "output:\n", with: "output:\n  exitDays: 0\n").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        let output = Paths.temporary() + "/out"
        var store = Store()
        var wrong = 0
        for n in 0..<20 {
            let date = Timestamp.date(ms("2026-10-01") + Int64(n) * 86_400_000)
            let folder = try Self.night(pipeline, date, output: output)
            guard n % 2 == 0 else { continue }
            let b = try Self.files(folder, "braze")
            store.importRows(b.tonight, key: "external_id")
            store.importRows(b.exited, key: "external_id")
            wrong += store.eligible.subtracting(b.tonight.compactMap { $0.1["external_id"] }).count
        }
        #expect(wrong > 0, "a tool importing every other night keeps leavers when only the baseline exits")
    }

    @Test("an offer without appleId: its customers are left out of the destination files, counted and warned")
    func withoutLink() throws {
        let pipeline = try Self.world(customers: 300)
        let catalog = HostileInputTests.folder(pipeline) + "/offers.json"
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: catalog))) as? [String: Any])
        var offers = try #require(object["offers"] as? [[String: Any]])
        let id = try #require(offers.first?["offerId"] as? String)
        offers[0]["appleId"] = nil
        object["offers"] = offers
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: catalog))
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("offer '\(id)' has no appleId"), "\(r.stderr)")
        let folder = output + "/generated/latest"
        let segment = DeliveryFixture.table(folder + "/segments/\(id).csv").rows
        #expect(!segment.isEmpty)
        let manifest = try DeliveryFixture.manifest(folder)
        let klaviyo = try #require(
            (manifest["destinations"] as? [[String: Any]])?.first { $0["type"] as? String == "klaviyo" })
        #expect(klaviyo["without_link"] as? Int ?? 0 >= segment.count)
        let k = try Self.files(folder, "klaviyo")
        #expect(!k.tonight.contains { $0.0 == id })
        #expect(k.tonight.allSatisfy { !($0.1["winback_offer_url"] ?? "").isEmpty })
        // Nor is the offer among the eligible offers the rows name: the tool could not reach it.
        let b = try Self.files(folder, "braze")
        #expect(
            (k.tonight + b.tonight).allSatisfy {
                !($0.1["winback_eligible_offer_ids"] ?? "").split(separator: ";").contains(Substring(id))
            })
        let v = try CLI.run(["validate", pipeline])
        #expect(v.stderr.contains("'\(id)' has no appleId"), "\(v.stderr)")
    }

    @Test("identity headers in any case, and identities.columns, give the same files; an unknown column is 78")
    func identityColumns() throws {
        let pipeline = try Self.world(customers: 300)
        let folder = HostileInputTests.folder(pipeline)
        let reference = Paths.temporary()
        _ = try Self.night(pipeline, "2026-11-22", output: reference)
        let r = try DeliveryFixture.run("/usr/bin/gzip", ["-dc", folder + "/identities.csv.gz"])
        let rows = DeliveryFixture.parse(Array(r.stdout))
        func files(_ header: [String], _ extra: String) throws -> [String: Data] {
            try Self.write([header] + rows.dropFirst(), gzipped: folder + "/identities.csv.gz")
            let text = try String(contentsOfFile: pipeline, encoding: .utf8)
            let with = text.replacingOccurrences(
                of: "  key: original_transaction_id\n", with: "  key: original_transaction_id\n" + extra)
            let path = folder + "/variant.yaml"
            try with.write(toFile: path, atomically: true, encoding: .utf8)
            let out = Paths.temporary()
            _ = try Self.night(path, "2026-11-22", output: out)
            return publishedFiles(out + "/generated/latest").filter { $0.key.hasPrefix("destinations/") }
        }
        let expected = publishedFiles(reference + "/generated/latest").filter {
            $0.key.hasPrefix("destinations/")
        }
        #expect(expected.count > 4)
        let upper = rows[0].map { $0 == "email" ? "Email" : $0 == "external_id" ? "EXTERNAL_ID" : $0 }
        #expect(try files(upper, "") == expected)
        let named = rows[0].map { $0 == "email" ? "E-mail Address" : $0 == "external_id" ? "user_id" : $0 }
        #expect(try files(named, "  columns: {email: \"E-mail Address\", external_id: user_id}\n") == expected)
        // A mapped column the file lacks, or a destination column that is not one: 78 before reading.
        try Self.write([named] + rows.dropFirst(), gzipped: folder + "/identities.csv.gz")
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        for (extra, says) in [
            ("  columns: {email: \"Mail\"}\n", "'Mail'"), ("  columns: {phone: tel}\n", "identities.columns.phone"),
        ] {
            try text.replacingOccurrences(
                of: "  key: original_transaction_id\n", with: "  key: original_transaction_id\n" + extra
            )
            .write(toFile: pipeline, atomically: true, encoding: .utf8)
            for args in [["validate", pipeline], ["run", pipeline, "--output", Paths.temporary()]] {
                let c = try CLI.run(args)
                #expect(c.status == 78 && c.stderr.contains(says), "\(args[0]): \(c.stderr)")
            }
        }
    }

    @Test("explain finds a customer by its email in upper case, at the latest published run's as-of")
    func explainByEmail() throws {
        let pipeline = try Self.world(customers: 300)
        let folder = HostileInputTests.folder(pipeline)
        let r = try DeliveryFixture.run("/usr/bin/gzip", ["-dc", folder + "/identities.csv.gz"])
        let rows = DeliveryFixture.parse(Array(r.stdout))
        let email = try #require(rows.first?.firstIndex(of: "email"))
        let value = try #require(rows.dropFirst().first { !$0[email].isEmpty }?[email])
        let run = try CLI.run(["run", pipeline, "--quiet", "--as-of", "2026-11-20"])
        #expect(run.status == 0, "\(run.stderr)")
        let e = try CLI.run(["explain", pipeline, "--customer", value.uppercased()])
        #expect(e.status == 0, "\(e.stderr)")
        #expect(e.stdout.contains("latest published run, 2026-11-20"), "\(e.stdout)")
        let given = try CLI.run(["explain", pipeline, "--customer", value, "--as-of", "2026-11-22"])
        #expect(given.status == 0 && !given.stdout.contains("latest published run"))
    }

    @Test("validate exits 73 for an output folder below a regular file, as run does")
    func validateOutputFolder() throws {
        let pipeline = try Self.world(customers: 100)
        let folder = HostileInputTests.folder(pipeline)
        try Data("x".utf8).write(to: URL(fileURLWithPath: folder + "/blocker"))
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try text.replacingOccurrences(of: "  directory: out\n", with: "  directory: blocker/out\n").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        let v = try CLI.run(["validate", pipeline])
        #expect(v.status == 73 && v.stderr.contains("blocker"), "\(v.stderr)")
        let r = try CLI.run(["run", pipeline, "--quiet"])
        #expect(r.status == 73, "\(r.stderr)")
    }

    @Test("an email whose case changed is one value: never exited while it is eligible under another case")
    func emailCase() throws {
        let pipeline = try Self.world(customers: 300)
        let folder = HostileInputTests.folder(pipeline)
        let output = Paths.temporary() + "/out"
        let first = try Self.night(pipeline, "2026-11-21", output: output)
        let emails = try Self.files(first, "klaviyo").tonight.compactMap { $0.1["Email"] }
        let chosen = Set(emails.prefix(5))
        #expect(chosen.count == 5)
        let r = try DeliveryFixture.run("/usr/bin/gzip", ["-dc", folder + "/identities.csv.gz"])
        var rows = DeliveryFixture.parse(Array(r.stdout))
        let column = try #require(rows.first?.firstIndex(of: "email"))
        for i in rows.indices.dropFirst() where chosen.contains(rows[i][column]) {
            rows[i][column] = rows[i][column].uppercased()
        }
        try Self.write(rows, gzipped: folder + "/identities.csv.gz")
        let second = try Self.night(pipeline, "2026-11-22", output: output)
        let k = try Self.files(second, "klaviyo")
        let eligible = Set(k.tonight.compactMap { $0.1["Email"]?.lowercased() })
        let exited = Set(k.exited.compactMap { $0.1["Email"]?.lowercased() })
        #expect(eligible.isDisjoint(with: exited), "\(eligible.intersection(exited).sorted())")
        #expect(k.tonight.contains { chosen.contains($0.1["Email"]!.lowercased()) && $0.1["Email"]!.contains("@") })
        #expect(k.tonight.allSatisfy { !chosen.contains($0.1["Email"]!) }, "written as tonight's file has it")
    }
}
