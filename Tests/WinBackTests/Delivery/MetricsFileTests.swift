import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackDelivery
@testable import WinBackModel
@testable import WinBackSupport

/// The metrics file shared by several pipelines and read as hostile input (docs/rules.md
/// §10.3, §6.2): parsing, merging, the previous file, the lock and where the file may be.
@Suite("Metrics file: shared, parsed strictly, never a way in")
struct MetricsFileTests {
    static let quiet = Progress(mode: .quiet)

    /// A run of `pipeline` that ended `exitCode` at `finished` (seconds since the epoch).
    static func run(_ pipeline: String, exitCode: Int32, finished: Double, counted: Bool = false) -> MetricsFile.Run {
        var r = MetricsFile.Run(
            pipeline: pipeline, started: Date(timeIntervalSince1970: finished - 2),
            finished: Date(timeIntervalSince1970: finished), exitCode: exitCode)
        if counted {
            r.rowsRead = 10
            r.rowsRejected = 1
            r.states = CustomerStates(active: 1, billingRetry: 2, churned: 3, notSubscriber: 4)
            r.eligible = [("offer-b", 5), ("offer-a", 6)]
        }
        return r
    }

    /// Writes `r` to `path` and returns the file's text.
    @discardableResult
    static func write(_ r: MetricsFile.Run, _ path: String) throws -> String {
        MetricsFile.write(r, to: path, group: nil, progress: quiet, lockTimeout: 2)
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    /// `name{labels}` → value of every sample of `text`, and the HELP and TYPE lines per name.
    static func samples(_ text: String) -> (values: [String: String], help: [String: Int], type: [String: Int]) {
        var values: [String: String] = [:]
        var help: [String: Int] = [:]
        var type: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if line.hasPrefix("# HELP ") {
                help[String(parts[2]), default: 0] += 1
            } else if line.hasPrefix("# TYPE ") {
                type[String(parts[2]), default: 0] += 1
            } else {
                values[String(parts[0])] = String(parts[1])
            }
        }
        return (values, help, type)
    }

    @Test("two pipelines share one file: each run replaces only its own series, HELP and TYPE once per family")
    func sharing() throws {
        let path = Paths.temporary() + "/winback.prom"
        try Self.write(Self.run("alpha", exitCode: 0, finished: 1000, counted: true), path)
        try Self.write(Self.run("beta", exitCode: 0, finished: 2000, counted: true), path)
        let afterBeta = Self.samples(try String(contentsOfFile: path, encoding: .utf8))
        // alpha fails: its counts go, its last success stays, beta's series are as they were.
        let text = try Self.write(Self.run("alpha", exitCode: 66, finished: 3000), path)
        let (values, help, type) = Self.samples(text)
        #expect(values["winback_last_success_timestamp_seconds{pipeline=\"alpha\"}"] == "1000.000")
        #expect(values["winback_last_exit_code{pipeline=\"alpha\"}"] == "66")
        #expect(values["winback_last_run_timestamp_seconds{pipeline=\"alpha\"}"] == "3000.000")
        #expect(values["winback_rows_read{pipeline=\"alpha\"}"] == nil)
        #expect(values["winback_eligible{pipeline=\"alpha\",offer=\"offer-a\"}"] == nil)
        for (series, value) in afterBeta.values where series.contains("pipeline=\"beta\"") {
            #expect(values[series] == value, "\(series)")
        }
        #expect(values.keys.filter { $0.contains("pipeline=\"beta\"") }.count == 12)
        for name in Set(values.keys.map { String($0.prefix { $0 != "{" }) }) {
            #expect(help[name] == 1, "\(name)")
            #expect(type[name] == 1, "\(name)")
        }
        // A family's samples are together, after its HELP and TYPE: the names never go back.
        var names: [String] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let name = String(line.prefix { $0 != "{" })
            if names.last != name {
                #expect(!names.contains(name), "\(name) is split")
                names.append(name)
            }
        }
        #expect(names == names.sorted())
        // Within a family: pipelines in order, each run's samples as written.
        let eligible = text.split(separator: "\n").filter { $0.hasPrefix("winback_eligible{") }
        #expect(
            eligible == [
                "winback_eligible{pipeline=\"beta\",offer=\"offer-b\"} 5",
                "winback_eligible{pipeline=\"beta\",offer=\"offer-a\"} 6",
            ])
        // The same run again over the same file writes the same bytes (deterministic).
        let again = try Self.write(Self.run("alpha", exitCode: 66, finished: 3000), path)
        #expect(again == text)
    }

    @Test("a failure never sets a last success to 0: none recorded, or 0 recorded, writes no sample")
    func noZeroSuccess() throws {
        let path = Paths.temporary() + "/winback.prom"
        let first = try Self.write(Self.run("alpha", exitCode: 66, finished: 1000), path)
        #expect(!first.contains("winback_last_success_timestamp_seconds{"))
        #expect(first.contains("winback_last_exit_code{pipeline=\"alpha\"} 66\n"))
        // A file an earlier version wrote, with 0 for "never", and another pipeline's success.
        try """
        # HELP winback_last_success_timestamp_seconds old text
        # TYPE winback_last_success_timestamp_seconds gauge
        winback_last_success_timestamp_seconds{pipeline="alpha"} 0
        winback_last_success_timestamp_seconds{pipeline="beta"} 500.000

        """.write(toFile: path, atomically: true, encoding: .utf8)
        let second = try Self.write(Self.run("alpha", exitCode: 75, finished: 2000), path)
        #expect(!second.contains("winback_last_success_timestamp_seconds{pipeline=\"alpha\"}"))
        #expect(second.contains("winback_last_success_timestamp_seconds{pipeline=\"beta\"} 500.000\n"))
        #expect(!second.contains("old text"), "the HELP text is this version's")
        // Another pipeline's success is not this one's.
        #expect(!second.contains("pipeline=\"alpha\"} 500"))
        let success = try Self.write(Self.run("alpha", exitCode: 0, finished: 3000), path)
        #expect(success.contains("winback_last_success_timestamp_seconds{pipeline=\"alpha\"} 3000.000\n"))
    }

    @Test("lines that do not parse are dropped; what parses is kept and written back as valid text format")
    func strictParse() throws {
        let good = [
            "other_metric{job=\"x\"} 1", "other_metric{job=\"y\",} 2.5e3 1700000000000", "plain_metric 3",
            "esc_metric{v=\"a\\\\b\\\"c\\nd\"} NaN", "inf_metric{pipeline=\"gamma\"} +Inf",
        ]
        let bad = [
            "1bad_name 1", "no_value{job=\"x\"}", "bad_value{job=\"x\"} 1x", "bad_value2 0x10",
            "bad_escape{job=\"\\q\"} 1", "unclosed{job=\"x\" 1", "dup_label{a=\"1\",a=\"2\"} 1",
            "trailing 1 2 3", "bad_timestamp 1 1.5", "other_metric{job=\"x\"} 9", "# TYPE plain_metric gauge",
            "# TYPE odd_metric weird", "# HELP esc_metric bad \\q escape", "label-dash{a-b=\"1\"} 1",
        ]
        var bytes = Array(
            (["# HELP other_metric Something else.", "# TYPE other_metric gauge", "# TYPE plain_metric counter"]
                + good + bad + ["# just a comment", "", "   "]).joined(separator: "\n").utf8)
        bytes += Array("\ninvalid_utf8{job=\"".utf8) + [0xFF, 0xFE] + Array("\"} 1\n".utf8)
        let e = MetricsExposition.parse(bytes)
        #expect(e.dropped.count == bad.count + 1, "\(e.dropped.map(\.text))")
        #expect(Set(e.dropped.map(\.text)).isSuperset(of: bad))
        #expect(e.samples.map(\.line).count == good.count)
        #expect(e.type["plain_metric"] == "counter")
        // Written back, it reads back to the same samples with nothing dropped.
        let back = MetricsExposition.parse(Array(e.text.utf8))
        #expect(back.dropped.isEmpty)
        #expect(back.samples.map(\.series).sorted() == e.samples.map(\.series).sorted())
        #expect(e.text.contains("esc_metric{v=\"a\\\\b\\\"c\\nd\"} NaN\n"))
        #expect(e.text.contains("# HELP other_metric Something else.\n# TYPE other_metric gauge\nother_metric{"))
    }

    @Test("a histogram's _bucket, _sum and _count samples stay one family")
    func histogramFamily() {
        let text = """
            # TYPE lat histogram
            lat_bucket{le="1"} 1
            zzz 4
            lat_bucket{le="+Inf"} 2
            lat_sum 3
            lat_count 2

            """
        let e = MetricsExposition.parse(Array(text.utf8))
        #expect(e.dropped.isEmpty)
        #expect(
            e.text
                == "# TYPE lat histogram\nlat_bucket{le=\"1\"} 1\nlat_bucket{le=\"+Inf\"} 2\nlat_sum 3\nlat_count 2\nzzz 4\n"
        )
    }

    // MARK: The previous file (docs/rules.md §6.2)

    @Test("a link at the path is not followed, even to a 2 GiB file: ignored promptly, then replaced by a file")
    func plantedLink() throws {
        let dir = Paths.temporary()
        let big = dir + "/big"
        #expect(FileManager.default.createFile(atPath: big, contents: nil))
        let h = try #require(FileHandle(forWritingAtPath: big))
        try h.truncate(atOffset: 2 << 30)
        try h.close()
        let path = dir + "/winback.prom"
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: big)
        let start = Date()
        #expect(MetricsFile.previous(path, progress: Self.quiet) == nil)
        let text = try Self.write(Self.run("alpha", exitCode: 0, finished: 1000), path)
        #expect(Date().timeIntervalSince(start) < 20, "read through the link")
        #expect(text.contains("winback_last_exit_code{pipeline=\"alpha\"} 0"))
        #expect(System.linkKind(path) == S_IFREG, "the link is replaced, not written through")
        #expect(System.fileSize(big) == 2 << 30)
        let head = try #require(FileHandle(forReadingAtPath: big))
        #expect(try head.read(upToCount: 4096) == Data(count: 4096))
        try head.close()
    }

    @Test("a FIFO or a folder at the path is ignored at once, never opened for a blocking read")
    func notRegular() throws {
        let dir = Paths.temporary()
        let fifo = dir + "/fifo.prom"
        #expect(mkfifo(fifo, 0o600) == 0)
        let start = Date()
        #expect(MetricsFile.previous(fifo, progress: Self.quiet) == nil)
        let text = try Self.write(Self.run("alpha", exitCode: 0, finished: 1000), fifo)
        #expect(Date().timeIntervalSince(start) < 20)
        #expect(text.contains("pipeline=\"alpha\""))
        #expect(System.linkKind(fifo) == S_IFREG)
        let folder = dir + "/folder.prom"
        try FileManager.default.createDirectory(atPath: folder + "/inside", withIntermediateDirectories: true)
        #expect(MetricsFile.previous(folder, progress: Self.quiet) == nil)
        MetricsFile.write(
            Self.run("alpha", exitCode: 0, finished: 1000), to: folder, group: nil, progress: Self.quiet, lockTimeout: 1
        )
        #expect(System.kind(folder + "/inside") == .directory, "the folder is left as it was")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == [
                ".fifo.prom.lock", ".folder.prom.lock", "fifo.prom", "folder.prom",
            ])
    }

    @Test("the previous file is read under 1 MiB only: 1 MiB − 1 bytes is read, 1 MiB is ignored")
    func sizeBoundary() throws {
        let dir = Paths.temporary()
        func file(_ size: Int) throws -> String {
            let line = "winback_last_success_timestamp_seconds{pipeline=\"beta\"} 500\n"
            let padding = String(repeating: "# padding\n", count: (size - line.utf8.count) / 10)
            let text = line + padding + String(repeating: "#", count: size - line.utf8.count - padding.utf8.count)
            #expect(text.utf8.count == size)
            let path = dir + "/\(size).prom"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let under = try file((1 << 20) - 1)
        #expect(
            MetricsFile.previous(under, progress: Self.quiet)?.value(
                of: "winback_last_success_timestamp_seconds", pipeline: "beta") == 500)
        let at = try file(1 << 20)
        #expect(MetricsFile.previous(at, progress: Self.quiet) == nil)
        let text = try Self.write(Self.run("alpha", exitCode: 0, finished: 1000), at)
        #expect(!text.contains("beta"), "an ignored file's series are not kept")
    }

    // MARK: The lock

    @Test("the lock is waited for, for a bounded time; a link planted at the lock is refused")
    func lock() throws {
        let dir = Paths.temporary()
        let path = dir + "/winback.prom"
        let holder = try System.openOrCreate(dir + "/.winback.prom.lock")
        #expect(try System.tryLock(holder))
        // Held throughout: the run gives up after its timeout and writes nothing.
        let start = Date()
        MetricsFile.write(
            Self.run("alpha", exitCode: 0, finished: 1000), to: path, group: nil, progress: Self.quiet,
            lockTimeout: 0.5)
        let waited = Date().timeIntervalSince(start)
        #expect(waited >= 0.5 && waited < 20)
        #expect(System.kind(path) == .missing)
        // Released while it waits: it writes.
        let release = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            System.closeQuietly(holder)
        }
        release.start()
        MetricsFile.write(
            Self.run("alpha", exitCode: 0, finished: 1000), to: path, group: nil, progress: Self.quiet,
            lockTimeout: 10)
        #expect(System.kind(path) == .file)
        // A link at the lock's name: refused, its target not created, the file not written.
        let other = dir + "/other.prom"
        try FileManager.default.createSymbolicLink(
            atPath: dir + "/.other.prom.lock", withDestinationPath: dir + "/target")
        MetricsFile.write(
            Self.run("alpha", exitCode: 0, finished: 1000), to: other, group: nil, progress: Self.quiet,
            lockTimeout: 1)
        #expect(System.kind(dir + "/target") == .missing)
        #expect(System.kind(other) == .missing)
    }

    // MARK: Where the file may be

    @Test("a metrics path in the output folder, as written or through links, is inside; a sibling is not")
    func inside() throws {
        let dir = Paths.temporary()
        try FileManager.default.createDirectory(atPath: dir + "/out/nightly", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir + "/alias", withDestinationPath: dir + "/out")
        let out = dir + "/out"
        #expect(MetricsPlace.isInside(out + "/nightly/latest", output: out))
        #expect(MetricsPlace.isInside(out + "/x.prom", output: out))
        #expect(MetricsPlace.isInside(out, output: out))
        #expect(MetricsPlace.isInside(out + "/nightly/../../out/./a/b.prom", output: out))
        #expect(MetricsPlace.isInside(dir + "/alias/nightly/latest", output: out), "through a link to the folder")
        #expect(MetricsPlace.isInside(dir + "/elsewhere/../alias/m.prom", output: out))
        #expect(MetricsPlace.isInside(out + "/m.prom", output: dir + "/alias"), "the output folder itself a link")
        // `..` after a link is the link target's parent, as the system resolves it.
        try FileManager.default.createSymbolicLink(atPath: dir + "/deep", withDestinationPath: out + "/nightly")
        #expect(MetricsPlace.isInside(dir + "/deep/../m.prom", output: out))
        #expect(!MetricsPlace.isInside(dir + "/out2/m.prom", output: out))
        #expect(!MetricsPlace.isInside(dir + "/m.prom", output: out))
        #expect(!MetricsPlace.isInside(dir + "/out/../m.prom", output: out))
        // The file's own name is a link into the folder: it would be replaced, not followed.
        try FileManager.default.createSymbolicLink(atPath: dir + "/m.prom", withDestinationPath: out + "/x")
        #expect(!MetricsPlace.isInside(dir + "/m.prom", output: out))
    }

    @Test("the pipeline file names a metrics path in the output folder: a problem of output.metrics (78)")
    func configuration() {
        func problems(_ metrics: String) -> [String] {
            let text = PipelineText.minimal(output: ["formats: [csv]", "metrics: \(metrics)"])
            return PipelineConfig.parse(text, path: "/srv/pipelines/nightly.yaml").1
        }
        for inside in ["../Output/nightly/latest", "/srv/Output/winback.prom", "../Output", "./../Output/x/../y.prom"] {
            let p = problems(inside)
            #expect(p.count == 1, "\(inside): \(p)")
            #expect(
                p.first?.contains("field 'output.metrics'") == true
                    && p.first?.contains("inside the output folder") == true, "\(p)")
        }
        for outside in ["/var/lib/node_exporter/textfile/winback.prom", "../Output2/m.prom", "../m.prom"] {
            #expect(problems(outside).isEmpty, "\(outside)")
        }
    }
}
