import Foundation
import Testing
import WinBack
import WinBackS3
import WinBackSupport
import WinBackTestSupport
import WinBackTesting

extension S3StorageTests {
    /// Listing across pages and multipart uploads, against the server.
    @Suite("Listings of many pages, multipart uploads")
    struct S3StorageClientTests {
        @Test("a glob over 1,500 objects (pages of 1,000 keys): all 1,500 read, in the manifest, the disk run's files")
        func globOverManyPages() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 200, seed: 73)
            let prefix = "many-" + String(UUID().uuidString.prefix(8)).lowercased() + "/"
            // The world's transaction lines dealt over 1,500 gzip objects, a few lines each.
            let split = try #require(
                try Boto.call(
                    server.endpoint,
                    [
                        "op": "split_lines", "bucket": S3World.bucket, "prefix": prefix, "name": "part-%04d.jsonl.gz",
                        "count": 1_500, "sources": world.transactionFiles.map { world.folder + "/" + $0 },
                    ]) as? [String: Any])
            let objects = try #require(split["objects"] as? [[String: Any]])
            #expect(objects.count == 1_500)
            #expect(split["lines"] as? Int ?? 0 > 1_500)
            // Under the listed prefix but not matched: `*` stops at "/". Read, it would fail the run.
            try Boto.call(
                server.endpoint,
                [
                    "op": "put_text", "bucket": S3World.bucket, "key": prefix + "part-zz/part-0000.jsonl.gz",
                    "text": "x\n",
                ])

            let disk = try S3Run.run(world.pipeline(fromS3: []), output: Paths.temporary(), server.environment())
            try #require(disk.status == 0, "\(disk.stderr)")
            let proxy = try LoopbackDouble.proxy(server)
            defer { proxy.stop() }
            let pattern = "s3://\(S3World.bucket)/\(prefix)part-*.jsonl.gz"
            let r = try S3Run.run(
                world.pipeline(fromS3: [], transactions: pattern), output: Paths.temporary(),
                server.environment(endpoint: proxy.url))
            try #require(r.status == 0, "\(r.stderr)")
            S3Run.expectSame(publishedFiles(S3Run.folder(r)), publishedFiles(S3Run.folder(disk)), "1,500 objects")

            let inputs = try #require(try S3Run.manifest(S3Run.folder(r))["inputs"] as? [[String: Any]])
            #expect(inputs.count == 1_500)
            let expected = objects.sorted { ($0["key"] as? String ?? "") < ($1["key"] as? String ?? "") }
            #expect(
                inputs.compactMap { $0["path"] as? String }
                    == expected.compactMap { ($0["key"] as? String).map { "s3://\(S3World.bucket)/" + $0 } })
            for (input, object) in zip(inputs, expected) {
                #expect(input["bytes"] as? Int == object["size"] as? Int, "\(object["key"] ?? "")")
                #expect(input["sha256"] as? String == object["sha256"] as? String, "\(object["key"] ?? "")")
            }
            // The listing went over more than one page.
            let listings = proxy.requests().filter { ($0["path"] as? String ?? "").contains("list-type=2") }
            #expect(listings.count >= 2)
            #expect(listings.contains { ($0["path"] as? String ?? "").contains("continuation-token=") })
        }

        @Test("putMultipart of a 12 MiB file in 5 MiB parts, each with its SHA-256, reads back byte-identical")
        func multipartRoundTrip() throws {
            let server = try #require(SeaweedServer.current)
            let proxy = try LoopbackDouble.proxy(server)
            defer { proxy.stop() }
            let file = Paths.temporary() + "/big.bin"
            var generator = SplitMix64(seed: 0x5EED)
            var words = [UInt64](repeating: 0, count: (12 << 20) / 8)
            for i in words.indices { words[i] = generator.next() }
            let data = words.withUnsafeBytes { Data($0) }
            try data.write(to: URL(fileURLWithPath: file))
            let prefix = "mp-" + String(UUID().uuidString.prefix(8)).lowercased() + "/"
            let location = S3Location(bucket: S3World.bucket, key: prefix + "big.bin")
            let client = try server.client(endpoint: proxy.url)
            try client.putMultipart(location, file: file, size: data.count, partSize: 5 << 20)

            let downloaded = Paths.temporary()
            let objects = try Boto.objects(server, bucket: S3World.bucket, prefix: prefix, into: downloaded)
            #expect(objects.count == 1)
            #expect(objects.first?["size"] as? Int == data.count)
            #expect(objects.first?["sha256"] as? String == Helper.sha256(data))
            #expect(FileManager.default.contents(atPath: downloaded + "/big.bin") == data)
            #expect(try client.head(location).size == data.count)
            let across = try client.read(location, from: (5 << 20) - 100, count: 200)
            #expect(across == data.subdata(in: ((5 << 20) - 100)..<((5 << 20) + 100)))

            // One upload started, three parts (5, 5 and 2 MiB) each with its SHA-256, one completion.
            let requests = proxy.requests()
            let parts = requests.filter {
                $0["method"] as? String == "PUT" && ($0["path"] as? String ?? "").contains("partNumber=")
            }
            #expect(parts.count == 3)
            for (k, part) in parts.enumerated() {
                let from = k * (5 << 20)
                let chunk = data.subdata(in: from..<min(data.count, from + (5 << 20)))
                #expect(part["checksum"] as? String == Helper.sha256Base64(chunk), "part \(k + 1)")
            }
            #expect(requests.filter { ($0["path"] as? String ?? "").hasSuffix("?uploads=") }.count == 1)
            #expect(
                requests.filter {
                    $0["method"] as? String == "POST" && ($0["path"] as? String ?? "").contains("uploadId=")
                }.count == 1)
        }
    }
}

extension S3StorageTests.S3StorageClientTests {
    @Test("CompleteMultipartUpload answered 200 with an error: tried again and finished; every time, 75")
    func multipartCompletionError() throws {
        let server = try #require(SeaweedServer.current)
        let file = Paths.temporary() + "/parts.bin"
        var generator = SplitMix64(seed: 0xC0FFEE)
        var words = [UInt64](repeating: 0, count: (6 << 20) / 8)
        for i in words.indices { words[i] = generator.next() }
        let data = words.withUnsafeBytes { Data($0) }
        try data.write(to: URL(fileURLWithPath: file))
        let prefix = "mp-" + String(UUID().uuidString.prefix(8)).lowercased() + "/"

        let once = try LoopbackDouble.proxy(server, ["--complete-error", "1"])
        defer { once.stop() }
        let client = try server.client(endpoint: once.url)
        client.backoff = 0.05
        try client.putMultipart(
            S3Location(bucket: S3World.bucket, key: prefix + "once.bin"), file: file, size: data.count,
            partSize: 5 << 20)
        let completions = once.requests().filter {
            $0["method"] as? String == "POST" && ($0["path"] as? String ?? "").contains("uploadId=")
        }
        #expect(completions.map { "\($0["status"] ?? "")" } == ["complete-error", "200"])
        let stored = try Boto.objects(server, bucket: S3World.bucket, prefix: prefix + "once.bin")
        #expect(stored.first?["sha256"] as? String == Helper.sha256(data))

        let always = try LoopbackDouble.proxy(server, ["--complete-error", "-1"])
        defer { always.stop() }
        let failing = try server.client(endpoint: always.url)
        failing.backoff = 0.05
        do {
            try failing.putMultipart(
                S3Location(bucket: S3World.bucket, key: prefix + "never.bin"), file: file, size: data.count,
                partSize: 5 << 20)
            Issue.record("an upload that never finished was taken as done")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 75, "\(e)")
        }
        #expect(try Boto.objects(server, bucket: S3World.bucket, prefix: prefix + "never.bin").isEmpty)
        #expect(always.requests().contains { $0["method"] as? String == "DELETE" }, "the upload was aborted")
    }
}
