import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackSupport

/// Where promtool is, if anywhere (Debian's prometheus package installs /usr/bin/promtool).
let deliveryPromtool: String? = {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let dirs = path.split(separator: ":").map(String.init) + ["/usr/bin"]
    return dirs.map { $0 + "/promtool" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}()

/// `output.metrics` (docs/rules.md §10.3): the Prometheus textfile after runs that succeed and
/// runs that fail, through the command line.
@Suite("Delivery: metrics file for the scheduler", .serialized, .tags(.slow))
struct DeliveryMetricsTests {
    static let names = [
        "winback_last_run_timestamp_seconds", "winback_last_success_timestamp_seconds", "winback_last_exit_code",
        "winback_run_duration_seconds", "winback_rows_read", "winback_rows_rejected", "winback_customers",
        "winback_eligible", "winback_held_out",
    ]
    /// Those written after a failure too.
    static let always = Array(names.prefix(4))

    /// A world of make_world.py with identities, a braze destination and the metrics file in
    /// `<tmp>/m/winback.prom`; returns the pipeline and the metrics path.
    static func world(seed: Int) throws -> (pipeline: String, metrics: String) {
        let pipeline = try DeliveryFixture.makeWorld(customers: 300, seed: seed)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let ids = DeliveryFixture.identities(for: try DeliveryFixture.customers(worldFolder: folder))
        try DeliveryFixture.writeGzip(ids.text, to: folder + "/identities.csv.gz")
        let m = Paths.temporary() + "/m"
        try FileManager.default.createDirectory(atPath: m, withIntermediateDirectories: true)
        try DeliveryFixture.addToOutput(pipeline, "destinations: [braze]\nmetrics: \(m)/winback.prom")
        try DeliveryFixture.append(pipeline, "identities:\n  path: identities.csv.gz\n")
        return (pipeline, m + "/winback.prom")
    }

    /// A metrics file's samples: name → [(labels, value)].
    struct Metrics {
        var text: String
        var samples: [String: [(labels: String, value: Double)]] = [:]
        var help: [String: Int] = [:]
        var type: [String: String] = [:]
        var typeLines: [String: Int] = [:]

        init(_ path: String) {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
                if line.hasPrefix("# HELP "), parts.count >= 3 {
                    help[parts[2], default: 0] += 1
                } else if line.hasPrefix("# TYPE "), parts.count >= 4 {
                    type[parts[2]] = parts[3]
                    typeLines[parts[2], default: 0] += 1
                } else if !line.isEmpty {
                    guard let space = line.lastIndex(of: " ") else { continue }
                    let series = String(line[..<space])
                    let value = Double(line[line.index(after: space)...]) ?? .nan
                    let name = String(series.prefix { $0 != "{" })
                    let labels = series.dropFirst(name.count)
                    samples[name, default: []].append((String(labels), value))
                }
            }
        }

        func value(_ name: String) -> Double? { samples[name]?.first?.value }
    }

    /// Checks what every metrics file has: the run's own gauges, each once with HELP and TYPE,
    /// every sample labelled with the pipeline, the text ending with a line end.
    static func expectWellFormed(
        _ m: Metrics, names: [String], exitCode: Int32, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(m.text.hasSuffix("\n"), sourceLocation: sourceLocation)
        for name in names {
            #expect(m.help[name] == 1, "\(name): HELP lines \(m.help[name] ?? 0)", sourceLocation: sourceLocation)
            #expect(m.typeLines[name] == 1, "\(name): TYPE lines", sourceLocation: sourceLocation)
            #expect(m.type[name] == "gauge", "\(name) TYPE", sourceLocation: sourceLocation)
            #expect((m.samples[name]?.count ?? 0) > 0, "\(name) has no sample", sourceLocation: sourceLocation)
        }
        for (name, list) in m.samples {
            #expect(name.hasPrefix("winback_"), sourceLocation: sourceLocation)
            for s in list {
                #expect(
                    s.labels.hasPrefix("{pipeline=\"reference\""), "\(name)\(s.labels)", sourceLocation: sourceLocation)
                #expect(!s.value.isNaN, "\(name)\(s.labels)", sourceLocation: sourceLocation)
            }
            if !["winback_customers", "winback_eligible", "winback_segment_changes", "winback_destination_exited"]
                .contains(name)
            {
                #expect(list.count == 1, "\(name) has \(list.count) samples", sourceLocation: sourceLocation)
            }
        }
        #expect(m.value("winback_last_exit_code") == Double(exitCode), sourceLocation: sourceLocation)
    }

    /// Nothing but the metrics file and its lock in its folder (no temporary file left beside it).
    static func expectAlone(_ metrics: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let folder = (metrics as NSString).deletingLastPathComponent
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == [
                ".winback.prom.lock", "winback.prom",
            ],
            sourceLocation: sourceLocation)
    }

    @Test(
        "after a success: every metric of §10.3, each with HELP and TYPE, labelled with the pipeline, values as the manifest's"
    )
    func afterSuccess() throws {
        let (pipeline, metrics) = try Self.world(seed: 21)
        let before = Date().timeIntervalSince1970
        let r = try CLI.run(["run", pipeline])
        let after = Date().timeIntervalSince1970
        #expect(r.status == 0, "\(r.stderr)")
        let m = Metrics(metrics)
        Self.expectWellFormed(m, names: Self.names, exitCode: 0)
        try Self.expectAlone(metrics)
        let published = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let manifest = try DeliveryFixture.manifest(published)
        let counters = try #require(manifest["counters"] as? [String: Any])
        #expect(m.value("winback_rows_read") == (counters["rowsRead"] as? Int).map(Double.init))
        // One sample per segment and change, as the manifest counts them (docs/rules.md §10.5).
        let changes = try #require((manifest["changes"] as? [String: Any])?["segments"] as? [[String: Any]])
        #expect(m.samples["winback_segment_changes"]?.count == changes.count * 3)
        #expect(
            m.samples["winback_segment_changes"]?.contains {
                $0.labels.contains("segment=\"best-offer\"") && $0.labels.contains("change=\"entered\"")
                    && Int($0.value) == changes.first { $0["segment"] as? String == "best-offer" }?["entered"] as? Int
            } == true)
        #expect(m.value("winback_rows_rejected") == (counters["rejected"] as? Int).map(Double.init))
        let states = Dictionary(
            uniqueKeysWithValues: (m.samples["winback_customers"] ?? []).map { ($0.labels, $0.value) })
        #expect(
            states == [
                "{pipeline=\"reference\",state=\"active\"}": Double(counters["active"] as? Int ?? -1),
                "{pipeline=\"reference\",state=\"billing_retry\"}": Double(counters["billingRetry"] as? Int ?? -1),
                "{pipeline=\"reference\",state=\"churned\"}": Double(counters["churned"] as? Int ?? -1),
                "{pipeline=\"reference\",state=\"not_subscriber\"}": Double(counters["notSubscriber"] as? Int ?? -1),
            ])
        let eligible = try #require(manifest["eligible"] as? [[String: Any]])
        let offers = try DeliveryFixture.offerIds(worldFolder: (pipeline as NSString).deletingLastPathComponent)
        #expect(eligible.map { $0["offerId"] as? String ?? "" } == offers)
        let samples = (m.samples["winback_eligible"] ?? []).map { ($0.labels, $0.value) }
        #expect(samples.map(\.0) == offers.map { "{pipeline=\"reference\",offer=\"\($0)\"}" })
        #expect(samples.map(\.1) == eligible.map { Double($0["customers"] as? Int ?? -1) })
        let experiment = try #require(manifest["experiment"] as? [String: Any])
        let held = (experiment["heldOut"] as? [[String: Any]])?.first { $0["segment"] as? String == "best-offer" }
        #expect(m.value("winback_held_out") == (held?["rows"] as? Int).map(Double.init))
        #expect((m.value("winback_held_out") ?? 0) > 0)
        // Times: this run's, a success's.
        let last = try #require(m.value("winback_last_run_timestamp_seconds"))
        #expect(last >= before - 0.001 && last <= after + 0.001)
        #expect(m.value("winback_last_success_timestamp_seconds") == last)
        let duration = try #require(m.value("winback_run_duration_seconds"))
        #expect(duration > 0 && duration <= after - before + 0.001)
        // Mode 0640.
        let mode = try FileManager.default.attributesOfItem(atPath: metrics)[.posixPermissions] as? Int
        #expect(mode == 0o640)
    }

    @Test(
        "after failures (65, 66, 73, 75, 78) the exit code is the process's, the last success is kept, the file is replaced"
    )
    func afterFailures() throws {
        let (pipeline, metrics) = try Self.world(seed: 22)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let first = try CLI.run(["run", pipeline])
        #expect(first.status == 0, "\(first.stderr)")
        let success = try #require(Metrics(metrics).value("winback_last_success_timestamp_seconds"))
        #expect(success > 0)
        let original = try String(contentsOfFile: pipeline, encoding: .utf8)
        let fm = FileManager.default
        var lastRun = success

        /// Runs with a fault in place, then undoes it.
        func failing(_ name: String, _ expected: Int32, fault: () throws -> Void, undo: () throws -> Void) throws {
            try fault()
            defer {
                try? undo()
                try? original.write(toFile: pipeline, atomically: true, encoding: .utf8)
            }
            let r = try CLI.run(["run", pipeline])
            #expect(r.status == expected, "\(name): \(r.stderr)")
            let m = Metrics(metrics)
            Self.expectWellFormed(m, names: Self.always, exitCode: r.status)
            #expect(m.value("winback_last_exit_code") == Double(r.status), "\(name)")
            #expect(m.value("winback_last_success_timestamp_seconds") == success, "\(name): last success kept")
            let run = try #require(m.value("winback_last_run_timestamp_seconds"))
            #expect(run >= lastRun, "\(name): this run's time")
            lastRun = run
            // Written after the failure, not the success's file: no counts of a run that did not publish.
            #expect(m.samples["winback_rows_read"] == nil, "\(name)")
            try Self.expectAlone(metrics)
        }

        let transactions = folder + "/transactions-1.jsonl.gz"
        let saved = try #require(fm.contents(atPath: transactions))
        // 65: garbage lines past the reject budget (a second gzip member of the input).
        try failing(
            "reject budget", 65,
            fault: {
                let garbage = try DeliveryFixture.run(
                    "/usr/bin/gzip", ["-c"], stdin: String(repeating: "{garbage\n", count: 40))
                let h = try #require(FileHandle(forWritingAtPath: transactions))
                try h.seekToEnd()
                try h.write(contentsOf: garbage.stdout)
                try h.close()
            }, undo: { try saved.write(to: URL(fileURLWithPath: transactions)) })
        // 66: a glob matching nothing.
        try failing(
            "glob", 66,
            fault: { try DeliveryFixture.replace(pipeline, "transactions-*.jsonl.gz", "nothing-*.jsonl.gz") }, undo: {})
        // 66: the identities file missing.
        try failing(
            "identities", 66,
            fault: { try fm.moveItem(atPath: folder + "/identities.csv.gz", toPath: folder + "/elsewhere.gz") },
            undo: { try fm.moveItem(atPath: folder + "/elsewhere.gz", toPath: folder + "/identities.csv.gz") })
        // 73: the output directory below a regular file.
        try failing(
            "output", 73,
            fault: {
                try "a file".write(toFile: folder + "/blocker", atomically: true, encoding: .utf8)
                try DeliveryFixture.replace(pipeline, "directory: out", "directory: blocker/out")
            }, undo: { try fm.removeItem(atPath: folder + "/blocker") })
        // 75: another run holds the lock.
        let lock = Publisher(root: folder + "/out/reference", date: DeliveryFixture.asOf)
        try failing("lock", 75, fault: { try lock.begin() }, undo: { lock.fail(keeping: []) })
        // 78: a pipeline file with a misspelt key, still readable.
        try failing(
            "configuration", 78, fault: { try DeliveryFixture.append(pipeline, "consecutiveGapDayz: 30\n") }, undo: {})
        // 78: a catalog that is not valid.
        let offers = try #require(fm.contents(atPath: folder + "/offers.json"))
        try failing(
            "catalog", 78,
            fault: {
                try "{\"offers\": [{\"offerId\": \"x\"}]}".write(
                    toFile: folder + "/offers.json", atomically: true, encoding: .utf8)
            },
            undo: { try offers.write(to: URL(fileURLWithPath: folder + "/offers.json")) })

        // A success again: a new last success, the counts back.
        let again = try CLI.run(["run", pipeline])
        #expect(again.status == 0, "\(again.stderr)")
        let m = Metrics(metrics)
        Self.expectWellFormed(m, names: Self.names, exitCode: 0)
        #expect((m.value("winback_last_success_timestamp_seconds") ?? 0) > success)
        try Self.expectAlone(metrics)
    }

    @Test("merge writes the file too: all metrics after it publishes, its exit code after it fails")
    func afterMerge() throws {
        let (pipeline, metrics) = try Self.world(seed: 26)
        let work = Paths.temporary() + "/work"
        let common = ["--work", work, "--shards", "2"]
        #expect(try CLI.run(["partition", pipeline, "--tasks", "1", "--task", "0"] + common).status == 0)
        for k in 0..<2 { #expect(try CLI.run(["run", pipeline, "--shard", "\(k)"] + common).status == 0) }
        #expect(!FileManager.default.fileExists(atPath: metrics), "a partition or a shard is not the run")
        let merged = try CLI.run(["merge", pipeline] + common)
        #expect(merged.status == 0, "\(merged.stderr)")
        let m = Metrics(metrics)
        Self.expectWellFormed(m, names: Self.names, exitCode: 0)
        let success = try #require(m.value("winback_last_success_timestamp_seconds"))
        try FileManager.default.removeItem(atPath: work + "/shards/1")
        let failed = try CLI.run(["merge", pipeline] + common)
        #expect(failed.status == 66, "\(failed.stderr)")
        let after = Metrics(metrics)
        Self.expectWellFormed(after, names: Self.always, exitCode: failed.status)
        #expect(after.value("winback_last_success_timestamp_seconds") == success)
        try Self.expectAlone(metrics)
    }

    @Test("a pipeline that never succeeded writes no last success (never 0), after one failure or several")
    func neverSucceeded() throws {
        let (pipeline, metrics) = try Self.world(seed: 23)
        try DeliveryFixture.replace(pipeline, "transactions-*.jsonl.gz", "nothing-*.jsonl.gz")
        for _ in 0..<2 {
            let r = try CLI.run(["run", pipeline])
            #expect(r.status == 66)
            let m = Metrics(metrics)
            Self.expectWellFormed(
                m, names: Self.always.filter { $0 != "winback_last_success_timestamp_seconds" }, exitCode: 66)
            #expect(m.samples["winback_last_success_timestamp_seconds"] == nil, "\(m.text)")
        }
    }

    @Test("a metrics file that cannot be written is a warning; the run still exits 0")
    func unwritable() throws {
        let (pipeline, metrics) = try Self.world(seed: 24)
        let missing = (metrics as NSString).deletingLastPathComponent + "/absent/winback.prom"
        try DeliveryFixture.replace(pipeline, "metrics: \(metrics)", "metrics: \(missing)")
        let r = try CLI.run(["run", pipeline])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("warning"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing))
        let json = try CLI.run(["run", pipeline, "--log-format", "json"])
        #expect(json.status == 0)
        let warnings = json.stderr.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["event"] as? String == "metrics" }
        #expect(warnings.count == 1, "\(json.stderr)")
        #expect(warnings.first?["level"] as? String == "warning")
        #expect(warnings.first?["path"] as? String == missing)
    }

    @Test(
        "promtool check metrics accepts the file after a success and after a failure",
        .enabled(if: deliveryPromtool != nil, "needs promtool (Debian: prometheus)"))
    func promtool() throws {
        let tool = try #require(deliveryPromtool)
        let (pipeline, metrics) = try Self.world(seed: 25)
        func check(_ when: String) throws {
            let text = try String(contentsOfFile: metrics, encoding: .utf8)
            let r = try DeliveryFixture.run(tool, ["check", "metrics"], stdin: text)
            #expect(
                r.status == 0,
                "\(when): promtool exit \(r.status): \(String(decoding: r.stdout, as: UTF8.self)) \(r.stderr)\n\(text)")
        }
        let ok = try CLI.run(["run", pipeline])
        #expect(ok.status == 0, "\(ok.stderr)")
        try check("after a success")
        try DeliveryFixture.replace(pipeline, "transactions-*.jsonl.gz", "nothing-*.jsonl.gz")
        let failed = try CLI.run(["run", pipeline])
        #expect(failed.status == 66)
        try check("after a failure")
    }

    // MARK: docs/rules.md §6.2: the metrics file is not a way in

    /// Runs the command line, killed after `seconds` if it has not ended (a read that blocks
    /// would otherwise hang the test); its result and how long it took.
    static func bounded(_ args: [String], seconds: Double = 60) throws -> (result: CLI.Result, seconds: Double) {
        let start = Date()
        let p = try CLI.start(args)
        let pid = p.process.processIdentifier
        let ended = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            if ended.wait(timeout: .now() + seconds) == .timedOut { kill(pid, SIGKILL) }
        }
        let out = p.out.fileHandleForReading.readDataToEndOfFile()
        let err = p.err.fileHandleForReading.readDataToEndOfFile()
        p.process.waitUntilExit()
        ended.signal()
        let r = CLI.Result(
            status: p.process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
        return (r, Date().timeIntervalSince(start))
    }

    /// A world whose runs fail (66: no transaction file matches).
    static func failingWorld(seed: Int) throws -> (pipeline: String, metrics: String) {
        let w = try world(seed: seed)
        try DeliveryFixture.replace(w.pipeline, "transactions-*.jsonl.gz", "nothing-*.jsonl.gz")
        return w
    }

    @Test(
        "a link planted at the path, to a 2 GiB file, is not followed: a failed night ends promptly, the link replaced")
    func plantedLink() throws {
        let (pipeline, metrics) = try Self.failingWorld(seed: 31)
        let big = Paths.temporary() + "/big"
        #expect(try DeliveryFixture.run("/usr/bin/truncate", ["-s", "2G", big]).status == 0)
        try FileManager.default.createSymbolicLink(atPath: metrics, withDestinationPath: big)
        let (r, seconds) = try Self.bounded(["run", pipeline])
        #expect(r.status == 66, "\(r.stderr)")
        #expect(seconds < 30, "took \(seconds) s: the 2 GiB file was read")
        #expect(r.stderr.contains("warning: the previous metrics file is a symbolic link"), "\(r.stderr)")
        #expect(System.linkKind(metrics) == S_IFREG, "the link is replaced by a file")
        #expect(System.fileSize(big) == 2 << 30, "nothing written through the link")
        let head = try #require(FileHandle(forReadingAtPath: big))
        #expect(try head.read(upToCount: 65536) == Data(count: 65536))
        try head.close()
        let m = Metrics(metrics)
        Self.expectWellFormed(
            m, names: Self.always.filter { $0 != "winback_last_success_timestamp_seconds" }, exitCode: 66)
        try Self.expectAlone(metrics)
    }

    @Test(
        "a FIFO at the path is never opened for a blocking read; a folder there is left alone; the exit code is the run's"
    )
    func fifoOrFolder() throws {
        let (pipeline, metrics) = try Self.failingWorld(seed: 32)
        #expect(mkfifo(metrics, 0o644) == 0)
        let (r, seconds) = try Self.bounded(["run", pipeline])
        #expect(r.status == 66, "\(r.stderr)")
        #expect(seconds < 30)
        #expect(r.stderr.contains("is a FIFO"), "\(r.stderr)")
        #expect(System.linkKind(metrics) == S_IFREG)
        try Self.expectAlone(metrics)

        try FileManager.default.removeItem(atPath: metrics)
        try FileManager.default.createDirectory(atPath: metrics + "/kept", withIntermediateDirectories: true)
        let (folder, _) = try Self.bounded(["run", pipeline])
        #expect(folder.status == 66, "\(folder.stderr)")
        #expect(folder.stderr.contains("is a folder"), "\(folder.stderr)")
        #expect(folder.stderr.contains("cannot write the metrics file"), "\(folder.stderr)")
        #expect(System.kind(metrics + "/kept") == .directory)
    }

    @Test("a previous file of 1 MiB or more is ignored with a warning and replaced; its series are not kept")
    func tooLarge() throws {
        let (pipeline, metrics) = try Self.failingWorld(seed: 33)
        let line = "winback_last_success_timestamp_seconds{pipeline=\"reference\"} 1234\n"
        try (line + String(repeating: "# padding to one mebibyte\n", count: 41_000)).write(
            toFile: metrics, atomically: true, encoding: .utf8)
        #expect((System.fileSize(metrics) ?? 0) > 1 << 20)
        let (r, seconds) = try Self.bounded(["run", pipeline])
        #expect(r.status == 66, "\(r.stderr)")
        #expect(seconds < 30)
        #expect(r.stderr.contains("1 MiB or more"), "\(r.stderr)")
        let m = Metrics(metrics)
        #expect(m.samples["winback_last_success_timestamp_seconds"] == nil, "an ignored file's value is not used")
        #expect(m.value("winback_last_exit_code") == 66)
        #expect(m.text.utf8.count < 4096)
    }

    @Test("lines of the previous file that do not parse are dropped with a warning; the rest is kept")
    func garbageLines() throws {
        let (pipeline, metrics) = try Self.failingWorld(seed: 40)
        try """
        # HELP winback_last_exit_code Old text.
        # TYPE winback_last_exit_code gauge
        winback_last_exit_code{pipeline="other"} 3
        \u{1B}[2Jwinback_x 1
        winback_last_exit_code{pipeline="other"} 4
        winback_last_success_timestamp_seconds{pipeline="reference"} 1234.5
        this is not a sample
        winback_rows_read{pipeline="other" 7

        """.write(toFile: metrics, atomically: true, encoding: .utf8)
        let r = try CLI.run(["run", pipeline])
        #expect(r.status == 66, "\(r.stderr)")
        #expect(
            r.stderr.contains("has 4 lines that do not parse, dropped (line 4: \\x1B[2Jwinback_x 1)"), "\(r.stderr)")
        #expect(!r.stderr.contains("\u{1B}"), "a control byte quoted escaped")
        let m = Metrics(metrics)
        #expect(m.value("winback_last_success_timestamp_seconds") == 1234.5)
        #expect(
            m.samples["winback_last_exit_code"]?.map(\.labels).sorted() == [
                "{pipeline=\"other\"}", "{pipeline=\"reference\"}",
            ])
        #expect(m.text.contains("winback_last_exit_code{pipeline=\"other\"} 3\n"))
        #expect(
            !m.text.contains("Old text") && !m.text.contains("not a sample") && m.samples["winback_rows_read"] == nil)
    }

    /// Two pipelines, `reference` and `other`, sharing one metrics file: reference succeeds,
    /// other succeeds, reference fails. The file's text after each run, and both pipelines.
    static func shared(seeds: (Int, Int)) throws -> (texts: [String], metrics: String) {
        let (a, metrics) = try world(seed: seeds.0)
        let b = try DeliveryFixture.makeWorld(customers: 200, seed: seeds.1)
        try DeliveryFixture.replace(b, "name: reference", "name: other")
        try DeliveryFixture.addToOutput(b, "metrics: \(metrics)")
        var texts: [String] = []
        for (pipeline, expected) in [(a, Int32(0)), (b, 0)] {
            let r = try CLI.run(["run", pipeline])
            #expect(r.status == expected, "\(r.stderr)")
            texts.append(try String(contentsOfFile: metrics, encoding: .utf8))
        }
        try DeliveryFixture.replace(a, "transactions-*.jsonl.gz", "nothing-*.jsonl.gz")
        let failed = try CLI.run(["run", a])
        #expect(failed.status == 66, "\(failed.stderr)")
        #expect(!failed.stderr.contains("warning"), "\(failed.stderr)")
        texts.append(try String(contentsOfFile: metrics, encoding: .utf8))
        return (texts, metrics)
    }

    /// The sample lines of `text` labelled `pipeline="<name>"`.
    static func lines(_ text: String, of name: String) -> [Substring] {
        text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("{pipeline=\"\(name)\"") }
    }

    @Test("two pipelines share one file: each keeps the other's series; a failure keeps its own last success")
    func sharedFile() throws {
        let (texts, metrics) = try Self.shared(seeds: (34, 35))
        // After other's run: reference's series as its success wrote them, other's added.
        #expect(Self.lines(texts[1], of: "reference") == Self.lines(texts[0], of: "reference"))
        let other = Self.lines(texts[1], of: "other")
        #expect(other.count >= 12, "\(texts[1])")
        // After reference failed: other's series byte for byte, reference's last success kept.
        #expect(Self.lines(texts[2], of: "other") == other)
        let final = Metrics(metrics)
        let success = Self.lines(texts[0], of: "reference").first {
            $0.hasPrefix("winback_last_success_timestamp_seconds{")
        }
        #expect(success != nil)
        #expect(Self.lines(texts[2], of: "reference").contains { $0 == success! })
        #expect(Self.lines(texts[2], of: "reference").contains("winback_last_exit_code{pipeline=\"reference\"} 66"))
        #expect(!Self.lines(texts[2], of: "reference").contains { $0.hasPrefix("winback_rows_read{") })
        // One HELP and one TYPE per family; each family's samples together.
        for name in Self.names {
            #expect(final.help[name] == 1, "\(name)")
            #expect(final.typeLines[name] == 1, "\(name)")
        }
        var seen: [String] = []
        for line in texts[2].split(separator: "\n") where !line.hasPrefix("#") {
            let name = String(line.prefix { $0 != "{" })
            if seen.last != name {
                #expect(!seen.contains(name), "\(name)'s samples are split")
                seen.append(name)
            }
        }
        try Self.expectAlone(metrics)
    }

    @Test(
        "promtool check metrics accepts a file two pipelines share, after each run",
        .enabled(if: deliveryPromtool != nil, "needs promtool (Debian: prometheus)"))
    func promtoolShared() throws {
        let tool = try #require(deliveryPromtool)
        let (texts, _) = try Self.shared(seeds: (36, 37))
        for (i, text) in texts.enumerated() {
            let r = try DeliveryFixture.run(tool, ["check", "metrics"], stdin: text)
            #expect(
                r.status == 0,
                "run \(i): promtool exit \(r.status): \(String(decoding: r.stdout, as: UTF8.self)) \(r.stderr)\n\(text)"
            )
        }
    }

    @Test("a metrics path inside the output folder: 78 from run and validate, latest untouched; so with --output")
    func insideOutput() throws {
        let (pipeline, metrics) = try Self.world(seed: 38)
        let folder = (pipeline as NSString).deletingLastPathComponent
        let ok = try CLI.run(["run", pipeline])
        #expect(ok.status == 0, "\(ok.stderr)")
        let latest = folder + "/out/reference/latest"
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: latest)
        for inside in [latest, folder + "/out/winback.prom", "out/reference/m.prom"] {
            let saved = try String(contentsOfFile: pipeline, encoding: .utf8)
            defer { try? saved.write(toFile: pipeline, atomically: true, encoding: .utf8) }
            try DeliveryFixture.replace(pipeline, "metrics: \(metrics)", "metrics: \(inside)")
            let r = try CLI.run(["run", pipeline])
            #expect(r.status == 78, "\(inside): \(r.stderr)")
            #expect(r.stderr.contains("output.metrics") && r.stderr.contains("inside the output folder"), "\(r.stderr)")
            let v = try CLI.run(["validate", pipeline])
            #expect(v.status == 78, "\(inside): \(v.stdout) \(v.stderr)")
            #expect((v.stdout + v.stderr).contains("inside the output folder"), "\(v.stdout) \(v.stderr)")
            #expect(System.linkKind(latest) == System.symbolicLinkType)
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: latest) == target)
            #expect(!FileManager.default.fileExists(atPath: folder + "/out/winback.prom"))
            #expect(!FileManager.default.fileExists(atPath: folder + "/out/reference/m.prom"))
        }
        // The output folder of the command line: the metrics file is in it; nothing written there.
        let alternative = Paths.temporary()
        try DeliveryFixture.replace(pipeline, "metrics: \(metrics)", "metrics: \(alternative)/m.prom")
        #expect(try CLI.run(["validate", pipeline]).status == 0)
        let r = try CLI.run(["run", pipeline, "--output", alternative])
        #expect(r.status == 78, "\(r.stderr)")
        #expect(r.stderr.contains("inside the output folder"), "\(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: alternative).isEmpty)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: latest) == target)
    }

    @Test("another run holding the file's lock: this run waits a bounded time, warns, writes nothing, exits 0")
    func lockHeld() throws {
        let (pipeline, metrics) = try Self.world(seed: 39)
        let lock = try System.openOrCreate((metrics as NSString).deletingLastPathComponent + "/.winback.prom.lock")
        defer { System.closeQuietly(lock) }
        #expect(try System.tryLock(lock))
        let (r, seconds) = try Self.bounded(["run", pipeline], seconds: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(seconds >= MetricsFile.lockTimeout && seconds < 90, "\(seconds) s")
        #expect(r.stderr.contains("warning: cannot write the metrics file") && r.stderr.contains("lock"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: metrics))
    }
}
