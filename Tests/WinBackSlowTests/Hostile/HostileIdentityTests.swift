import Foundation
import Testing
import WinBack
import WinBackSupport
import WinBackTestSupport
import WinBackTesting
import WinBackWrite

/// The identities file under attack (docs/rules.md §6.2): whatever it holds, a run ends with
/// its documented exit code, promptly, within its memory limit (or 256 MB without one), and
/// identity values reach the destination files exactly as written or not at all.
@Suite("Hostile identities", .serialized, .tags(.slow))
struct HostileIdentityTests {
    static let date = HostileInputTests.date

    /// A generated world whose pipeline sends best-offer to Braze and Klaviyo through the
    /// identities file `name` (written by `write` into the world's folder); `limits` under
    /// `limits:`.
    static func world(
        identities name: String, limits: [String] = [], customers: Int = 40, _ write: (String) throws -> Void
    ) throws -> String {
        let pipeline = try HostileInputTests.world(customers: customers, limits: limits)
        let folder = HostileInputTests.folder(pipeline)
        try write(folder + "/" + name)
        var text = try String(contentsOfFile: pipeline, encoding: .utf8)
        if text.contains("\nidentities:") {
            // The generated pipeline already joins its own identities file: point it at this one.
            text = text.replacingOccurrences(of: "  path: identities.csv.gz", with: "  path: \(name)")
        } else {
            text += "identities:\n  path: \(name)\n  key: original_transaction_id\n"
        }
        if !text.contains("destinations: [braze, klaviyo]") {
            text = text.replacingOccurrences(of: "output:\n", with: "output:\n  destinations: [braze, klaviyo]\n")
        }
        try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
        return pipeline
    }

    /// Runs the command line under /usr/bin/time: its result and its peak resident memory in bytes.
    static func measured(_ args: [String]) throws -> (CLI.Result, Int) {
        let report = Paths.temporary() + "/time.txt"
        let r = try CLI.run(args, launcher: ["/usr/bin/time", "-f", "%M", "-o", report])
        // GNU time writes "Command exited with non-zero status N" first when the status is not 0.
        let text = try String(contentsOfFile: report, encoding: .utf8)
        let kb = text.split(separator: "\n").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? -1
        return (r, kb * 1024)
    }

    static let timeAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/time")

    /// Writes `text` gzipped (by zlib's own writer through the package's GzipWriter).
    static func gzip(_ path: String, _ body: (GzipWriter) throws -> Void) throws {
        let w = try GzipWriter(path: path, level: 6)
        try body(w)
        try w.close()
    }

    static func write(_ w: GzipWriter, _ s: String) throws { try w.write(Array(s.utf8)) }

    /// A run with and without `--memory 64MB`: both end with `status` within their bound.
    static func expectBounded(
        _ pipeline: String, status: Int32, naming: String? = nil, seconds: Double = 60,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [CLI.Result] {
        var results: [CLI.Result] = []
        for (memory, bound) in [(["--memory", "64MB"], 64_000_000), ([], 256 << 20)] {
            let output = Paths.temporary()
            let started = Date()
            let (r, peak) = try measured(["run", pipeline, "--quiet", "--output", output] + memory)
            let took = Date().timeIntervalSince(started)
            #expect(r.status == status, "\(memory): exit \(r.status): \(r.stderr)", sourceLocation: sourceLocation)
            if let naming {
                #expect(r.stderr.contains(naming), "\(memory): \(r.stderr)", sourceLocation: sourceLocation)
            }
            #expect(
                peak > 0 && peak < bound, "\(memory): peak \(peak) bytes, bound \(bound)",
                sourceLocation: sourceLocation)
            #expect(took < seconds, "\(memory): \(took) s", sourceLocation: sourceLocation)
            results.append(r)
        }
        return results
    }

    @Test(
        "a header of a million columns (a 100 KB gzip of 100 such rows) is 65 at once, naming the file, within the limit",
        .enabled(if: timeAvailable, "needs /usr/bin/time (Debian: time) to measure the run's peak memory"))
    func millionColumns() throws {
        let pipeline = try Self.world(identities: "wide.csv.gz") { path in
            try Self.gzip(path) { w in
                try Self.write(
                    w, "original_transaction_id,external_id,email" + String(repeating: ",", count: 999_997) + "\n")
                for i in 0..<100 {
                    try Self.write(w, "\(3_000_000 + i)" + String(repeating: ",", count: 999_999) + "\n")
                }
            }
        }
        #expect(
            try #require(
                FileManager.default.attributesOfItem(atPath: HostileInputTests.folder(pipeline) + "/wide.csv.gz")[.size]
                    as? Int) < 200_000)
        _ = try Self.expectBounded(pipeline, status: 65, naming: "more than 1024 columns")
    }

    @Test(
        "rows of a million empty fields under a 3-column header are rejected unread, one line each; the run publishes within its limit",
        .enabled(if: timeAvailable, "needs /usr/bin/time (Debian: time) to measure the run's peak memory"))
    func millionFieldRows() throws {
        let pipeline = try Self.world(identities: "rows.csv.gz", limits: ["maxRejectedFraction: 1"]) { path in
            try Self.gzip(path) { w in
                try Self.write(w, "original_transaction_id,external_id,email\n")
                for i in 0..<100 {
                    try Self.write(w, "\(3_000_000 + i)" + String(repeating: ",", count: 999_999) + "\n")
                }
                try Self.write(w, "3999999,u-9,nine@example.com\n")
            }
        }
        for r in try Self.expectBounded(pipeline, status: 0) { #expect(r.stdout.contains(Self.date)) }
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try HostileInputTests.rejectRows(output + "/generated/latest/rejects.csv")
        #expect(rows.count == 100)
        #expect(
            rows.allSatisfy {
                $0.hasPrefix("rows.csv.gz,")
                    && ($0.contains("longer than any valid identity row") || $0.contains("more than 19 fields"))
            })
    }

    @Test(
        "100 emails of 15 MiB (a 1.5 MB gzip): 65 over the budget, each rejected unread; under it, no destination file holds them",
        .enabled(if: timeAvailable, "needs /usr/bin/time (Debian: time) to measure the run's peak memory"))
    func hugeEmails() throws {
        let huge = String(repeating: "a", count: 15 << 20) + "@example.com"
        let make: (String) throws -> Void = { path in
            try Self.gzip(path) { w in
                try Self.write(w, "original_transaction_id,external_id,email\n")
                for i in 0..<100 { try Self.write(w, "\(3_000_000 + i),u-\(i),\(huge)\n") }
            }
        }
        let pipeline = try Self.world(identities: "emails.csv.gz", make)
        _ = try Self.expectBounded(pipeline, status: 65, naming: "100 of 100 identity rows rejected")
        try HostileInputTests.setLimits(pipeline, ["maxRejectedFraction: 1"])
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        for tool in ["braze", "klaviyo"] {
            let folder = output + "/generated/latest/destinations/" + tool
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
                let size = try #require(
                    FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.size] as? Int)
                #expect(size < 10_000, "\(tool)/\(name): \(size) bytes")
            }
        }
    }

    /// The world's customers, by originalTransactionId (docs/rules.md §4.1 best-offer rows).
    static func audience(_ pipeline: String) throws -> [String] {
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        let text = try String(contentsOfFile: output + "/generated/latest/segments/best-offer.csv", encoding: .utf8)
        return text.split(separator: "\n").dropFirst().map { String($0.split(separator: ",")[1]) }
    }

    @Test(
        "a million-row identities file under --memory 64MB stays within 64 MB and writes the destination files of a run in memory"
    )
    func millionRows() throws {
        // The audience first, from a pipeline without destinations.
        let plain = try HostileInputTests.world(customers: 300)
        let audience = try Self.audience(plain)
        try #require(audience.count > 10)
        let pipeline = try Self.world(identities: "million.csv.gz", customers: 300) { path in
            try Self.gzip(path) { w in
                try Self.write(w, "original_transaction_id,external_id,email\n")
                var block = ""
                for i in 0..<1_000_000 {
                    block += "\(5_000_000_000 + i),user-\(i),someone.with.a.long.name\(i)@example.com\n"
                    if i % 50_000 == 49_999 {
                        try Self.write(w, block)
                        block = ""
                    }
                }
                // Every second customer of the audience is addressable, with a phone-like id.
                for (k, id) in audience.enumerated() where k % 2 == 0 {
                    try Self.write(w, "\(id),+1415555\(k),c\(k)@example.com\n")
                }
            }
        }
        var files: [[String: Data]] = []
        for memory in [["--memory", "64MB"], []] {
            let output = Paths.temporary()
            let (r, peak) =
                Self.timeAvailable
                ? try Self.measured(["run", pipeline, "--quiet", "--output", output] + memory)
                : (try CLI.run(["run", pipeline, "--quiet", "--output", output] + memory), 0)
            #expect(r.status == 0, "\(memory): \(r.stderr)")
            if Self.timeAvailable {
                #expect(peak < (memory.isEmpty ? 256 << 20 : 64_000_000), "\(memory): peak \(peak) bytes")
            }
            files.append(publishedFiles(output + "/generated/latest"))
        }
        let braze = try #require(files[0]["destinations/braze/best-offer-001.csv"])
        #expect(files[0].filter { !$0.key.hasPrefix("manifest") } == files[1].filter { !$0.key.hasPrefix("manifest") })
        let lines = String(decoding: braze, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 1 + (audience.count + 1) / 2)
        // Ids reach the file exactly as written: no quote mark in front of a '+'.
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("+1415555") }, "\(lines.prefix(3))")
    }

    @Test(
        "a baseline whose Braze file holds a million values: their exits under --memory 64MB stay within 64 MB",
        .enabled(if: timeAvailable, "needs /usr/bin/time (Debian: time) to measure the run's peak memory"))
    func millionExits() throws {
        let plain = try HostileInputTests.world(customers: 100)
        let audience = try Self.audience(plain)
        try #require(audience.count > 5)
        let pipeline = try Self.world(identities: "ids.csv", customers: 100) { path in
            var text = "original_transaction_id,external_id,email\n"
            for (k, id) in audience.enumerated() { text += "\(id),tonight-\(k),c\(k)@example.com\n" }
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        }
        let output = Paths.temporary()
        let first = try CLI.run(["run", pipeline, "--quiet", "--output", output, "--as-of", "2026-11-01"])
        #expect(first.status == 0, "\(first.stderr)")
        // The first night's Braze file becomes a million customers, every one gone tonight.
        let folder = output + "/generated/2026-11-01"
        let rel = "destinations/braze/best-offer-001.csv"
        var text =
            "external_id,winback_offer_id,winback_offer_url,winback_eligible_offer_ids,"
            + "winback_months_since_last_subscribed,winback_as_of,winback_status\n"
        text.reserveCapacity(80_000_000)
        for i in 0..<1_000_000 {
            text += "someone.with.a.long.name\(i)@old.example.com,wb.a,,wb.a,2,2026-11-01,eligible\n"
        }
        try DestinationChangesTests.republish(folder, rel, text)
        text = ""
        let (r, peak) = try Self.measured(["run", pipeline, "--quiet", "--output", output, "--memory", "64MB"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(peak > 0 && peak < 64_000_000, "peak \(peak) bytes")
        let published = publishedFiles(output + "/generated/latest")
        var exited = 0
        for (name, data) in published where name.hasPrefix("destinations/braze/best-offer-exited-") {
            exited += data.reduce(0) { $0 + ($1 == 10 ? 1 : 0) } - 1
        }
        #expect(exited == 1_000_000)
    }

    @Test(
        "a baseline whose best-offer segment holds a million customers: their exits under --memory 64MB stay within 64 MB",
        .enabled(if: timeAvailable, "needs /usr/bin/time (Debian: time) to measure the run's peak memory"))
    func millionSegmentExits() throws {
        let pipeline = try HostileInputTests.world(customers: 100)
        let output = Paths.temporary()
        let first = try CLI.run(["run", pipeline, "--quiet", "--output", output, "--as-of", "2026-11-01"])
        #expect(first.status == 0, "\(first.stderr)")
        // The first night's best-offer segment becomes a million customers of a group of its own,
        // in customer order, every one gone tonight.
        let rel = "segments/best-offer.csv"
        var text = SegmentWriter.columns.joined(separator: ",") + "\n"
        text.reserveCapacity(200_000_000)
        for i in 0..<1_000_000 {
            text +=
                "9,\(9_000_000_000_000_000 + i),,USA,p,3,2024-09-17T13:52:42.000Z,2024-12-17T13:52:42.000Z,"
                + "23,wb.a,1,wb.a,,\n"
        }
        try DestinationChangesTests.republish(output + "/generated/2026-11-01", rel, text)
        text = ""
        for memory in [["--memory", "64MB"], []] {
            let night = Paths.temporary()
            try FileManager.default.copyItem(atPath: output, toPath: night + "/out")
            let (r, peak) = try Self.measured(["run", pipeline, "--quiet", "--output", night + "/out"] + memory)
            #expect(r.status == 0, "\(memory): \(r.stderr)")
            #expect(peak > 0 && peak < (memory.isEmpty ? 256 << 20 : 64_000_000), "\(memory): peak \(peak) bytes")
            let changes = try Data(
                contentsOf: URL(fileURLWithPath: night + "/out/generated/latest/segments/changes/best-offer.csv"))
            let exited = String(decoding: changes, as: UTF8.self).split(separator: "\n").filter {
                $0.hasPrefix("exited,9,9")
            }
            #expect(exited.count == 1_000_000, "\(memory)")
        }
    }

    @Test("identity values with controls or formulas are rejected, one line each; what is written holds none of them")
    func controlsAndFormulas() throws {
        let plain = try HostileInputTests.world(customers: 200)
        let audience = try Self.audience(plain)
        try #require(audience.count >= 8)
        let bad = ["a\u{0}b", "a\u{1B}[2Jb", "a\u{8}b", "a\u{7F}b", "=1+1", "@SUM(A1)", "+cmd|' /C calc'!A0", "-x"]
        let pipeline = try Self.world(identities: "ids.csv", limits: ["maxRejectedFraction: 1"], customers: 200) {
            path in
            var text = "original_transaction_id,external_id,email\n"
            for (k, id) in audience.enumerated() {
                let v = k < bad.count ? bad[k] : "-1 (415) 555-\(k)"
                text += "\(id),\"\(v)\",c\(k)@example.com\n"
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        }
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try HostileInputTests.rejectRows(output + "/generated/latest/rejects.csv")
        #expect(rows.count == bad.count, "\(rows)")
        let braze = try String(
            contentsOfFile: output + "/generated/latest/destinations/braze/best-offer-001.csv", encoding: .utf8)
        #expect(!braze.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || $0.value == 0x7F })
        let ids = braze.split(separator: "\n").dropFirst().map { $0.split(separator: ",")[0] }
        #expect(ids.count == audience.count - bad.count)
        #expect(ids.allSatisfy { $0.hasPrefix("-1 (415) 555-") }, "\(ids.prefix(3))")
        // Klaviyo's emails were in the same rows: those rows are gone whole.
        let klaviyo = try String(
            contentsOfFile: output + "/generated/latest/destinations/klaviyo/best-offer-001.csv", encoding: .utf8)
        #expect(klaviyo.split(separator: "\n").count == 1 + audience.count - bad.count)
    }
}
