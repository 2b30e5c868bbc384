import Foundation
import Testing
import WinBack
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTestSupport
import WinBackTesting
import WinBackWrite

/// Names are data (docs/rules.md §6.2): a transaction file whose name holds control bytes, or
/// bytes that are not UTF-8, is read like any other, and its name is written escaped in
/// rejects.csv (one line per reject), the manifest (valid JSON), the logs, messages and
/// explain.
@Suite("Hostile file names", .serialized, .tags(.slow))
struct HostileNameTests {
    typealias H = HostileInputTests

    /// A name with a newline, ESC, BS and DEL; one with byte 0xFF. Both match the world's glob
    /// `transactions-*.jsonl.gz`, and sort (by bytes) where the files they replace did.
    static let controlName = Array("transactions-2025-06\n\u{1B}\u{8}\u{7F}.jsonl.gz".utf8)
    static let controlShown = "transactions-2025-06\\x0A\\x1B\\x08\\x7F.jsonl.gz"
    static let byteName = Array("transactions-2026-01".utf8) + [0xFF] + Array(".jsonl.gz".utf8)
    static let byteShown = "transactions-2026-01\\xFF.jsonl.gz"

    /// rename(2) with the raw bytes of `to`, not through the code under test.
    static func rename(_ from: String, toBytes to: [UInt8]) throws {
        let rc = (to + [0]).withUnsafeBufferPointer { p in
            p.withMemoryRebound(to: CChar.self) { Glibc.rename(from, $0.baseAddress!) }
        }
        guard rc == 0 else { throw WinBackError(.cannotCreateOutput, "rename failed: \(errno)", path: from) }
    }

    /// Replaces `file` of the world's folder by a file named `name` (raw bytes) holding its rows
    /// with a bad line (its first line cut short, so it still names the customer) as line 2.
    /// Returns the file's lines (the bad one included) and the customer the bad line names.
    static func rename(_ dir: String, _ file: String, to name: [UInt8]) throws -> (lines: Int, customer: String) {
        let lines = try H.gunzippedLines(dir + "/" + file)
        let first = try #require(lines.first)
        let text = String(decoding: first, as: UTF8.self)
        let id = try #require(text.firstMatch(of: #/"originalTransactionId": ?"([0-9]+)"/#)?.1)
        let staged = dir + "/staged.tmp"
        let w = try GzipWriter(path: staged)
        try w.write(first)
        try w.write(Array(first.prefix(first.count / 2)) + [0x0A])
        for l in lines.dropFirst() { try w.write(l) }
        try w.close()
        try FileManager.default.removeItem(atPath: dir + "/" + file)
        try rename(staged, toBytes: Array((dir + "/").utf8) + name)
        return (lines.count + 1, String(id))
    }

    /// The world with both hostile names in place, and what each file holds.
    static func hostileWorld(
        limits: [String]
    ) throws -> (pipeline: String, files: Int, control: Int, byte: Int, customer: String) {
        let pipeline = try H.world(customers: 40, limits: limits)
        let dir = H.folder(pipeline)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("transactions-") }
        let a = try rename(dir, "transactions-2025-06.jsonl.gz", to: controlName)
        let b = try rename(dir, "transactions-2026-01.jsonl.gz", to: byteName)
        // The names are the bytes themselves on disk.
        let listed = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(listed.contains { $0.hasPrefix("transactions-2025-06\n") })
        return (pipeline, files.count, a.lines, b.lines, a.customer)
    }

    /// rejects.csv lists the two bad lines, one line each, their files named escaped.
    static func expectRejects(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let bytes = try #require(H.bytes(path), sourceLocation: sourceLocation)
        #expect(!bytes.contains(0x1B) && !bytes.contains(0x7F) && !bytes.contains(0xFF), sourceLocation: sourceLocation)
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4, "\(lines)", sourceLocation: sourceLocation)  // header, two rejects, ""
        guard lines.count == 4 else { return }
        #expect(lines[1].hasPrefix(controlShown + ",2,"), "\(lines[1])", sourceLocation: sourceLocation)
        #expect(lines[2].hasPrefix(byteShown + ",2,"), "\(lines[2])", sourceLocation: sourceLocation)
    }

    /// The manifest is valid JSON; it names every file escaped, in the order of their bytes,
    /// and counts the rows of the hostile ones.
    static func expectManifest(
        _ path: String, folder: String, files: Int, control: Int, byte: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let data = try #require(H.bytes(path), sourceLocation: sourceLocation)
        let json = try #require(
            try JSONSerialization.jsonObject(with: data) as? [String: Any], sourceLocation: sourceLocation)
        let inputs = try #require(json["inputs"] as? [[String: Any]], sourceLocation: sourceLocation)
        let paths = inputs.compactMap { $0["path"] as? String }
        #expect(paths.count == files, sourceLocation: sourceLocation)
        #expect(paths.allSatisfy { $0.hasPrefix(folder + "/transactions-") }, sourceLocation: sourceLocation)
        #expect(
            !paths.contains { $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0 == "\u{FFFD}" } },
            sourceLocation: sourceLocation)
        let raw = paths.map(ControlEscape.nameBytes)
        #expect(raw == raw.sorted { $0.lexicographicallyPrecedes($1) }, sourceLocation: sourceLocation)
        for (shown, rows) in [(controlShown, control), (byteShown, byte)] {
            let input = inputs.first { ($0["path"] as? String) == folder + "/" + shown }
            #expect(
                input?["rows"] as? Int == rows, "\(shown): \(String(describing: input))", sourceLocation: sourceLocation
            )
            #expect(input?["rejected"] as? Int == 1, sourceLocation: sourceLocation)
        }
        #expect(raw.contains(Array((folder + "/").utf8) + byteName), sourceLocation: sourceLocation)
    }

    @Test(
        "files named with a newline, ESC, BS, DEL or byte 0xFF are read; rejects.csv and the manifest name them escaped"
    )
    func hostileNamesAreRead() throws {
        let (pipeline, files, control, byte, _) = try Self.hostileWorld(limits: ["maxRejectedFraction: 0.5"])
        let folder = H.folder(pipeline)
        // The same world under ordinary names: the audience is the same, so the files were read.
        let plain = try H.world(customers: 40, limits: ["maxRejectedFraction: 0.5"])
        let reference = try ShardedRunTests.inMemory(plain)

        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--output", output, "--log-format", "json"])
        #expect(r.status == 0, "\(r.stderr)")
        for line in r.stderr.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)")
        }
        let latest = output + "/generated/latest"
        try Self.expectRejects(latest + "/rejects.csv")
        try Self.expectManifest(latest + "/manifest.json", folder: folder, files: files, control: control, byte: byte)
        #expect(H.audience(latest) == reference.filter { $0.key != "rejects.csv" })

        let validate = try CLI.run(["validate", pipeline])
        #expect(validate.status == 0, "\(validate.stderr)")
    }

    @Test("over the reject budget: 65, and the failed folder's rejects.csv and manifest name the files escaped")
    func hostileNamesOverBudget() throws {
        let (pipeline, files, control, byte, _) = try Self.hostileWorld(limits: ["maxRejectedFraction: 0"])
        let output = Paths.temporary()
        let r = try CLI.run(["run", pipeline, "--quiet", "--output", output])
        H.expectExit(r, 65, naming: "maxRejectedFraction", "two rejected lines over a budget of 0")
        let failed = output + "/generated/.failed-\(H.date)"
        try Self.expectRejects(failed + "/rejects.csv")
        try Self.expectManifest(
            failed + "/manifest.json", folder: H.folder(pipeline), files: files, control: control, byte: byte)
        #expect(!FileManager.default.fileExists(atPath: output + "/generated/latest"))
    }

    @Test("explain names the rejected line's file escaped, in text and JSON")
    func explainNamesEscaped() throws {
        let (pipeline, _, _, _, customer) = try Self.hostileWorld(limits: ["maxRejectedFraction: 0.5"])
        let text = try CLI.run(["explain", pipeline, "--customer", customer])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains(Self.controlShown + ":2: "), "\(text.stdout)")
        #expect(!text.stdout.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{7F}" || $0 == "\u{8}" })
        let json = try CLI.run(["explain", pipeline, "--customer", customer, "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let customers = object["customers"] as? [[String: Any]] ?? []
        let files = customers.flatMap { ($0["rejectedLines"] as? [[String: Any]]) ?? [] }.compactMap {
            $0["file"] as? String
        }
        #expect(files == [H.folder(pipeline) + "/" + Self.controlShown], "\(files)")
    }

    @Test("a corrupt file named with byte 0xFF and a newline: 65, the message names it escaped on one line")
    func corruptFileNamedEscaped() throws {
        let pipeline = try H.world(customers: 10)
        let dir = H.folder(pipeline)
        let name = Array("transactions-zz".utf8) + [0xFF, 0x0A] + Array(".jsonl.gz".utf8)
        let shown = dir + "/transactions-zz\\xFF\\x0A.jsonl.gz"
        try Data("not gzip at all\n".utf8).write(to: URL(fileURLWithPath: dir + "/staged.tmp"))
        try Self.rename(dir + "/staged.tmp", toBytes: Array((dir + "/").utf8) + name)

        let text = try CLI.run(["run", pipeline, "--quiet", "--output", Paths.temporary()])
        H.expectExit(text, 65, naming: shown, "a corrupt file with a hostile name")
        #expect(!text.stderr.contains("\u{FFFD}") && !text.stderr.contains("\n.jsonl.gz"), "\(text.stderr)")
        #expect(!text.stderr.contains("No such file"), "\(text.stderr)")

        let json = try CLI.run(["run", pipeline, "--output", Paths.temporary(), "--log-format", "json"])
        #expect(json.status == 65)
        let lines = json.stderr.split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count, "\(json.stderr)")
        let failure = objects.first { $0["event"] as? String == "failed" }
        #expect((failure?["message"] as? String)?.contains(shown) == true, "\(json.stderr)")
    }

    @Test("incremental: files with hostile names are taken from the state the next night; one gone is named escaped")
    func incrementalNames() throws {
        let (pipeline, files, _, _, _) = try Self.hostileWorld(limits: ["maxRejectedFraction: 0.5"])
        let text = try String(contentsOfFile: pipeline, encoding: .utf8)
        try (text + "incremental: true\n").write(toFile: pipeline, atomically: true, encoding: .utf8)
        let output = Paths.temporary()
        let latest = output + "/generated/latest"
        func night() throws -> [String: Any] {
            let r = try CLI.run(["run", pipeline, "--output", output, "--as-of", H.date, "--log-format", "json"])
            #expect(r.status == 0, "\(r.stderr)")
            let data = try #require(H.bytes(latest + "/manifest.json"))
            let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            return try #require(json["incremental"] as? [String: Any])
        }
        _ = try night()
        let second = try night()
        #expect(second["filesFromState"] as? Int == files, "\(second)")
        #expect(second["filesRead"] as? Int == 0, "\(second)")
        try Self.expectRejects(latest + "/rejects.csv")

        let gone = Array((H.folder(pipeline) + "/").utf8) + Self.byteName + [0]
        #expect(
            gone.withUnsafeBufferPointer { p in p.withMemoryRebound(to: CChar.self) { unlink($0.baseAddress!) } } == 0)
        let third = try night()
        let reason = third["reason"] as? String ?? ""
        #expect(reason.contains(Self.byteShown + " was absorbed and is gone"), "\(third)")
    }
}
