import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport
@testable import WinBackTesting

#if canImport(Glibc)
    import Glibc
#endif

/// docs/rules.md §6.2, the network is bounded: each misbehaving endpoint of
/// Tests/Reference/s3_hostile.py ends a run promptly with its documented exit code, leaves the
/// previous publish as it was, sends no credential to another host, and holds memory down.
@Suite("S3: hostile endpoints", .serialized)
struct S3HostileTests {
    static let date = "2026-11-22"

    /// A generated world whose transactions an endpoint serves as `s3://inputs/w/…`.
    struct World {
        let folder: String

        init(seed: UInt64 = 7) throws {
            folder = Paths.temporary() + "/world"
            var o = GenerateOptions(customers: 60, seed: seed, asOf: ms("2026-11-22"))
            o.threads = 2
            _ = try WorldGenerator.generate(o, to: folder)
        }

        /// A pipeline file in the world's folder: transactions from `transactions` (local when
        /// nil), `networkSeconds` and `upload` when given.
        func pipeline(transactions: String? = nil, networkSeconds: Int? = nil, upload: String? = nil) throws -> String {
            var text = try String(contentsOfFile: folder + "/pipeline.yaml", encoding: .utf8)
            if let transactions {
                text = text.replacingOccurrences(of: "[\"transactions-*.jsonl.gz\"]", with: "[\"\(transactions)\"]")
            }
            if let upload {
                text = text.replacingOccurrences(
                    of: "  directory: out\n", with: "  directory: out\n  upload: \(upload)\n")
            }
            if let networkSeconds { text += "limits:\n  networkSeconds: \(networkSeconds)\n" }
            let path = folder + "/hostile-\(UUID().uuidString.prefix(8)).yaml"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
    }

    /// The environment of a run against `endpoint`, with a session token to watch for.
    static func environment(_ endpoint: String) -> [String: String] {
        let nowhere = Paths.temporary() + "/no-such-aws-file"
        return [
            "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ENDPOINT_URL": endpoint,
            "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:9/",
            "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "", "AWS_ACCESS_KEY_ID": "HOSTILETESTKEY",
            "AWS_SECRET_ACCESS_KEY": "hostile-test-secret", "AWS_SESSION_TOKEN": "hostile-session-token",
            "AWS_PROFILE": "", "AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere,
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
            "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9", "http_proxy": "", "https_proxy": "",
            "HTTP_PROXY": "", "HTTPS_PROXY": "", "all_proxy": "", "ALL_PROXY": "", "no_proxy": "127.0.0.1,localhost",
            "NO_PROXY": "127.0.0.1,localhost",
        ]
    }

    /// s3_hostile.py in `mode`, serving `folder` under `w/`.
    static func endpoint(_ mode: String, _ folder: String, redirectPortFile: String? = nil) throws -> LoopbackDouble {
        try LoopbackDouble.start(
            "s3_hostile.py",
            ["--dir", folder, "--prefix", "w/", "--mode", mode]
                + (redirectPortFile.map { ["--redirect-port-file", $0] } ?? []))
    }

    /// `winback run`, with the wall time it took and its peak resident memory (kB, of the
    /// process and its children, as getrusage(2) counts them for its parent).
    static func run(_ pipeline: String, output: String, _ env: [String: String]) throws -> (
        CLI.Result, seconds: Double, peakKB: Int
    ) {
        let rss = Paths.temporary() + "/rss"
        let script = """
            import resource, subprocess, sys
            p = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL)
            open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
            sys.exit(p.returncode)
            """
        let started = Date()
        let o = try Helper.run(
            "/usr/bin/env",
            ["python3", "-c", script, rss, CLI.binary, "run", pipeline, "--output", output, "--threads", "2"],
            environment: env)
        let r = CLI.Result(status: o.status, stdout: String(decoding: o.stdout, as: UTF8.self), stderr: o.stderr)
        let peak = (try? String(contentsOfFile: rss, encoding: .utf8)).flatMap { Int($0) } ?? Int.max
        return (r, Date().timeIntervalSince(started), peak)
    }

    /// What `<output>/generated` publishes: the target of `latest` and its files.
    static func published(_ output: String) -> (String?, [String: Data]) {
        let root = output + "/generated"
        let target = try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/latest")
        var files: [String: Data] = [:]
        if target != nil {
            let folder = URL(fileURLWithPath: root + "/latest").resolvingSymlinksInPath().path
            for f in (try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? [] {
                files[f] = FileManager.default.contents(atPath: folder + "/" + f)
            }
        }
        return (target, files)
    }

    /// A first run from local files, published into `output`; its publication.
    static func publishFirst(_ world: World, output: String) throws -> (String?, [String: Data]) {
        let r = try CLI.run(["run", try world.pipeline(), "--output", output, "--threads", "2"])
        try #require(r.status == 0, "\(r.stderr)")
        let before = published(output)
        try #require(before.0 != nil && before.1.count > 5)
        return before
    }

    static func expectIntact(
        _ output: String, _ before: (String?, [String: Data]), sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let after = published(output)
        #expect(after.0 == before.0, "latest still points at the previous run", sourceLocation: sourceLocation)
        #expect(after.1 == before.1, "the previous run's files are as they were", sourceLocation: sourceLocation)
    }

    @Test("a listing whose continuation token repeats is 65 naming the bucket and prefix, at once")
    func repeatedToken() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("repeat-token", world.folder)
        defer { server.stop() }
        let (r, seconds, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("s3://inputs/w/transactions-"), "\(r.stderr)")
        #expect(r.stderr.contains("continuation token repeats"), "\(r.stderr)")
        #expect(seconds < 30)
        let listings = server.entries().filter { ($0["path"] as? String)?.contains("list-type=2") == true }
        #expect(listings.count == 2, "the second page's token is the first's: two pages asked, no more")
        Self.expectIntact(output, before)
    }

    @Test("a listing that gives an object a negative size is 65 naming the listing, at once")
    func negativeSize() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("negative-size", world.folder)
        defer { server.stop() }
        let (r, seconds, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("s3://inputs/w/transactions-") && r.stderr.contains("size '-"), "\(r.stderr)")
        #expect(seconds < 30)
        #expect(server.entries().count == 1, "one listing asked, nothing read")
        Self.expectIntact(output, before)
    }

    @Test("an answer whose head goes on past 64 KiB is refused as it comes, once: 65 for a listing")
    func hugeHead() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("huge-head", world.folder)
        defer { server.stop() }
        let (r, seconds, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("head went on past 65536 bytes"), "\(r.stderr)")
        #expect(seconds < 30)
        #expect(server.entries().count == 1, "refused, not tried again")
        Self.expectIntact(output, before)
    }

    @Test("a session token holding a line break is 78 before any request, never sent nor retried")
    func tokenWithLineBreak() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("serve", world.folder)
        defer { server.stop() }
        var env = Self.environment(server.url)
        env["AWS_SESSION_TOKEN"] = "hostile-session-token\r\nX-Smuggled: 1"
        let (r, seconds, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output, env)
        #expect(r.status == 78, "\(r.stderr)")
        #expect(r.stderr.contains("line break"), "\(r.stderr)")
        #expect(seconds < 10, "no retries with their pauses")
        #expect(server.entries().isEmpty)
        Self.expectIntact(output, before)
    }

    @Test("a drip of one byte every 20 s ends as 75 when the run's network time (20 s) is spent")
    func dripEndsOnTheBudget() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("drip", world.folder)
        defer { server.stop() }
        let (r, seconds, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz", networkSeconds: 20),
            output: output, Self.environment(server.url))
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("network time ran out"), "\(r.stderr)")
        #expect(r.stderr.contains("no byte came for 15 s"), "the first try ended on the idle limit: \(r.stderr)")
        #expect(seconds < 45, "ended promptly after the 20 s budget, not hours later (\(seconds) s)")
        Self.expectIntact(output, before)
    }

    @Test("one try against a drip ends on the idle limit (15 s), as a transport failure: 75")
    func dripOneTry() throws {
        let world = try World()
        let server = try Self.endpoint("drip", world.folder)
        defer { server.stop() }
        let client = try S3Client(environment: Self.environment(server.url))
        client.tries = 1
        let started = Date()
        #expect {
            _ = try client.list(bucket: "inputs", prefix: "w/")
        } throws: { e in
            (e as? WinBackError)?.code == .temporary && "\(e)".contains("no byte came for 15 s")
        }
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test("an upload that drips is 75 once the network time is spent, and the local publish stays")
    func dripUpload() throws {
        let world = try World()
        let output = Paths.temporary()
        let server = try Self.endpoint("drip", world.folder)
        defer { server.stop() }
        let (r, seconds, _) = try Self.run(
            try world.pipeline(networkSeconds: 20, upload: "s3://audiences/nightly"), output: output,
            Self.environment(server.url))
        #expect(r.status == 75, "\(r.stderr)")
        #expect(seconds < 60, "\(seconds) s")
        let (target, files) = Self.published(output)
        #expect(target == Self.date, "the local publish is in place")
        #expect(files["manifest.json"] != nil)
    }

    @Test("a hung run holds the lock from before its first request: a second run is 75 (locked), not a race")
    func lockBeforeNetwork() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("drip", world.folder)
        defer { server.stop() }
        let pipeline = try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz", networkSeconds: 20)
        let first = try CLI.start(
            ["run", pipeline, "--output", output, "--threads", "2"], environment: Self.environment(server.url))
        let asked = Date().addingTimeInterval(15)
        while server.entries().isEmpty && Date() < asked { usleep(50_000) }
        try #require(!server.entries().isEmpty, "the first run asked the endpoint")
        let second = try CLI.run(
            ["run", pipeline, "--output", output, "--threads", "2"], environment: Self.environment(server.url))
        #expect(second.status == 75, "\(second.stderr)")
        #expect(second.stderr.contains("holds the lock"), "\(second.stderr)")
        _ = first.err.fileHandleForReading.readDataToEndOfFile()
        first.process.waitUntilExit()
        #expect(first.process.terminationStatus == 75)
        Self.expectIntact(output, before)
    }

    @Test(
        "a 2 GiB answer to a 2 MiB range, announced or endless, is 74 as it streams; peak memory under 256 MB",
        arguments: ["huge-range", "endless-range"])
    func hugeRange(mode: String) throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint(mode, world.folder)
        defer { server.stop() }
        let (r, seconds, peak) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 74, "\(r.stderr)")
        #expect(r.stderr.contains("refused as it came"), "\(r.stderr)")
        #expect(r.stderr.contains("s3://inputs/w/transactions-"), "\(r.stderr)")
        #expect(peak < 256 * 1024, "peak RSS \(peak) kB")
        #expect(seconds < 60)
        Self.expectIntact(output, before)
    }

    @Test("an endless listing page is 65 past 16 MiB as it streams; peak memory under 256 MB")
    func hugeListing() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let server = try Self.endpoint("huge-list", world.folder)
        defer { server.stop() }
        let (r, seconds, peak) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("s3://inputs/w/transactions-"), "\(r.stderr)")
        #expect(peak < 256 * 1024, "peak RSS \(peak) kB")
        #expect(seconds < 60)
        Self.expectIntact(output, before)
    }

    /// The first transactions file of `world`, and its size.
    static func firstObject(_ world: World) throws -> (key: String, size: Int) {
        let names = try FileManager.default.contentsOfDirectory(atPath: world.folder).sorted()
        let name = try #require(names.first { $0.hasPrefix("transactions-") && $0.hasSuffix(".jsonl.gz") })
        let size = try #require(
            try FileManager.default.attributesOfItem(atPath: world.folder + "/" + name)[.size] as? Int)
        return ("w/" + name, size)
    }

    static func request(_ server: LoopbackDouble, _ key: String, method: String = "GET", range: Range<Int>? = nil)
        -> HTTP.Request
    {
        var r = HTTP.Request(url: URL(string: server.url + "/inputs/" + key)!, method: method)
        if let range { r.setHeader("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)") }
        return r
    }

    @Test("the HTTP layer refuses an announced 2 GiB answer at its head, and the pooled handle serves the next")
    func httpRefusesAnnounced() throws {
        let world = try World()
        let (key, size) = try Self.firstObject(world)
        let server = try Self.endpoint("huge-range", world.folder)
        defer { server.stop() }
        let started = Date()
        #expect {
            _ = try HTTP.send(Self.request(server, key, range: 0..<1024), limit: 1024)
        } throws: { e in
            (e as? HTTP.Oversized)?.limit == 1024 && (e as? HTTP.Oversized)?.announced == 2 << 30
        }
        #expect(Date().timeIntervalSince(started) < 10, "refused at once, not after 2 GiB")
        // A HEAD announces the object's length, not a body's: no limit applies to it.
        let head = try HTTP.send(Self.request(server, key, method: "HEAD"), limit: 1)
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(head.headers["content-length"] == String(size))
        // Without a range the object is served whole: exactly at the limit is taken.
        let whole = try HTTP.send(Self.request(server, key), limit: size)
        let stored = FileManager.default.contents(atPath: world.folder + "/" + key.dropFirst(2))
        #expect(whole.status == 200 && whole.body == stored)
        #expect {
            _ = try HTTP.send(Self.request(server, key), limit: size - 1)
        } throws: { e in
            (e as? HTTP.Oversized)?.announced == size
        }
    }

    @Test("the HTTP layer refuses an endless answer the moment it passes its limit, promptly")
    func httpRefusesEndless() throws {
        let world = try World()
        let (key, _) = try Self.firstObject(world)
        let server = try Self.endpoint("endless-range", world.folder)
        defer { server.stop() }
        let started = Date()
        #expect {
            _ = try HTTP.send(Self.request(server, key, range: 0..<(2 << 20)), limit: 2 << 20)
        } throws: { e in
            (e as? HTTP.Oversized).map { $0.limit == 2 << 20 && $0.announced == nil } ?? false
        }
        #expect(Date().timeIntervalSince(started) < 10, "refused at 2 MiB, not read on")
        // Then the same thread's next request, on the pooled handle, is answered in full.
        let listing = try HTTP.send(
            HTTP.Request(url: URL(string: server.url + "/inputs?list-type=2&prefix=w%2F")!), limit: 1 << 20)
        #expect(listing.status == 200 && String(decoding: listing.body, as: UTF8.self).contains("<Key>w/"))
    }

    @Test("a redirect to another port is 74 naming where it pointed; that host gets no credential")
    func redirectRefused() throws {
        let world = try World()
        let output = Paths.temporary()
        let before = try Self.publishFirst(world, output: output)
        let portFile = Paths.temporary() + "/redirect-port"
        let server = try Self.endpoint("redirect", world.folder, redirectPortFile: portFile)
        defer { server.stop() }
        let target = try #require((try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) })
        let (r, seconds, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 74, "\(r.stderr)")
        #expect(r.stderr.contains("127.0.0.1:\(target)"), "the message names where it pointed: \(r.stderr)")
        #expect(seconds < 30)
        let atTarget = server.entries().filter { ($0["port"] as? Int) == target }
        #expect(atTarget.isEmpty, "the redirect was not followed: \(atTarget)")
        for e in atTarget {
            #expect(e["authorization"] is NSNull && e["token"] is NSNull, "no credential went there: \(e)")
        }
        let signed = server.entries().filter { ($0["port"] as? Int) == server.port }
        #expect(!signed.isEmpty && signed.allSatisfy { $0["token"] as? String == "hostile-session-token" })
        Self.expectIntact(output, before)
    }

    @Test("S3's own region redirect is signed anew for that region's endpoint (AWS only)")
    func regionRedirect() throws {
        let world = try World()
        let server = try Self.endpoint("region", world.folder)
        defer { server.stop() }
        var env = Self.environment("")
        env["AWS_ENDPOINT_URL_S3"] = ""
        env["AWS_ENDPOINT_URL"] = ""
        let client = try S3Client(environment: env)
        #expect(client.endpoint == nil)
        let port = server.port
        client.awsAddress = { bucket, region in ("http", "127.0.0.1:\(port)", "/\(region)/\(bucket)") }
        let found = try client.list(bucket: "inputs", prefix: "w/transactions-")
        #expect(!found.isEmpty)
        let paths = server.entries().compactMap { $0["path"] as? String }
        #expect(paths.first?.hasPrefix("/us-east-1/inputs") == true, "\(paths)")
        #expect(paths.dropFirst().allSatisfy { $0.hasPrefix("/eu-west-1/inputs") }, "\(paths)")
        // Later requests for the bucket go to its region straight away.
        let o = try client.read(found[0].location, from: 0, count: 10, etag: found[0].etag, size: found[0].size)
        #expect(o.count == 10)
        #expect(server.entries().last?["path"] as? String != nil)
        #expect((server.entries().last?["path"] as? String)?.hasPrefix("/eu-west-1/") == true)

        // The same answer from a custom endpoint is refused (74), naming where it pointed.
        let custom = try S3Client(environment: Self.environment(server.url + "/us-east-1"))
        #expect {
            _ = try custom.list(bucket: "inputs", prefix: "w/")
        } throws: { e in
            (e as? WinBackError)?.code == .ioError && "\(e)".contains("redirect to")
        }
    }

    @Test("a listing keeps only the objects its filter accepts, as the pages come")
    func listingFiltered() throws {
        let world = try World()
        let server = try Self.endpoint("serve", world.folder)
        defer { server.stop() }
        let client = try S3Client(environment: Self.environment(server.url))
        let all = try client.list(bucket: "inputs", prefix: "w/")
        let kept = try client.list(bucket: "inputs", prefix: "w/") { $0.hasSuffix("-2026-11.jsonl.gz") }
        #expect(all.count > 3)
        #expect(kept.map(\.location.key) == ["w/transactions-2026-11.jsonl.gz"])
        #expect(try client.list(bucket: "inputs", prefix: "w/") { _ in false }.isEmpty)
    }

    @Test("keys with control bytes are listed URL-encoded and read: exit 0, the inputs named escaped")
    func controlKeys() throws {
        let world = try World()
        let server = try Self.endpoint("odd-keys", world.folder)
        defer { server.stop() }
        let output = Paths.temporary()
        let (r, _, _) = try Self.run(
            try world.pipeline(transactions: "s3://inputs/w/*transactions-*.jsonl.gz"), output: output,
            Self.environment(server.url))
        #expect(r.status == 0, "\(r.stderr)")
        let reads = server.entries().compactMap { $0["path"] as? String }.filter { $0.contains("%01transactions-") }
        #expect(!reads.isEmpty, "the objects were read by their keys, control byte and all")
        let e = WinBackError(.noInput, "no such object", path: "s3://inputs/w/\u{01}transactions-x")
        #expect("\(e)".contains("w/\\x01transactions-x"))
    }
}
