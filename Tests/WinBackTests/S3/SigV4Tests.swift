import Foundation
import Testing

@testable import WinBackS3

/// AWS Signature Version 4 for S3: AWS's published example, and byte-equal Authorization headers
/// with botocore's S3SigV4Auth (Tests/Reference/sigv4_botocore.py) for requests of every shape
/// the S3 client sends.
@Suite("S3: SigV4 signing")
struct SigV4Tests {
    static let example = AWSCredentials(
        accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// 2013-05-24T00:00:00Z, the time of AWS's examples.
    static let exampleDate = Date(timeIntervalSince1970: 1_369_353_600)

    static func header(_ headers: [(String, String)], _ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    @Test("AWS's GET Object example (examplebucket, test.txt, Range bytes=0-9) gives its published signature")
    func awsExample() {
        let headers = SigV4.sign(
            method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", query: [],
            headers: [("Range", "bytes=0-9")], payloadHash: SigV4.sha256Hex([UInt8]()), credentials: Self.example,
            region: "us-east-1", date: Self.exampleDate)
        #expect(
            Self.header(headers, "Authorization")
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(Self.header(headers, "x-amz-date") == "20130524T000000Z")
        #expect(Self.header(headers, "x-amz-content-sha256") == Self.emptyHash)
        #expect(Self.header(headers, "x-amz-security-token") == nil)
        #expect(headers.map(\.0) == ["Authorization", "x-amz-date", "x-amz-content-sha256"])
        // The canonical request as the example prints it.
        let canonical = SigV4.canonicalRequest(
            method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", query: [],
            headers: [("Range", "bytes=0-9")],
            added: [("x-amz-date", "20130524T000000Z"), ("x-amz-content-sha256", Self.emptyHash)],
            payloadHash: Self.emptyHash)
        #expect(
            canonical.request
                == "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                + "x-amz-content-sha256:\(Self.emptyHash)\nx-amz-date:20130524T000000Z\n\n"
                + "host;range;x-amz-content-sha256;x-amz-date\n\(Self.emptyHash)")
    }

    @Test("keys and query values are percent-encoded byte by byte, uppercase, UTF-8")
    func encoding() {
        #expect(SigV4.encodePath("a b/é+~%=日本") == "a%20b/%C3%A9%2B~%25%3D%E6%97%A5%E6%9C%AC")
        #expect(SigV4.encodePath("AZaz09-_.~/") == "AZaz09-_.~/")
        #expect(SigV4.encodePath("") == "")
        #expect(SigV4.encodePath("?#&*!'()") == "%3F%23%26%2A%21%27%28%29")
        #expect(SigV4.encodeQuery("a/b c+=") == "a%2Fb%20c%2B%3D")
        #expect(SigV4.encodeQuery("\u{7F}\u{0}") == "%7F%00")
    }

    @Test("SHA-256 in lowercase hex, of bytes, arrays and Data alike")
    func sha256() {
        #expect(SigV4.sha256Hex([UInt8]()) == Self.emptyHash)
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(SigV4.sha256Hex(Array("abc".utf8)) == abc)
        #expect(SigV4.sha256Hex(Data("abc".utf8)) == abc)
        #expect(SigV4.sha256Hex("abc".utf8) == abc)
    }

    @Test("x-amz-date is UTC to the whole second, truncated")
    func timestamps() {
        let cases: [(TimeInterval, String)] = [
            (0, "19700101T000000Z"),
            (1_369_353_600, "20130524T000000Z"),
            (951_782_400, "20000229T000000Z"),
            (1_709_251_199.999, "20240229T235959Z"),
            (1_709_251_200, "20240301T000000Z"),
            (946_684_799, "19991231T235959Z"),
            (-1, "19691231T235959Z"),
            (4_102_444_800, "21000101T000000Z"),
        ]
        for (seconds, text) in cases {
            #expect(SigV4.timestamp(Date(timeIntervalSince1970: seconds)) == text, "\(seconds)")
        }
    }

    @Test("the host, the x-amz- headers and hop-by-hop headers of the caller are not signed twice")
    func callerHeaders() {
        let plain = SigV4.sign(
            method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", query: [],
            headers: [("Range", "bytes=0-9")], payloadHash: Self.emptyHash, credentials: Self.example,
            region: "us-east-1", date: Self.exampleDate)
        let noisy = SigV4.sign(
            method: "get", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", query: [],
            headers: [
                ("Host", "elsewhere"), ("X-Amz-Date", "20000101T000000Z"), ("x-amz-content-sha256", "x"),
                ("Authorization", "old"), ("User-Agent", "winback"), ("Range", "  bytes=0-9 "),
                ("Connection", "keep-alive"),
            ],
            payloadHash: Self.emptyHash, credentials: Self.example, region: "us-east-1", date: Self.exampleDate)
        #expect(noisy.map(\.0) == plain.map(\.0))
        #expect(noisy.map(\.1) == plain.map(\.1))
    }

    // MARK: Against botocore

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
        var credentials = SigV4Tests.example
        var region = "us-east-1"
        var date = SigV4Tests.exampleDate

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
        .enabled(if: botocoreAvailable, "needs python3 with botocore (pip install botocore)"))
    func botocore() throws {
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
