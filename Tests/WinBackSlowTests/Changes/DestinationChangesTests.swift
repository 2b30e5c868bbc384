import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackDelivery
@testable import WinBackModel
@testable import WinBackSupport
@testable import WinBackTesting

/// Destination changes (docs/rules.md §10.5): tonight's files and the `-exited-` files imported
/// night after night into a simulated attribute store leave exactly tonight's audience in the
/// segment "winback_status is eligible", whatever the order of the imports.
@Suite("Destination changes: the audience in the tool equals tonight's", .serialized, .tags(.slow))
struct DestinationChangesTests {
    static let experiment = HoldoutAssignment(name: "dst", basisPoints: 5_000)

    /// An originalTransactionId starting with `prefix` that the experiment holds out or not.
    static func otid(_ prefix: String, heldOut: Bool) -> String {
        HandBuiltNights.otid(prefix, heldOut: heldOut, in: experiment)
    }

    /// The customers, by role: one who stays, one who returns and churns again, one who
    /// changes email, one who loses their identity row, one newly held out, one never
    /// addressable, and two sharing an email of whom one returns.
    static let stay = otid("2001", heldOut: false)
    static let again = otid("2002", heldOut: false)
    static let mail = otid("2003", heldOut: false)
    static let lost = otid("2004", heldOut: false)
    static let held = otid("2005", heldOut: true)
    static let noid = otid("2006", heldOut: false)
    static let dupA = otid("2007", heldOut: false)
    static let dupB = otid("2008", heldOut: false)

    static let nights = ["2026-06-01", "2026-07-01", "2026-08-01", "2026-09-01"]

    /// Monthly paid rows of `o` from January 2026 for three months: churned on 2026-04-01.
    static func churned(_ o: String) -> [String] {
        (0..<3).map { i in
            "\(o)-\(i),\(o),g1,p.monthly,2026-0\(i + 1)-01T00:00:00Z,2026-0\(i + 2)-01T00:00:00Z,,,USA"
        }
    }

    /// The identities on night `n` (0-based): key → (external_id, email).
    static func identities(night n: Int) -> [String: (String, String)] {
        var ids: [String: (String, String)] = [
            stay: ("u-stay", "stay@example.com"), again: ("u-again", "again@example.com"),
            mail: ("u-mail", n < 2 ? "mail-old@example.com" : "mail-new@example.com"),
            held: ("u-held", "held@example.com"),
            dupA: ("u-dupA", "shared@example.com"), dupB: ("u-dupB", "shared@example.com"),
        ]
        if n < 2 { ids[lost] = ("u-lost", "lost@example.com") }
        return ids
    }

    /// A world whose transactions hold every customer churned on 2026-04-01, with braze on
    /// best-offer and klaviyo per offer, and a holdout that starts on the third night.
    static func world() throws -> String {
        let dir = Paths.temporary() + "/world"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try HandBuiltNights.write(
            dir + "/t-base.csv", [stay, again, mail, lost, held, noid, dupA, dupB].flatMap(churned))
        try HandBuiltNights.writeCatalog(
            dir + "/offers.json", [("wb.a", "A", "6400000100", maximum: 12, priority: "HIGH")])
        let pipeline = """
            name: dest
            transactions:
              format: csv
              paths: ["t-*.csv"]
            offers: offers.json
            asOf: 2026-06-01
            output:
              directory: out
              destinations: [braze, {type: klaviyo, audience: per-offer}]
            identities:
              path: identities.csv
              key: original_transaction_id
            experiment:
              name: dst
              holdout: 50%
              start: 2026-08-01

            """
        try pipeline.write(toFile: dir + "/pipeline.yaml", atomically: true, encoding: .utf8)
        return dir + "/pipeline.yaml"
    }

    /// Night `n`'s inputs: its identities file, and on the second night the purchases of the
    /// customers who came back (active on 2026-07-01, churned again on 2026-07-15).
    static func prepare(_ pipeline: String, night n: Int) throws {
        let dir = (pipeline as NSString).deletingLastPathComponent
        var text = "original_transaction_id,external_id,email\n"
        for (k, v) in identities(night: n).sorted(by: { $0.key < $1.key }) { text += "\(k),\(v.0),\(v.1)\n" }
        try text.write(toFile: dir + "/identities.csv", atomically: true, encoding: .utf8)
        if n == 1 {
            try HandBuiltNights.write(
                dir + "/t-back.csv",
                [again, dupA].map { "\($0)-r,\($0),g1,p.monthly,2026-06-15T00:00:00Z,2026-07-15T00:00:00Z,,,USA" })
        }
    }

    static func options(_ pipeline: String, asOf: String, output: String) -> RunOptions {
        var o = RunOptions(pipelinePath: pipeline, asOf: asOf, output: output, threads: 2)
        o.now = ms("2026-09-02")
        return o
    }

    /// Night `n` (0-based) of the world at `pipeline`, prepared and run into `output`: the
    /// published folder.
    static func runNight(_ n: Int, _ pipeline: String, output: String) throws -> String {
        try prepare(pipeline, night: n)
        return try PipelineRun.run(options(pipeline, asOf: nights[n], output: output), progress: Progress(mode: .quiet))
            .published
    }

    /// A tool's attribute store: one profile per identity value, each import upserting the
    /// row's non-empty `winback_*` values (a blank cell leaves the attribute as it was), so
    /// only `winback_status` decides who is in the segment.
    struct Store {
        var profiles: [String: [String: String]] = [:]

        mutating func importFile(_ bytes: [UInt8]) {
            let records = DeliveryFixture.parse(bytes)
            guard let header = records.first else { return }
            for r in records.dropFirst() {
                for (name, value) in zip(header.dropFirst(), r.dropFirst()) where !value.isEmpty {
                    profiles[r[0], default: [:]][name] = value
                }
            }
        }

        /// The segment "winback_status is eligible".
        var eligible: Set<String> { Set(profiles.filter { $0.value["winback_status"] == "eligible" }.keys) }
    }

    /// The files of a set: tonight's (`<list>-NNN.csv`) and the exited (`<list>-exited-NNN.csv`).
    static func files(_ folder: String, type: String, list: String) -> (tonight: [[UInt8]], exited: [[UInt8]]) {
        let dir = folder + "/destinations/" + type
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
        let exited = names.filter { $0.hasPrefix(list + "-exited-") }
        let tonight = names.filter { $0.hasPrefix(list + "-") && !exited.contains($0) }
        return (
            tonight.map { DeliveryFixture.bytes(dir + "/" + $0) }, exited.map { DeliveryFixture.bytes(dir + "/" + $0) }
        )
    }

    /// Tonight's audience of a set, from the published segment and the identities the test
    /// wrote (not from the destination files).
    static func audience(_ folder: String, list: String, column: KeyPath<(String, String), String>, night n: Int)
        -> Set<String>
    {
        let ids = identities(night: n)
        var out: Set<String> = []
        for row in DeliveryFixture.table(folder + "/segments/\(list).csv").rows {
            if let v = ids[row["original_transaction_id"] ?? ""]?[keyPath: column], !v.isEmpty { out.insert(v) }
        }
        return out
    }

    /// The identity values of the exited files, in order, each row checked: status `exited`,
    /// tonight's date, every other `winback_` column empty.
    static func exitedValues(_ files: [[UInt8]], asOf: String) -> [String] {
        var values: [String] = []
        for f in files {
            let records = DeliveryFixture.parse(f)
            #expect(
                records.first?.suffix(6) == [
                    "winback_offer_id", "winback_offer_url", "winback_eligible_offer_ids",
                    "winback_months_since_last_subscribed", "winback_as_of", "winback_status",
                ])
            for r in records.dropFirst() {
                #expect(r.count == 7 && r[1...4].allSatisfy(\.isEmpty) && r[5] == asOf && r[6] == "exited", "\(r)")
                values.append(r[0])
            }
        }
        return values
    }

    @Test(
        "four nights: who returns, churns again, changes email, loses their identity, is newly held out; the stores hold tonight's audience in either order"
    )
    func simulatedStore() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        let bounded = Paths.temporary() + "/bounded"
        let quiet = Progress(mode: .quiet)
        let sets: [(type: String, list: String, column: KeyPath<(String, String), String>)] = [
            ("braze", "best-offer", \.0), ("klaviyo", "wb.a", \.1),
        ]
        // Per set, a store fed tonight's files first and one fed the exited files first.
        var stores = Array(repeating: (Store(), Store()), count: sets.count)
        // Exited values expected per night and set, written out from the story above.
        let expectedExits: [[[String]]] = [
            [[], []],
            [["u-again", "u-dupA"].sorted(), ["again@example.com"]],
            [["u-held", "u-lost"], ["held@example.com", "lost@example.com", "mail-old@example.com"]],
            [[], []],
        ]
        for (n, date) in Self.nights.enumerated() {
            try Self.prepare(pipeline, night: n)
            let folder = try PipelineRun.run(Self.options(pipeline, asOf: date, output: output), progress: quiet)
                .published
            // The same files under --memory (docs/rules.md §10.5): the changes come from published files.
            let other = try ShardedRun.bounded(
                Self.options(pipeline, asOf: date, output: bounded), memory: 64 << 20, progress: quiet, shards: 2
            ).published
            for (s, set) in sets.enumerated() {
                let (tonight, exited) = Self.files(folder, type: set.type, list: set.list)
                let (tonightB, exitedB) = Self.files(other, type: set.type, list: set.list)
                #expect(tonight == tonightB && exited == exitedB, "night \(date) \(set.type): --memory differs")
                #expect(!tonight.isEmpty && !exited.isEmpty, "night \(date) \(set.type): a file missing")
                for f in tonight { stores[s].0.importFile(f) }
                for f in exited { stores[s].0.importFile(f) }
                for f in exited { stores[s].1.importFile(f) }
                for f in tonight { stores[s].1.importFile(f) }
                let audience = Self.audience(folder, list: set.list, column: set.column, night: n)
                #expect(audience.count >= 3, "night \(date) \(set.type): \(audience)")
                #expect(stores[s].0.eligible == audience, "night \(date) \(set.type), tonight's files first")
                #expect(stores[s].1.eligible == audience, "night \(date) \(set.type), exited files first")
                let values = Self.exitedValues(exited, asOf: date)
                #expect(values.sorted() == expectedExits[n][s], "night \(date) \(set.type) exited")
                #expect(Set(values).count == values.count, "night \(date) \(set.type): a value exited twice")
                let entry = (try DeliveryFixture.manifest(folder)["destinations"] as? [[String: Any]])?.first {
                    $0["type"] as? String == set.type
                }
                #expect(entry?["exited"] as? Int == values.count, "night \(date) \(set.type) manifest")
            }
        }
        // The story reached the files: the one who churned again is back in Braze on the last night.
        let last = try #require(Self.files(output + "/dest/latest", type: "braze", list: "best-offer").tonight.first)
        #expect(String(decoding: last, as: UTF8.self).contains("u-again,"))
    }

    @Test("tonight's values on disk (under --memory) give the exits of the set in memory, row for row")
    func exitsOnDisk() throws {
        // Tonight: 500 values; the baseline: some of them, others, repeats, empties and values
        // longer than an identity value may be (each of those exits every time, as in memory).
        let tonight = (0..<500).map { "user\($0)@example.com" }
        var baseline: [String] = []
        for i in 0..<1_200 {
            switch i % 7 {
            case 0: baseline.append("")
            case 1: baseline.append(tonight[i % 500])
            case 2: baseline.append("gone\(i % 300)@example.com")  // repeats after 300
            case 3: baseline.append(String(repeating: "x", count: 600 + i % 2))
            default: baseline.append("left\(i)@example.com")
            }
        }
        func exits(_ t: TonightValues) throws -> [Int] {
            for v in tonight { try t.insert(v) }
            let values = baseline.map { Array($0.utf8) }
            var calls = 0
            let exits = try t.exits { body in
                calls += 1
                for v in values { try body(v) }
            }
            #expect(calls <= 1, "the exits ask for the baseline's values once before the rows are written")
            return values.indices.filter { exits($0, values[$0]) }
        }
        let folder = Paths.temporary() + "/exits"
        let onDisk = try TonightValues(folder: folder)
        let inMemory = try exits(TonightValues(folder: nil))
        #expect(try exits(onDisk) == inMemory)
        onDisk.discard()
        #expect(!FileManager.default.fileExists(atPath: folder))
        // What exits: every non-empty value not tonight's, first time seen; long ones every time.
        let expected = baseline.indices.filter { i in
            let v = baseline[i]
            return !v.isEmpty && !tonight.contains(v) && (v.utf8.count > 512 || !baseline[..<i].contains(v))
        }
        #expect(inMemory == expected)
    }

    /// Rewrites a published file and its size and SHA-256 in its run's manifest, as a run from
    /// before `winback_status` would have written them.
    static func republish(_ folder: String, _ rel: String, _ text: String) throws {
        try text.write(toFile: folder + "/" + rel, atomically: false, encoding: .utf8)
        let sha = try ReadSupport.sha256sum(folder + "/" + rel)
        let path = folder + "/manifest.json"
        var manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var outputs = try #require(manifest["outputs"] as? [[String: Any]])
        let i = try #require(outputs.firstIndex { $0["path"] as? String == rel })
        outputs[i]["bytes"] = text.utf8.count
        outputs[i]["sha256"] = sha
        manifest["outputs"] = outputs
        try JSONSerialization.data(withJSONObject: manifest, options: [.sortedKeys]).write(
            to: URL(fileURLWithPath: path))
    }

    @Test("a baseline from before winback_status is read by its header's names, rows that are not CSV skipped")
    func oldBaseline() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        let first = try Self.runNight(0, pipeline, output: output)
        // Columns of old, without winback_status, a row that is not CSV and one that left.
        let old =
            "external_id,winback_offer_id,winback_offer_url,winback_eligible_offer_ids,"
            + "winback_months_since_last_subscribed,winback_as_of\n"
            + "u-stay,wb.a,,wb.a,3,2026-06-01\nu-a\"bc,wb.a,,wb.a,3,2026-06-01\n"
            + "u-gone,wb.a,,wb.a,3,2026-06-01\n\"u,\"\"quoted\"\"\ngone\",wb.a,,wb.a,3,2026-06-01\n"
            + "u-dupB,wb.a,,wb.a,3,2026-06-01\nu-gone,wb.a,,wb.a,3,2026-06-01\n"
        try Self.republish(first, "destinations/braze/best-offer-001.csv", old)
        let second = try Self.runNight(1, pipeline, output: output)
        let exited = Self.files(second, type: "braze", list: "best-offer").exited
        #expect(Self.exitedValues(exited, asOf: Self.nights[1]) == ["u-gone", "u,\"quoted\"\ngone"])
    }

    @Test("a baseline's destination file changed since it was published fails the run (65), naming it")
    func tamperedBaseline() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        let first = try Self.runNight(0, pipeline, output: output)
        let path = first + "/destinations/klaviyo/wb.a-001.csv"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(of: "stay@", with: "stay2@").write(
            toFile: path, atomically: false, encoding: .utf8)
        #expect {
            try Self.runNight(1, pipeline, output: output)
        } throws: { e in
            (e as? WinBackError)?.code == .badData && "\(e)".contains("wb.a-001.csv")
        }
    }
}
