import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport

extension S3StorageTests {
    /// docs/rules.md §12 with `s3://` transaction objects: the ledger records each object's ETag
    /// and size, a new object is read alone, and an absorbed object that changed or is gone
    /// makes the run read every object again; the published files are a plain run's.
    @Suite("Incremental runs over s3:// transaction objects")
    struct S3IncrementalTests {
        /// A world whose transaction files (up to the as-of's month) are put, as chosen, under a
        /// key prefix of their own; its plain and incremental pipelines read them from there,
        /// and every other input from the world's objects.
        struct Objects {
            let server: SeaweedServer
            let world: S3World
            /// The key prefix of the transaction objects, ending in "/".
            let prefix: String
            /// The world's transaction files up to the as-of's month, sorted.
            let files: [String]
            let plain: String
            let incremental: String

            init(_ server: SeaweedServer, customers: Int = 300, seed: UInt64) throws {
                self.server = server
                world = try S3World.make(server, customers: customers, seed: seed)
                prefix = "inc-" + String(UUID().uuidString.prefix(8)).lowercased() + "/"
                files = world.transactionFiles.filter { $0 < "transactions-2026-12" }
                plain = try world.pipeline(
                    fromS3: Set(S3World.Input.allCases),
                    transactions: "s3://\(S3World.bucket)/\(prefix)transactions-*.jsonl.gz")
                incremental = (plain as NSString).deletingLastPathComponent + "/incremental.yaml"
                let text = try String(contentsOfFile: plain, encoding: .utf8)
                try (text + "\nincremental: true\n").write(toFile: incremental, atomically: true, encoding: .utf8)
            }

            func uri(_ name: String) -> String { "s3://\(S3World.bucket)/\(prefix)\(name)" }

            /// Puts the world's files `names` at their keys.
            func put(_ names: [String]) throws {
                try Boto.put(
                    server, bucket: S3World.bucket, files: names.map { (world.folder + "/" + $0, prefix + $0) })
            }

            /// Puts `data` at the key of `name`.
            func put(_ data: Data, as name: String) throws {
                let local = Paths.temporary() + "/" + name
                try data.write(to: URL(fileURLWithPath: local))
                try Boto.put(server, bucket: S3World.bucket, files: [(local, prefix + name)])
            }

            /// The transaction objects as boto3 lists them, by URI: ETag (unquoted) and size.
            func listed() throws -> [String: (etag: String, size: Int)] {
                var out: [String: (etag: String, size: Int)] = [:]
                for o in try Boto.objects(server, bucket: S3World.bucket, prefix: prefix) {
                    let key = try #require(o["key"] as? String)
                    out["s3://\(S3World.bucket)/" + key] = (
                        S3IncrementalTests.unquoted(o["etag"] as? String ?? ""), o["size"] as? Int ?? -1
                    )
                }
                return out
            }

            /// `winback run PIPELINE --as-of 2026-11-22 --output OUTPUT --threads 2`, through the
            /// command line with the server's environment.
            func night(_ pipeline: String, output: String) throws -> IncrementalRunTests.Night {
                let r = try CLI.run(
                    ["run", pipeline, "--as-of", S3World.date, "--output", output, "--threads", "2"],
                    environment: server.environment())
                try #require(r.status == 0, "\(r.stderr)")
                return try IncrementalRunTests.read(published: S3Run.folder(r))
            }

            /// A night of the incremental pipeline into `output`, and a plain run over the same
            /// objects into a fresh folder: the same published files, counts and inputs.
            func compare(
                output: String, sourceLocation: SourceLocation = #_sourceLocation
            ) throws -> IncrementalRunTests.Night {
                let incremental = try night(self.incremental, output: output)
                let plain = try night(self.plain, output: Paths.temporary())
                IncrementalRunTests.expectSame(incremental.files, plain.files, sourceLocation: sourceLocation)
                #expect(plain.manifest["incremental"] == nil, sourceLocation: sourceLocation)
                for key in ["counters", "inputs", "eligible", "outputs"] {
                    #expect(
                        IncrementalRunTests.canonical(incremental.manifest[key])
                            == IncrementalRunTests.canonical(plain.manifest[key]),
                        "manifest \(key) differs from the plain run's", sourceLocation: sourceLocation)
                }
                #expect(
                    incremental.rowsInState == IncrementalRunTests.winners(plain), sourceLocation: sourceLocation)
                return incremental
            }

            /// The state's ledger.json checked against its checksum line: by file, its ETag
            /// (unquoted) and size.
            func ledger(_ output: String) throws -> [String: (etag: String?, size: Int?)] {
                let path = IncrementalRunTests.stateFolder(output) + "/" + StateFolder.ledgerName
                let text = try String(contentsOfFile: path, encoding: .utf8)
                #expect(text.hasSuffix("\n"))
                let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false)
                try #require(lines.count > 1)
                let checksum = String(lines[lines.count - 1])
                let body = Data((lines.dropLast().joined(separator: "\n") + "\n").utf8)
                #expect(checksum == "sha256 " + Helper.sha256(body), "the ledger's checksum line")
                let ledger = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
                var out: [String: (etag: String?, size: Int?)] = [:]
                for f in try #require(ledger["files"] as? [[String: Any]]) {
                    let path = try #require(f["path"] as? String)
                    #expect(out[path] == nil, "\(path) listed once")
                    out[path] = (
                        (f["etag"] as? String).map(S3IncrementalTests.unquoted),
                        (f["stats"] as? [String: Any])?["bytes"] as? Int
                    )
                }
                return out
            }

            /// The ledger lists every transaction object there is, each with its ETag and size.
            func expectLedger(_ output: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
                let ledger = try self.ledger(output)
                let objects = try listed()
                #expect(
                    ledger.keys.sorted() == objects.keys.sorted(), "the ledger lists the objects",
                    sourceLocation: sourceLocation)
                for (uri, o) in objects.sorted(by: { $0.key < $1.key }) {
                    #expect(!o.etag.isEmpty, sourceLocation: sourceLocation)
                    #expect(
                        ledger[uri]?.etag == o.etag, "\(uri): the ETag in the ledger", sourceLocation: sourceLocation)
                    #expect(
                        ledger[uri]?.size == o.size, "\(uri): the size in the ledger", sourceLocation: sourceLocation)
                }
            }
        }

        static func unquoted(_ etag: String) -> String {
            etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }

        @Test("a new object is read alone, the others come from the state; the ledger records their ETags")
        func newObjectAbsorbed() throws {
            let server = try #require(SeaweedServer.current)
            let s = try Objects(server, seed: 61)
            let newest = try #require(s.files.last)
            #expect(newest == "transactions-2026-11.jsonl.gz")
            try #require(s.files.count > 3)
            try s.put(Array(s.files.dropLast()))
            let output = Paths.temporary()

            let first = try s.compare(output: output)
            IncrementalRunTests.expect(first, "created", read: s.files.count - 1, fromState: 0)
            IncrementalRunTests.expectStateFiles(IncrementalRunTests.stateFolder(output))
            try s.expectLedger(output)
            #expect(try s.ledger(output)[s.uri(newest)] == nil)

            try s.put([newest])
            let second = try s.compare(output: output)
            IncrementalRunTests.expect(second, "absorbed", read: 1, fromState: s.files.count - 1)
            // The new object's rows change what is published.
            #expect(second.files != first.files)
            #expect((second.rowsInState ?? 0) > (first.rowsInState ?? 0))
            try s.expectLedger(output)
            #expect(try s.ledger(output).count == s.files.count)
        }

        @Test(
            "an absorbed object put again with other bytes (the same size) or deleted rebuilds the state naming it; put again with the same bytes, it does not"
        )
        func absorbedObjectsChanged() throws {
            let server = try #require(SeaweedServer.current)
            let s = try Objects(server, seed: 67)
            try #require(s.files.count > 3)
            try s.put(s.files)
            let count = s.files.count
            let output = Paths.temporary()
            let first = try s.compare(output: output)
            IncrementalRunTests.expect(first, "created", read: count, fromState: 0)
            try s.expectLedger(output)

            // The same rows, the gzip header's modification time changed: the same size, another
            // ETag.
            let changed = s.files[count / 2]
            let before = try #require(try s.listed()[s.uri(changed)])
            var bytes = try Data(contentsOf: URL(fileURLWithPath: s.world.folder + "/" + changed))
            try #require(bytes.count > 10 && bytes[0] == 0x1f && bytes[1] == 0x8b)
            for i in 4..<8 { bytes[i] = bytes[i] == 0x5a ? 0x5b : 0x5a }
            try s.put(bytes, as: changed)
            let after = try #require(try s.listed()[s.uri(changed)])
            #expect(after.size == before.size)
            #expect(after.etag != before.etag)
            let second = try s.compare(output: output)
            IncrementalRunTests.expect(
                second, "rebuilt", read: count, fromState: 0, reason: [s.uri(changed), "ETag"])
            IncrementalRunTests.expectSame(second.files, first.files)
            try s.expectLedger(output)

            // Put again with the same bytes: the same ETag, the state is used.
            try s.put(bytes, as: changed)
            #expect(try s.listed()[s.uri(changed)]?.etag == after.etag)
            let third = try s.compare(output: output)
            IncrementalRunTests.expect(third, "absorbed", read: 0, fromState: count)

            // Deleted.
            let deleted = s.files[1]
            try server.client().delete(try #require(S3Location(uri: s.uri(deleted))))
            #expect(try s.listed()[s.uri(deleted)] == nil, "\(deleted) deleted")
            let fourth = try s.compare(output: output)
            IncrementalRunTests.expect(
                fourth, "rebuilt", read: count - 1, fromState: 0, reason: [s.uri(deleted), "gone"])
            try s.expectLedger(output)
            let fifth = try s.compare(output: output)
            IncrementalRunTests.expect(fifth, "absorbed", read: 0, fromState: count - 1)
            IncrementalRunTests.expectSame(fifth.files, fourth.files)
        }
    }
}
