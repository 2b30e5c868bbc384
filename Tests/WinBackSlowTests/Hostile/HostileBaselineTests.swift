import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackDelivery
@testable import WinBackSupport

/// The newest surfaces under attack (docs/rules.md §6.3): what a run reads of an earlier run is
/// an input, bounded and checked; offers leave their lists; pruning removes no more than it
/// may; configuration files are bounded. Every run here is the command line's, as cron's is.
@Suite("The newest surfaces under attack: baselines, offers, pruning, configuration", .serialized, .tags(.slow))
struct HostileBaselineTests {
    /// A generated world (60 customers; Klaviyo per offer with `perOffer`), its pipeline's path.
    static func world(customers: Int = 60, perOffer: Bool = false, keep: Int? = nil) throws -> String {
        let pipeline = try HostileInputTests.world(customers: customers)
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        if perOffer {
            text = text.replacingOccurrences(
                of: "destinations: [braze, klaviyo]",
                with: "destinations: [braze, {type: klaviyo, audience: per-offer}]")
        }
        if let keep {
            text = text.replacingOccurrences(of: "output:\n", with: "output:\n  keep: \(keep)\n  exitDays: 0\n")
        }
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        return pipeline
    }

    /// One night of `pipeline` into `output` (nil: the pipeline's own), with `extra` arguments.
    @discardableResult
    static func night(_ pipeline: String, _ date: String, output: String?, _ extra: [String] = []) throws -> CLI.Result
    {
        try CLI.run(["run", pipeline, "--quiet", "--as-of", date] + (output.map { ["--output", $0] } ?? []) + extra)
    }

    static func expectNight(
        _ pipeline: String, _ date: String, output: String?, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let r = try night(pipeline, date, output: output)
        #expect(r.status == 0, "\(date): \(r.stderr)", sourceLocation: sourceLocation)
    }

    static func link(_ path: String) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: path) }

    static func csv(_ path: String) -> [[String]] { DeliveryFixture.parse(DeliveryFixture.bytes(path)) }

    /// Every data row of the files of `folder` whose names start with `prefix` and end in
    /// `-NNN.csv`.
    static func rows(_ folder: String, _ prefix: String) throws -> [[String]] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            $0.hasPrefix(prefix) && $0.dropFirst(prefix.count).count == 7 && $0.hasSuffix(".csv")
        }.sorted().flatMap { csv(folder + "/" + $0).dropFirst() }
    }

    // MARK: Baselines read as inputs

    @Test(
        "a baseline segment file with a 40 MB line is 65 at once naming it, within --memory 64MB and without",
        .enabled(if: HostileIdentityTests.timeAvailable, "needs /usr/bin/time (Debian: time) to measure peak memory"))
    func longBaselineLine() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        try Self.expectNight(pipeline, "2026-11-21", output: output)
        let path = output + "/generated/2026-11-21/segments/best-offer.csv"
        let h = try #require(FileHandle(forWritingAtPath: path))
        try h.seekToEnd()
        let chunk = Data(repeating: UInt8(ascii: "a"), count: 1 << 20)
        for _ in 0..<40 { try h.write(contentsOf: chunk) }
        try h.close()
        for (memory, bound) in [(["--memory", "64MB"], 64_000_000), ([], 256 << 20)] {
            let (r, peak) = try HostileIdentityTests.measured(
                ["run", pipeline, "--quiet", "--as-of", "2026-11-22", "--output", output] + memory)
            #expect(r.status == 65, "\(memory): \(r.stderr)")
            #expect(r.stderr.contains("best-offer.csv") && r.stderr.contains("longer than"), "\(r.stderr)")
            #expect(peak > 0 && peak < bound, "\(memory): peak \(peak)")
            #expect(Self.link(output + "/generated/latest") == "2026-11-21")
        }
    }

    @Test(
        "a baseline manifest empty, cut, gone, a link, too large or of another pipeline is 65 naming it, never passed over for an older run"
    )
    func damagedManifests() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        let root = output + "/generated"
        try Self.expectNight(pipeline, "2026-11-20", output: output)
        try Self.expectNight(pipeline, "2026-11-21", output: output)
        let manifest = root + "/2026-11-21/manifest.json"
        let good = try Data(contentsOf: URL(fileURLWithPath: manifest))
        var object = try #require(try JSONSerialization.jsonObject(with: good) as? [String: Any])
        object["pipeline"] = "another-app"
        let foreign = try JSONSerialization.data(withJSONObject: object)
        let elsewhere = Paths.temporary() + "/manifest.json"
        try good.write(to: URL(fileURLWithPath: elsewhere))
        let damages: [(String, () throws -> Void)] = [
            ("empty", { try Data().write(to: URL(fileURLWithPath: manifest)) }),
            ("cut", { try good.prefix(good.count / 2).write(to: URL(fileURLWithPath: manifest)) }),
            ("gone", { try FileManager.default.removeItem(atPath: manifest) }),
            (
                "a link",
                {
                    try FileManager.default.removeItem(atPath: manifest)
                    try FileManager.default.createSymbolicLink(atPath: manifest, withDestinationPath: elsewhere)
                }
            ),
            ("another pipeline's", { try foreign.write(to: URL(fileURLWithPath: manifest)) }),
            (
                "65 MB",
                {
                    try good.write(to: URL(fileURLWithPath: manifest))
                    let h = try #require(FileHandle(forWritingAtPath: manifest))
                    try h.truncate(atOffset: UInt64(65 << 20))
                    try h.close()
                }
            ),
        ]
        for (what, damage) in damages {
            try? FileManager.default.removeItem(atPath: manifest)
            try good.write(to: URL(fileURLWithPath: manifest))
            try damage()
            let r = try Self.night(pipeline, "2026-11-22", output: output)
            #expect(r.status == 65, "\(what): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("2026-11-21/manifest.json"), "\(what): \(r.stderr)")
            #expect(Self.link(root + "/latest") == "2026-11-21", "\(what)")
        }
        // Restored, the night compares with 2026-11-21.
        try? FileManager.default.removeItem(atPath: manifest)
        try good.write(to: URL(fileURLWithPath: manifest))
        try Self.expectNight(pipeline, "2026-11-22", output: output)
        let tonight = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: root + "/latest/manifest.json")))
                as? [String: Any])
        #expect(
            ((tonight["changes"] as? [String: Any])?["baseline"] as? [String: Any])?["date"] as? String == "2026-11-21")
    }

    @Test("a valid 10 MB baseline manifest is read in memory, and refused (65) under --memory 64MB within its limit")
    func largeManifestUnderMemory() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        try Self.expectNight(pipeline, "2026-11-21", output: output)
        let manifest = output + "/generated/2026-11-21/manifest.json"
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: manifest))) as? [String: Any])
        object["padding"] = Array(repeating: String(repeating: "x", count: 100), count: 100_000)
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: manifest))
        let copy = Paths.temporary() + "/copy"
        try FileManager.default.copyItem(atPath: output, toPath: copy)
        let bounded = try Self.night(pipeline, "2026-11-22", output: output, ["--memory", "64MB"])
        #expect(bounded.status == 65 && bounded.stderr.contains("manifest.json"), "\(bounded.stderr)")
        let inMemory = try Self.night(pipeline, "2026-11-22", output: copy)
        #expect(inMemory.status == 0, "\(inMemory.stderr)")
    }

    @Test("a dated link to another pipeline's run is never this pipeline's baseline (65)")
    func foreignDatedLink() throws {
        let pipeline = try Self.world()
        let output = Paths.temporary() + "/out"
        try Self.expectNight(pipeline, "2026-11-20", output: output)
        // Another app's pipeline publishing beside it.
        let other = HostileInputTests.folder(pipeline) + "/other.yaml"
        try String(contentsOfFile: pipeline, encoding: .utf8).replacingOccurrences(
            of: "name: generated", with: "name: other-app"
        ).write(toFile: other, atomically: true, encoding: .utf8)
        try Self.expectNight(other, "2026-11-21", output: output)
        try FileManager.default.createSymbolicLink(
            atPath: output + "/generated/2026-11-21", withDestinationPath: "../other-app/2026-11-21")
        let r = try Self.night(pipeline, "2026-11-22", output: output)
        #expect(r.status == 65 && r.stderr.contains("other-app"), "\(r.stderr)")
        #expect(Self.link(output + "/generated/latest") == "2026-11-20")
    }

    // MARK: Offers leave their lists

    @Test(
        "an offer that left the catalog exits everyone in its changes (offer_removed) and its per-offer exited files; no value is exited and eligible in one destination"
    )
    func retiredOffer() throws {
        let pipeline = try Self.world(customers: 300, perOffer: true)
        let output = Paths.temporary() + "/out"
        let root = output + "/generated"
        try Self.expectNight(pipeline, "2026-11-21", output: output)
        let before = root + "/2026-11-21"
        // The offer with the most customers leaves the catalog.
        let catalog = HostileInputTests.folder(pipeline) + "/offers.json"
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: catalog))) as? [String: Any])
        var offers = try #require(object["offers"] as? [[String: Any]])
        let ids = offers.compactMap { $0["offerId"] as? String }
        let sizes = ids.map { Self.csv(before + "/segments/\($0).csv").count - 1 }
        let retired = ids[sizes.indices.max { sizes[$0] < sizes[$1] }!]
        offers.removeAll { $0["offerId"] as? String == retired }
        object["offers"] = offers
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: catalog))
        try Self.expectNight(pipeline, "2026-11-22", output: output)
        let tonight = root + "/2026-11-22"

        // Its segment's changes: every customer of the baseline's segment, exited, offer_removed.
        let was = Self.csv(before + "/segments/\(retired).csv").dropFirst()
        let changes = Self.csv(tonight + "/segments/changes/\(retired).csv")
        #expect(changes.first == SegmentChanges.columns)
        #expect(changes.count - 1 == was.count && was.count > 10)
        #expect(changes.dropFirst().map { [$0[1], $0[2], $0[4]] } == was.map { [$0[0], $0[1], $0[9]] })
        #expect(changes.dropFirst().allSatisfy { $0[0] == "exited" && $0[3].isEmpty && $0[5] == "offer_removed" })
        #expect(!FileManager.default.fileExists(atPath: tonight + "/segments/\(retired).csv"))

        // Per destination: eligible tonight anywhere, or exited; never both, and every value of the
        // retired list's baseline files exits unless it is eligible in another list tonight.
        for type in ["braze", "klaviyo"] {
            let folder = tonight + "/destinations/" + type
            let names = try FileManager.default.contentsOfDirectory(atPath: folder)
            let exitedFiles = names.filter { $0.contains("-exited-") }
            let eligible = Set(
                names.filter { !$0.contains("-exited-") }.flatMap { Self.csv(folder + "/" + $0).dropFirst() }.map {
                    $0[0]
                })
            let exited = Set(exitedFiles.flatMap { Self.csv(folder + "/" + $0).dropFirst() }.map { $0[0] })
            #expect(eligible.isDisjoint(with: exited), "\(type): \(eligible.intersection(exited).sorted())")
            if type == "klaviyo" {
                let listed = Set(try Self.rows(before + "/destinations/klaviyo", retired + "-").map { $0[0] })
                let gone = Set(try Self.rows(folder, retired + "-exited-").map { $0[0] })
                #expect(!listed.isEmpty)
                #expect(gone == listed.subtracting(eligible))
                #expect(!listed.intersection(eligible).isEmpty, "some of the retired list are eligible elsewhere")
            }
        }
        // The night after, the retired list's exits are repeated while the run that held it is in
        // the exit window (docs/rules.md §10.10), its segment's changes are not.
        try Self.expectNight(pipeline, "2026-11-23", output: output)
        let repeated = Set(try Self.rows(root + "/2026-11-23/destinations/klaviyo", retired + "-exited-").map { $0[0] })
        let held = Set(try Self.rows(before + "/destinations/klaviyo", retired + "-").map { $0[0] })
        #expect(!repeated.isEmpty && repeated.isSubset(of: held))
        #expect(!FileManager.default.fileExists(atPath: root + "/2026-11-23/segments/changes/\(retired).csv"))
        // Once no run of the window held the list, it has no file at all.
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try text.replacingOccurrences(of: "output:\n", with: "output:\n  exitDays: 1\n").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        try Self.expectNight(pipeline, "2026-11-24", output: output)
        let later = try FileManager.default.contentsOfDirectory(atPath: root + "/2026-11-24/destinations/klaviyo")
        #expect(!later.contains { $0.hasPrefix(retired + "-") }, "\(later)")
    }

    // MARK: Pruning

    @Test("pruning an alias link (cp -P) of a kept run removes the link, never the folder behind it")
    func aliasLink() throws {
        let pipeline = try Self.world(keep: 2)
        let output = Paths.temporary() + "/out"
        let root = output + "/generated"
        for d in ["2026-11-19", "2026-11-20", "2026-11-21"] { try Self.expectNight(pipeline, d, output: output) }
        // An operator's copy of tonight's baseline under an old date.
        let target = try #require(Self.link(root + "/2026-11-21"))
        try FileManager.default.createSymbolicLink(atPath: root + "/2026-10-01", withDestinationPath: target)
        try Self.expectNight(pipeline, "2026-11-22", output: output)
        #expect(Self.link(root + "/2026-10-01") == nil, "the old alias is pruned")
        #expect(Self.link(root + "/2026-11-19") == nil)
        #expect(FileManager.default.fileExists(atPath: root + "/2026-11-21/manifest.json"), "the kept run stands")
        try Self.expectNight(pipeline, "2026-11-23", output: output)
        #expect(FileManager.default.fileExists(atPath: root + "/2026-11-22/manifest.json"))
    }

    @Test("an as-of more than a day after the clock is 64 unless the run writes to an --output of its own")
    func asOfAhead() throws {
        let pipeline = try Self.world(keep: 2)
        let root = HostileInputTests.folder(pipeline) + "/out/generated"
        try Self.expectNight(pipeline, "2026-11-21", output: nil)
        let ahead = Timestamp.date(Int64(Date().timeIntervalSince1970 * 1000) + 3 * 86_400_000)
        let r = try Self.night(pipeline, ahead, output: nil)
        #expect(r.status == 64 && r.stderr.contains("--output"), "\(r.stderr)")
        #expect(Self.link(root + "/latest") == "2026-11-21")
        #expect(Self.link(root + "/2026-11-21") != nil)
        // Tomorrow (a scheduler in another time zone) is a night like any other.
        let tomorrow = Timestamp.date(Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000 - 60_000)
        #expect(try Self.night(pipeline, tomorrow, output: Paths.temporary()).status == 0)
        let planning = Paths.temporary()
        let planned = try Self.night(pipeline, ahead, output: planning)
        #expect(planned.status == 0, "\(planned.stderr)")
        #expect(Self.link(planning + "/generated/latest") == ahead)
    }

    // MARK: Configuration files

    @Test("a catalog key given twice is 78 naming the offer and the key, from validate and run")
    func catalogKeyTwice() throws {
        let pipeline = try Self.world()
        let catalog = HostileInputTests.folder(pipeline) + "/offers.json"
        var text = try String(contentsOfFile: catalog, encoding: .utf8)
        let first = try #require(text.range(of: "\"offerId\""))
        text.insert(contentsOf: "\"territories\": [], ", at: first.lowerBound)
        try text.write(toFile: catalog, atomically: true, encoding: .utf8)
        let offers =
            try #require(
                try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])["offers"] as? [[String: Any]]
        let id = try #require(offers?.first?["offerId"] as? String)
        let hasTerritories = offers?.first?["territories"] != nil
        #expect(hasTerritories, "the generated catalog's first offer lists territories: [] above them sells everywhere")
        for args in [["validate", pipeline], ["run", pipeline, "--quiet", "--output", Paths.temporary()]] {
            let r = try CLI.run(args)
            #expect(r.status == 78, "\(args[0]): \(r.stderr)")
            #expect(r.stderr.contains("'\(id)'") && r.stderr.contains("'territories' is given twice"), "\(r.stderr)")
        }
    }

    @Test("a YAML key given twice names its line and column")
    func yamlKeyTwice() throws {
        let pipeline = try Self.world()
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let nameLine = try #require(lines.firstIndex { $0.hasPrefix("name:") }) + 1
        try (text + "name: again\n").write(toFile: pipeline, atomically: true, encoding: .utf8)
        for args in [["validate", pipeline], ["run", pipeline, "--quiet"]] {
            let r = try CLI.run(args)
            #expect(r.status == 78, "\(r.stderr)")
            #expect(r.stderr.contains("line \(nameLine), column 1") && r.stderr.contains("'name'"), "\(r.stderr)")
        }
    }

    @Test("a pipeline file over 1 MiB and a name over 100 bytes are 78 from validate and run alike")
    func boundedPipeline() throws {
        let pipeline = try Self.world()
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        let padded = text + String(repeating: "# padding\n", count: 110_000)
        try padded.write(toFile: pipeline, atomically: true, encoding: .utf8)
        for args in [["validate", pipeline], ["run", pipeline, "--quiet", "--output", Paths.temporary()]] {
            let r = try CLI.run(args)
            #expect(r.status == 78 && r.stderr.contains("1048576"), "\(args[0]): \(r.stderr)")
        }
        let long = String(repeating: "a", count: 101)
        try text.replacingOccurrences(of: "name: generated", with: "name: \(long)").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        for args in [["validate", pipeline], ["run", pipeline, "--quiet", "--output", Paths.temporary()]] {
            let r = try CLI.run(args)
            #expect(r.status == 78 && r.stderr.contains("more than 100"), "\(args[0]): \(r.stderr)")
        }
        try text.replacingOccurrences(of: "name: generated", with: "name: \(long.dropLast())").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["validate", pipeline]).status == 0)
    }

    @Test("validate checks output.group as run does: a group that does not exist is 78")
    func outputGroup() throws {
        let pipeline = try Self.world()
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try text.replacingOccurrences(of: "output:\n", with: "output:\n  group: no-such-group-here\n").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        for args in [["validate", pipeline], ["run", pipeline, "--quiet", "--output", Paths.temporary()]] {
            let r = try CLI.run(args)
            #expect(r.status == 78 && r.stderr.contains("no-such-group-here"), "\(args[0]): \(r.stderr)")
        }
    }

    @Test(
        "a group the user is not in is 78 naming it, from validate and run",
        .enabled(if: geteuid() == 0, "needs root, to run as nobody"))
    func groupNotMine() throws {
        // A folder of nobody's own, holding a copy of the world nobody may read.
        let home = "/tmp/winback-nobody-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: home) }
        chmod(home, 0o755)
        let world = try Self.world()
        try FileManager.default.copyItem(atPath: HostileInputTests.folder(world), toPath: home + "/world")
        let pipeline = home + "/world/pipeline.yaml"
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try text.replacingOccurrences(of: "output:\n", with: "output:\n  group: root\n").write(
            toFile: pipeline, atomically: true, encoding: .utf8)
        let chmod = try DeliveryFixture.run("/bin/chmod", ["-R", "a+rX", home + "/world"])
        #expect(chmod.status == 0)
        try FileManager.default.createDirectory(atPath: home + "/out", withIntermediateDirectories: false)
        #expect(Glibc.chown(home + "/out", 65534, 65534) == 0)
        for args in [["validate", pipeline], ["run", pipeline, "--quiet", "--output", home + "/out/o"]] {
            let r = try CLI.run(
                args, launcher: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
            #expect(r.status == 78, "\(args[0]): \(r.stderr)")
            #expect(r.stderr.contains("not in the group 'root'"), "\(args[0]): \(r.stderr)")
        }
    }

    @Test(
        "a rates file of 1 GB of NUL bytes is 78 at once within --memory 64MB; one over 100,000 rates is 78; a byte-order mark is read",
        .enabled(if: HostileIdentityTests.timeAvailable, "needs /usr/bin/time (Debian: time) to measure peak memory"))
    func ratesFiles() throws {
        let pipeline = try Self.world()
        let rates = HostileInputTests.folder(pipeline) + "/rates.csv"
        let good = try Data(contentsOf: URL(fileURLWithPath: rates))
        let reference = Paths.temporary()
        try Self.expectNight(pipeline, "2026-11-21", output: reference)
        // A byte-order mark: the same run.
        try (Data([0xEF, 0xBB, 0xBF]) + good).write(to: URL(fileURLWithPath: rates))
        let bom = Paths.temporary()
        try Self.expectNight(pipeline, "2026-11-21", output: bom)
        for report in ["revenue-after-return.csv", "winback-redemption-rates.csv"] {
            #expect(
                DeliveryFixture.bytes(bom + "/generated/latest/reports/" + report)
                    == DeliveryFixture.bytes(reference + "/generated/latest/reports/" + report))
        }
        // A gigabyte of NUL bytes (a sparse file).
        try Data().write(to: URL(fileURLWithPath: rates))
        let h = try #require(FileHandle(forWritingAtPath: rates))
        try h.truncate(atOffset: 1 << 30)
        try h.close()
        let started = Date()
        let (r, peak) = try HostileIdentityTests.measured(
            ["run", pipeline, "--quiet", "--output", Paths.temporary(), "--memory", "64MB"])
        #expect(r.status == 78 && r.stderr.contains("rates file line 1"), "\(r.stderr)")
        #expect(peak > 0 && peak < 64_000_000, "peak \(peak)")
        #expect(Date().timeIntervalSince(started) < 20)
        // More rates than any table holds.
        var many = "month,currency,rate\n"
        let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for i in 0..<100_001 {
            let c = i % 17_576
            let code = String([letters[c / 676], letters[c / 26 % 26], letters[c % 26]])
            many += "2020-0\(1 + i / 17_576),\(code),1.1\n"
        }
        try many.write(toFile: rates, atomically: true, encoding: .utf8)
        let v = try CLI.run(["validate", pipeline])
        #expect(v.status == 78 && v.stderr.contains("more than 100000 rates"), "\(v.stderr)")
    }

    // MARK: explain

    @Test("explain says when the identity value asked for was superseded by a later row of the identities file")
    func supersededIdentity() throws {
        let pipeline = try Self.world()
        let folder = HostileInputTests.folder(pipeline)
        let r = try DeliveryFixture.run("/usr/bin/gzip", ["-dc", folder + "/identities.csv.gz"])
        let text = String(decoding: r.stdout, as: UTF8.self)
        let rows = DeliveryFixture.parse(Array(text.utf8))
        let header = try #require(rows.first)
        let email = try #require(header.firstIndex(of: "email"))
        let row = try #require(rows.dropFirst().first { !$0[email].isEmpty })
        var later = row
        later[email] = "renamed-" + row[email]
        let path = folder + "/identities.csv.gz"
        let written = try DeliveryFixture.run(
            "/bin/sh", ["-c", "gzip -c > '\(path)'"], stdin: text + DeliveryFixture.line(later))
        #expect(written.status == 0)
        let old = try CLI.run(["explain", pipeline, "--customer", row[email]])
        #expect(old.status == 0, "\(old.stderr)")
        #expect(old.stdout.contains("superseded by a later row"), "\(old.stdout)")
        let new = try CLI.run(["explain", pipeline, "--customer", later[email]])
        #expect(new.status == 0 && !new.stdout.contains("superseded"), "\(new.stdout)")
    }
}
