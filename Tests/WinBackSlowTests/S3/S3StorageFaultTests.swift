import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport

extension S3StorageTests {
    /// docs/rules.md §11 faults: refused credentials 77, a missing bucket or key 66, throttling
    /// and 5xx retried (at most 5 tries, Retry-After honoured) then 75, a short range 74.
    @Suite("Faults: exit codes, retries, short reads")
    struct S3StorageFaultTests {
        @Test("a wrong secret is 77 naming the bucket: for s3:// inputs, and for an upload after the local publish")
        func wrongSecret() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 41)
            let wrong = server.environment(secretKey: "not-the-secret")
            let output = Paths.temporary()
            let r = try S3Run.run(world.pipeline(fromS3: Set(S3World.Input.allCases)), output: output, wrong)
            #expect(r.status == 77, "\(r.stderr)")
            #expect(r.stderr.contains("s3://inputs/"), "\(r.stderr)")
            S3Run.expectNothingPublished(output)

            let uploading = Paths.temporary()
            let u = try S3Run.run(
                world.pipeline(fromS3: [], upload: "s3://audiences/refused"), output: uploading, wrong)
            #expect(u.status == 77, "\(u.stderr)")
            #expect(u.stderr.contains("s3://audiences/refused/"), "\(u.stderr)")
            let published = URL(fileURLWithPath: uploading + "/generated/latest").resolvingSymlinksInPath().path
            #expect(FileManager.default.fileExists(atPath: published + "/manifest.json"), "the local publish stays")
            #expect(try Boto.objects(server, bucket: "audiences", prefix: "refused/").isEmpty)
        }

        @Test("a missing bucket is 66 (input or upload target); a missing key or a glob matching nothing, 66")
        func missingBucketOrKey() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 43)
            let env = server.environment()
            let missingBucket = "s3://no-such-bucket-winback/\(world.prefix)transactions-*.jsonl.gz"
            let output = Paths.temporary()
            let r = try S3Run.run(
                world.pipeline(fromS3: [], transactions: missingBucket), output: output, env)
            #expect(r.status == 66, "\(r.stderr)")
            #expect(r.stderr.contains("no-such-bucket-winback"), "\(r.stderr)")
            S3Run.expectNothingPublished(output)

            let noMatch = world.uri("transactions-1999-*.jsonl.gz")
            let g = try S3Run.run(world.pipeline(fromS3: [], transactions: noMatch), output: Paths.temporary(), env)
            #expect(g.status == 66, "\(g.stderr)")
            #expect(g.stderr.contains("transactions-1999-*"), "\(g.stderr)")

            let noKey = world.uri("transactions-1999-01.jsonl.gz")
            let k = try S3Run.run(world.pipeline(fromS3: [], transactions: noKey), output: Paths.temporary(), env)
            #expect(k.status == 66, "\(k.stderr)")

            // A catalog that is not there: a HEAD answered 404.
            let pipeline = try world.pipeline(fromS3: [])
            let text = try String(contentsOfFile: pipeline, encoding: .utf8)
            try text.replacingOccurrences(
                of: "offers: \(world.folder)/offers.json", with: "offers: \(world.uri("no-such-offers.json"))"
            ).write(toFile: pipeline, atomically: true, encoding: .utf8)
            let c = try S3Run.run(pipeline, output: Paths.temporary(), env)
            #expect(c.status == 66, "\(c.stderr)")

            let uploading = Paths.temporary()
            let u = try S3Run.run(
                world.pipeline(fromS3: [], upload: "s3://no-such-bucket-winback/nightly"), output: uploading, env)
            #expect(u.status == 66, "\(u.stderr)")
            #expect(u.stderr.contains("no-such-bucket-winback"), "\(u.stderr)")
            let published = URL(fileURLWithPath: uploading + "/generated/latest").resolvingSymlinksInPath().path
            #expect(FileManager.default.fileExists(atPath: published + "/manifest.json"), "the local publish stays")
        }

        @Test("503 for the first 3 requests: retried, exit 0 and the files of a run without faults")
        func throttledThenServed() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 200, seed: 47)
            let pipeline = try world.pipeline(fromS3: Set(S3World.Input.allCases))
            let clean = try S3Run.run(pipeline, output: Paths.temporary(), server.environment())
            try #require(clean.status == 0, "\(clean.stderr)")
            let proxy = try LoopbackDouble.proxy(server, ["--fail-first", "3"])
            defer { proxy.stop() }
            let r = try S3Run.run(pipeline, output: Paths.temporary(), server.environment(endpoint: proxy.url))
            #expect(r.status == 0, "\(r.stderr)")
            S3Run.expectSame(publishedFiles(S3Run.folder(r)), publishedFiles(S3Run.folder(clean)), "after 503s")
            let requests = proxy.requests()
            #expect(requests.prefix(3).allSatisfy { $0["status"] as? Int == 503 })
            #expect(requests.dropFirst(3).allSatisfy { $0["status"] as? Int == 200 || $0["status"] as? Int == 206 })
            // The first request was the one tried again: the same request four times.
            let first = requests.prefix(4).map { "\($0["method"] ?? "") \($0["path"] ?? "")" }
            #expect(Set(first).count == 1, "\(first)")
        }

        @Test("503 on every request: exactly 5 tries, then 75 and nothing published")
        func alwaysThrottled() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 53)
            let proxy = try LoopbackDouble.proxy(server, ["--fail-always"])
            defer { proxy.stop() }
            let output = Paths.temporary()
            let started = Date()
            // The transactions in S3: the first request is their listing.
            let r = try S3Run.run(
                world.pipeline(fromS3: [.transactions]), output: output, server.environment(endpoint: proxy.url))
            #expect(r.status == 75, "\(r.stderr)")
            #expect(r.stderr.contains("SlowDown"), "\(r.stderr)")
            #expect(r.stderr.contains(world.prefix), "\(r.stderr)")
            #expect(Date().timeIntervalSince(started) < 30)
            let requests = proxy.requests()
            #expect(requests.count == 5, "\(requests.map { $0["path"] ?? "" })")
            #expect(Set(requests.map { "\($0["method"] ?? "") \($0["path"] ?? "")" }).count == 1)
            S3Run.expectNothingPublished(output)
        }

        @Test("a 503 with Retry-After: 2 is tried again no sooner than 2 s later")
        func retryAfterHonoured() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 59)
            let proxy = try LoopbackDouble.proxy(server, ["--fail-first", "1", "--retry-after", "2"])
            defer { proxy.stop() }
            let r = try S3Run.run(
                world.pipeline(fromS3: Set(S3World.Input.allCases)), output: Paths.temporary(),
                server.environment(endpoint: proxy.url))
            #expect(r.status == 0, "\(r.stderr)")
            let events = proxy.entries()
            let firstEnd = try #require(events.first { $0["id"] as? Int == 1 && $0["event"] as? String == "end" })
            let secondStart = try #require(
                events.first { $0["id"] as? Int == 2 && $0["event"] as? String == "start" })
            let waited = (secondStart["time"] as? Double ?? 0) - (firstEnd["time"] as? Double ?? 0)
            #expect(waited >= 1.95, "waited \(waited) s")
        }

        @Test(
            "every range of the transaction objects comes back short (a matching Content-Length): 74, nothing published"
        )
        func shortRange() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 200, seed: 61)
            let proxy = try LoopbackDouble.proxy(server, ["--short-gets", "-1", "--short-mode", "truncate"])
            defer { proxy.stop() }
            let output = Paths.temporary()
            let r = try S3Run.run(
                world.pipeline(fromS3: [.transactions]), output: output, server.environment(endpoint: proxy.url))
            #expect(r.status == 74, "\(r.stderr)")
            #expect(r.stderr.contains("s3://inputs/\(world.prefix)transactions-"), "\(r.stderr)")
            #expect(proxy.requests().contains { $0["status"] as? String == "truncated" })
            S3Run.expectNothingPublished(output)
        }

        @Test("one range whose connection drops mid-body is read again: exit 0 and the files of a run without faults")
        func droppedRangeRetried() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 200, seed: 67)
            let pipeline = try world.pipeline(fromS3: [.transactions])
            let clean = try S3Run.run(pipeline, output: Paths.temporary(), server.environment())
            try #require(clean.status == 0, "\(clean.stderr)")
            let proxy = try LoopbackDouble.proxy(server, ["--short-gets", "1", "--short-mode", "drop"])
            defer { proxy.stop() }
            let r = try S3Run.run(pipeline, output: Paths.temporary(), server.environment(endpoint: proxy.url))
            #expect(r.status == 0, "\(r.stderr)")
            S3Run.expectSame(publishedFiles(S3Run.folder(r)), publishedFiles(S3Run.folder(clean)), "after a drop")
            let requests = proxy.requests()
            let dropped = try #require(requests.first { $0["status"] as? String == "dropped" })
            #expect(
                requests.filter { $0["path"] as? String == dropped["path"] as? String && $0["status"] as? Int == 206 }
                    .count >= 1, "the dropped range was asked again")
            let inputs = try S3Run.manifest(S3Run.folder(r))["inputs"] as? [[String: Any]] ?? []
            let cleanInputs = try S3Run.manifest(S3Run.folder(clean))["inputs"] as? [[String: Any]] ?? []
            #expect(inputs.map { $0["sha256"] as? String } == cleanInputs.map { $0["sha256"] as? String })
        }

        @Test("an object replaced between its listing and its read is 74: each range asks for the listed ETag")
        func objectChangedAfterListing() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 200, seed: 103)
            let go = Paths.temporary() + "/go"
            // The proxy holds every request after the listing until `go` exists.
            let proxy = try LoopbackDouble.proxy(server, ["--pause-after-list", go])
            defer { proxy.stop() }
            let output = Paths.temporary()
            let run = try CLI.start(
                ["run", world.pipeline(fromS3: [.transactions]), "--output", output, "--threads", "2"],
                environment: server.environment(endpoint: proxy.url))
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline
                && !proxy.requests().contains(where: { ($0["path"] as? String ?? "").contains("list-type=2") })
            {
                usleep(20_000)
            }
            // Another month's bytes under this month's key: another ETag, another size.
            let changed = "transactions-2026-11.jsonl.gz"
            try Boto.put(
                server, bucket: S3World.bucket,
                files: [(world.folder + "/transactions-2026-10.jsonl.gz", world.prefix + changed)])
            _ = FileManager.default.createFile(atPath: go, contents: nil)
            let err = String(decoding: run.err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            _ = run.out.fileHandleForReading.readDataToEndOfFile()
            run.process.waitUntilExit()
            #expect(run.process.terminationStatus == 74, "\(err)")
            #expect(err.contains(world.prefix + changed), "\(err)")
            S3Run.expectNothingPublished(output)
            #expect(
                proxy.requests().contains {
                    $0["status"] as? Int == 412 && ($0["path"] as? String ?? "").contains(changed)
                }, "SeaweedFS refused the read: If-Match")
        }

        @Test("400 RequestTimeout for the first 2 requests is tried again: exit 0")
        func requestTimeoutRetried() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 113)
            let proxy = try LoopbackDouble.proxy(
                server, ["--fail-first", "2", "--fail-status", "400", "--fail-code", "RequestTimeout"])
            defer { proxy.stop() }
            let r = try S3Run.run(
                world.pipeline(fromS3: [.transactions]), output: Paths.temporary(),
                server.environment(endpoint: proxy.url))
            #expect(r.status == 0, "\(r.stderr)")
            #expect(proxy.requests().prefix(2).allSatisfy { $0["status"] as? Int == 400 })
        }

        @Test("every range's connection drops mid-body: the run fails (74 or 75) and publishes nothing")
        func droppedRangesAlways() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 71)
            let proxy = try LoopbackDouble.proxy(server, ["--short-gets", "-1", "--short-mode", "drop"])
            defer { proxy.stop() }
            let output = Paths.temporary()
            // Three objects (each is tried five times before the run gives up).
            let r = try S3Run.run(
                world.pipeline(fromS3: [], transactions: world.uri("transactions-2026-1*.jsonl.gz")), output: output,
                server.environment(endpoint: proxy.url))
            #expect(r.status == 74 || r.status == 75, "\(r.status): \(r.stderr)")
            S3Run.expectNothingPublished(output)
        }
    }
}
