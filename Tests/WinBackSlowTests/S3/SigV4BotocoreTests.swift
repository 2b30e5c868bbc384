import Foundation
import Testing

@testable import WinBackS3

/// AWS Signature Version 4 for S3 against an independent signer: byte-equal Authorization headers
/// with botocore's S3SigV4Auth (Tests/Reference/sigv4_botocore.py) for requests of every shape
/// the S3 client sends. Runs python3; without botocore it skips, saying why, unless
/// `WINBACK_REQUIRE_S3=1` (CI), when it fails.
@Suite("S3: SigV4 signing against botocore", .tags(.slow))
struct SigV4BotocoreTests {
    static let example = AWSCredentials(
        accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")

    /// 2013-05-24T00:00:00Z, the time of AWS's examples.
    static let exampleDate = Date(timeIntervalSince1970: 1_369_353_600)

    static func header(_ headers: [(String, String)], _ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// One request, as both sides take it: Swift signs `host` and the encoded path, the script
    /// builds and encodes the URL from `endpoint`, `bucket` and `key` the way botocore does.
    struct Case: Encodable {
        var name: String
        var method = "GET"
        var endpoint = "http://127.0.0.1:8333"
        var host = "127.0.0.1:8333"
        var bucket: String? = "bucket"
        var key = "key"
        var query: [[String]] = []
        var headers: [[String]] = []
        var body: [UInt8]? = nil
        var unsignedPayload = false
        var credentials = SigV4BotocoreTests.example
        var region = "us-east-1"
        var date = SigV4BotocoreTests.exampleDate

        enum CodingKeys: String, CodingKey {
            case method, endpoint, bucket, key, query, headers, body, region, timestamp
            case unsignedPayload = "unsigned_payload"
            case accessKey = "access_key"
            case secretKey = "secret_key"
            case token
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(method, forKey: .method)
            try c.encode(endpoint, forKey: .endpoint)
            try c.encode(bucket, forKey: .bucket)
            try c.encode(key, forKey: .key)
            try c.encode(query, forKey: .query)
            try c.encode(headers, forKey: .headers)
            try c.encode(body.map { Data($0).base64EncodedString() }, forKey: .body)
            try c.encode(unsignedPayload, forKey: .unsignedPayload)
            try c.encode(credentials.accessKeyId, forKey: .accessKey)
            try c.encode(credentials.secretAccessKey, forKey: .secretKey)
            try c.encode(credentials.sessionToken, forKey: .token)
            try c.encode(region, forKey: .region)
            // Written by Foundation's formatter, not by the signer's own date code.
            try c.encode(ISO8601DateFormatter().string(from: date), forKey: .timestamp)
        }

        var path: String { (bucket.map { "/" + SigV4.encodePath($0) } ?? "") + "/" + SigV4.encodePath(key) }

        func signed() -> [(String, String)] {
            SigV4.sign(
                method: method, host: host, path: path, query: query.map { ($0[0], $0[1]) },
                headers: headers.map { ($0[0], $0[1]) },
                payloadHash: unsignedPayload ? SigV4.unsignedPayload : SigV4.sha256Hex(body ?? []),
                credentials: credentials, region: region, date: date)
        }
    }

    /// The base64 SHA-256 of `bytes`, as x-amz-checksum-sha256 carries it.
    static func checksum(_ bytes: [UInt8]) -> String {
        let hex = Array(SigV4.sha256Hex(bytes).utf8)
        let digest = stride(from: 0, to: hex.count, by: 2).map {
            UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)!
        }
        return Data(digest).base64EncodedString()
    }

    static let body = Array("{\"customer\":\"c-1\",\"offer\":\"winback-50\"}\n".utf8)
    static let session = AWSCredentials(
        accessKeyId: "ASIAXAMPLEXAMPLEXAMP", secretAccessKey: "tEmPoRaRy/sEcReT+kEy=",
        sessionToken: "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJGMEQCIExample+token/with=padding==")

    static let cases: [Case] = [
        Case(name: "GET of an object, path-style", key: "exports/2026/summary.csv"),
        Case(
            name: "GET ListObjectsV2 with a query", key: "",
            query: [
                ["list-type", "2"], ["prefix", "exports/some dir/a  b"], ["delimiter", "/"],
                ["continuation-token", "1Ab+cD/eF==/g=h"], ["max-keys", "1000"],
            ]),
        Case(
            name: "PUT with a body, x-amz-checksum-sha256 and content-type, virtual-hosted", method: "PUT",
            endpoint: "https://bucket.s3.eu-west-1.amazonaws.com", host: "bucket.s3.eu-west-1.amazonaws.com",
            bucket: nil, key: "out/delivery.ndjson",
            headers: [
                ["Content-Type", "application/x-ndjson"],
                ["x-amz-checksum-sha256", checksum(body)],
            ],
            body: body, region: "eu-west-1"),
        Case(
            name: "PUT with UNSIGNED-PAYLOAD", method: "PUT", endpoint: "https://s3.us-west-2.amazonaws.com",
            host: "s3.us-west-2.amazonaws.com", key: "big/part-0001.gz",
            headers: [["content-type", "application/gzip"]], body: body, unsignedPayload: true,
            region: "us-west-2"),
        Case(name: "GET with a session token", key: "a.csv", credentials: session),
        Case(
            name: "PUT with a session token and a body", method: "PUT", key: "b.csv", body: body, credentials: session),
        Case(name: "a key with spaces", key: "folder with spaces/file name.csv"),
        Case(name: "a key with + ~ % =", key: "a+b~c%d=e/%2F+%20"),
        Case(name: "a non-ASCII key (é, 日本)", key: "café/日本/レポート.csv"),
        Case(name: "a key with reserved characters", key: "q?x#y&z*!'();:@,$[]{}|^`\"<>\\"),
        Case(name: "a key that is not normalised: //, . and ..", key: "a//b/./c/../d/"),
        Case(name: "the empty key: the bucket itself", key: ""),
        Case(name: "ListBuckets at /", bucket: nil, key: ""),
        Case(
            name: "virtual-hosted GET", endpoint: "https://bucket.s3.eu-west-1.amazonaws.com",
            host: "bucket.s3.eu-west-1.amazonaws.com", bucket: nil, key: "key", region: "eu-west-1"),
        Case(name: "a port in the host", endpoint: "http://localhost:9000", host: "localhost:9000", key: "k"),
        Case(
            name: "the default port is not in the host", endpoint: "https://s3.example.com:443",
            host: "s3.example.com", key: "k"),
        Case(
            name: "a query with an empty value and a repeated name", method: "POST", key: "upload/x",
            query: [["uploads", ""], ["b", "2"], ["b", "1"], ["B", "0"], ["a b", "c"]]),
        Case(
            name: "headers trimmed, repeated, and user-agent not signed", key: "h",
            headers: [
                ["Range", "  bytes=0-9  "], ["X-Amz-Meta-Note", "two  spaces\tand a tab  "],
                ["x-amz-meta-note", "second value"], ["User-Agent", "winback/1.0"],
                ["If-None-Match", "\"etag\""], ["x-amz-meta-empty", ""],
            ]),
        Case(
            name: "a signing time with a fraction of a second", key: "t",
            date: Date(timeIntervalSince1970: 1_709_251_199.75)),
        Case(name: "a lowercase method", method: "delete", key: "gone"),
    ]

    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Reference/sigv4_botocore.py").path

    /// Runs `python3` from PATH with `arguments`, `input` on stdin; its exit status and stdout.
    static func python(_ arguments: [String], input: Data = Data()) throws -> (Int32, Data) {
        let inputFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("sigv4-\(UUID().uuidString).json")
        try input.write(to: inputFile)
        defer { try? FileManager.default.removeItem(at: inputFile) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3"] + arguments
        p.standardInput = try FileHandle(forReadingFrom: inputFile)
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, data)
    }

    static let botocoreAvailable = (try? python(["-c", "import botocore"]).0) == 0

    struct Reference: Decodable {
        var path: String
        var canonicalRequest: String
        var headers: [String: String]

        enum CodingKeys: String, CodingKey {
            case path, headers
            case canonicalRequest = "canonical_request"
        }
    }

    @Test(
        "every request signs byte-equal to botocore's S3SigV4Auth",
        .enabled(
            if: botocoreAvailable || RequiredToolsTests.required("WINBACK_REQUIRE_S3"),
            "needs python3 with botocore (pip install botocore)"))
    func botocore() throws {
        try #require(Self.botocoreAvailable, "WINBACK_REQUIRE_S3=1, but python3 cannot import botocore")
        let (status, output) = try Self.python([Self.script], input: JSONEncoder().encode(Self.cases))
        try #require(status == 0, "sigv4_botocore.py failed")
        let references = try JSONDecoder().decode([Reference].self, from: output)
        try #require(references.count == Self.cases.count)
        for (c, reference) in zip(Self.cases, references) {
            let ours = c.signed()
            #expect(c.path == reference.path, "\(c.name): the path")
            let canonical = SigV4.canonicalRequest(
                method: c.method, host: c.host, path: c.path, query: c.query.map { ($0[0], $0[1]) },
                headers: c.headers.map { ($0[0], $0[1]) }, added: Array(ours.dropFirst()),
                payloadHash: Self.header(ours, "x-amz-content-sha256")!)
            #expect(canonical.request == reference.canonicalRequest, "\(c.name): the canonical request")
            #expect(Self.header(ours, "Authorization") == reference.headers["Authorization"], "\(c.name)")
            #expect(Self.header(ours, "x-amz-date") == reference.headers["X-Amz-Date"], "\(c.name)")
            #expect(
                Self.header(ours, "x-amz-content-sha256") == reference.headers["X-Amz-Content-SHA256"], "\(c.name)")
            #expect(
                Self.header(ours, "x-amz-security-token") == reference.headers["X-Amz-Security-Token"], "\(c.name)")
            #expect(ours.count == reference.headers.count, "\(c.name): the headers added")
        }
    }
}
