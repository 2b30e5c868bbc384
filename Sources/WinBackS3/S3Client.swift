import Crypto
import Foundation
import Synchronization
import WinBackSupport

/// An object found by a listing.
public struct S3Object: Sendable, Equatable {
    public var location: S3Location
    public var size: Int
    public var etag: String
}

/// A small S3 client for what winback does (docs/rules.md §11): list, read ranges, put, and
/// multipart uploads, signed with Signature Version 4. Requests that fail for now (throttling,
/// 5xx, a dropped connection) are tried again with exponential backoff and jitter, at most
/// ``tries`` times, honouring `Retry-After`; then 75. Refused credentials are 77, a missing
/// bucket or key 66.
public final class S3Client: Sendable {
    /// `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (path-style requests); nil: AWS itself.
    public let endpoint: URL?
    public let region: String
    let chain: CredentialChain
    let trace = ProcessInfo.processInfo.environment["WINBACK_S3_TRACE"] != nil

    /// Where a bucket of a region is on AWS (``awsAddress``).
    typealias AWSAddress = @Sendable (_ bucket: String, _ region: String) -> AWSHost
    typealias AWSHost = (scheme: String, host: String, base: String)

    /// What may change after the client is made.
    private struct Settings {
        var tries = 5
        var backoff: TimeInterval = 0.2
        var budget: NetworkBudget?
        /// The region of each bucket S3 redirected to another (AWS only).
        var bucketRegions: [String: String] = [:]
        var awsAddress: AWSAddress = { ("https", "\($0).s3.\($1).amazonaws.com", "") }
    }
    private let settings = Mutex(Settings())

    /// At most this many tries of one request.
    public var tries: Int {
        get { settings.withLock { $0.tries } }
        set { settings.withLock { $0.tries = newValue } }
    }
    /// The first wait before a retry; it doubles each time (with jitter).
    public var backoff: TimeInterval {
        get { settings.withLock { $0.backoff } }
        set { settings.withLock { $0.backoff = newValue } }
    }
    /// The run's network time (`limits.networkSeconds`, docs/rules.md §6.2); nil: unbounded.
    public var budget: NetworkBudget? {
        get { settings.withLock { $0.budget } }
        set { settings.withLock { $0.budget = newValue } }
    }
    /// Where a bucket of a region is on AWS: scheme, host and the path before the key. Tests
    /// point it at loopback; nothing else changes it.
    var awsAddress: AWSAddress {
        get { settings.withLock { $0.awsAddress } }
        set { settings.withLock { $0.awsAddress = newValue } }
    }

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        do {
            try HTTP.ready()
        } catch {
            // The machine, not a try, is wanting: said before any credential is looked for.
            throw WinBackError(.configuration, "\(error)")
        }
        chain = CredentialChain(environment: environment)
        region = chain.region
        let url =
            environment["AWS_ENDPOINT_URL_S3"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["AWS_ENDPOINT_URL"]
        if let url, !url.isEmpty {
            guard let u = URL(string: url), u.scheme == "http" || u.scheme == "https", u.host != nil else {
                throw WinBackError(.configuration, "AWS_ENDPOINT_URL_S3 is not an http(s) URL: \(url)")
            }
            endpoint = u
        } else {
            endpoint = nil
        }
    }

    /// The process's client and its run's network budget.
    private struct Process {
        /// The client of this process, made from its environment on first use.
        var made: S3Client?
        /// The network budget of this process's run (``limitNetwork(seconds:)``).
        var runBudget: NetworkBudget?
    }
    private static let process = Mutex(Process())

    public static func shared() throws -> S3Client {
        try process.withLock { p throws -> S3Client in
            if let made = p.made { return made }
            let c = try S3Client()
            c.budget = p.runBudget
            p.made = c
            return c
        }
    }

    /// Bounds the network time of this process's run (docs/rules.md §6.2,
    /// `limits.networkSeconds`): set once, when the run starts, for ``shared()``.
    public static func limitNetwork(seconds: Double) {
        process.withLock { p in
            if p.runBudget?.seconds == seconds { return }
            p.runBudget = NetworkBudget(seconds: seconds)
            p.made?.budget = p.runBudget
        }
    }

    /// The region requests for `bucket` are signed for.
    func region(of bucket: String) -> String {
        settings.withLock { $0.bucketRegions[bucket] } ?? region
    }

    // MARK: Requests

    /// The URL, the Host header and the canonical path of a request for `key` in `bucket`.
    func address(bucket: String, key: String, query: [(String, String)]) -> (URL, host: String, path: String) {
        let encodedKey = SigV4.encodePath(key)
        var host: String
        var path: String
        var scheme = "https"
        if let endpoint {
            scheme = endpoint.scheme ?? "http"
            host = endpoint.host!
            if let port = endpoint.port { host += ":\(port)" }
            let base = endpoint.path.hasSuffix("/") ? String(endpoint.path.dropLast()) : endpoint.path
            path = base + "/" + bucket + "/" + encodedKey
        } else {
            let aws = awsAddress(bucket, region(of: bucket))
            scheme = aws.scheme
            host = aws.host
            path = aws.base + "/" + encodedKey
        }
        let q = query.map { SigV4.encodeQuery($0.0) + "=" + SigV4.encodeQuery($0.1) }.joined(separator: "&")
        return (URL(string: "\(scheme)://\(host)\(path)\(q.isEmpty ? "" : "?" + q)")!, host, path)
    }

    /// Sends one request, retried as the type says; returns a 2xx answer or throws.
    ///
    /// `acceptable` may refuse a 2xx answer (S3 can answer 200 with an error in the body): its
    /// reason makes the request be tried again like a 5xx.
    func send(
        _ method: String, bucket: String, key: String = "", query: [(String, String)] = [],
        headers: [(String, String)] = [], body: Data? = nil, what: String, limit: Int = 16 << 20,
        oversized: WinBackError.Code = .ioError, expected: Int = 0,
        acceptable: (HTTP.Response) -> String? = { _ in nil }
    ) throws -> HTTP.Response {
        // What the message names: the object, or for a listing the prefix listed.
        let uri = "s3://\(bucket)/" + (key.isEmpty ? query.first { $0.0 == "prefix" }?.1 ?? "" : key)
        var lastProblem = ""
        var retryAfter: Double?
        var refreshed = false
        var redirected = false
        let payload = body.map { SigV4.sha256Hex($0) } ?? SigV4.sha256Hex([UInt8]())
        let limits = HTTP.Limits.forBytes((body?.count ?? 0) + expected)
        let (budget, tries) = settings.withLock { ($0.budget, $0.tries) }
        budget?.begin()
        defer { budget?.end() }
        func outOfTime() -> WinBackError {
            WinBackError(
                .temporary,
                "the run's network time ran out (limits.networkSeconds: \(Int(budget?.seconds ?? 0))) while trying to "
                    + "\(what)\(lastProblem.isEmpty ? "" : " (\(lastProblem))"); run again later", path: uri)
        }
        var attempt = 0
        while attempt < max(1, tries) {
            defer { attempt += 1 }
            if attempt > 0 {
                let pause = wait(attempt, retryAfter: retryAfter)
                if let budget, budget.remaining <= pause { throw outOfTime() }
                Thread.sleep(forTimeInterval: pause)
            }
            if let budget, budget.remaining <= 0 { throw outOfTime() }
            retryAfter = nil
            let (url, host, path) = address(bucket: bucket, key: key, query: query)
            let region = region(of: bucket)
            let (credentials, _) = try chain.credentials()
            var request = HTTP.Request(url: url, method: method)
            let signed = SigV4.sign(
                method: method, host: host, path: path, query: query, headers: headers, payloadHash: payload,
                credentials: credentials, region: region, date: Date())
            for (k, v) in headers + signed { request.setHeader(k, v) }
            request.setHeader("Host", host)
            // The bytes as stored: a `.gz` object kept with Content-Encoding gzip must not be
            // inflated on the way (docs/rules.md §11).
            request.setHeader("Accept-Encoding", "identity")
            request.body = body
            let r: HTTP.Response
            let sent = Date()
            defer {
                if trace {
                    FileHandle.standardError.write(
                        Data("s3 \(method) \(key) \(Int(Date().timeIntervalSince(sent) * 1000)) ms\n".utf8))
                }
            }
            do {
                r = try HTTP.send(request, limit: limit, limits: limits) { [budget] in budget?.remaining ?? .infinity }
            } catch is HTTP.OutOfTime {
                throw outOfTime()
            } catch let o as HTTP.Oversized {
                throw WinBackError(oversized, "S3's answer was refused as it came: \(o)", path: uri)
            } catch let b as HTTP.BadRequest {
                // From the configuration (an endpoint, a credential): the same on every try.
                throw WinBackError(.configuration, "cannot ask S3: \(b)", path: uri)
            } catch {
                lastProblem = "\(error)"
                continue
            }
            switch S3Redirect.decide(
                status: r.status, headers: r.headers, body: r.body, customEndpoint: endpoint != nil, region: region)
            {
            case .region(let other)? where !redirected:
                // S3's own region redirect: signed anew for that region, once.
                settings.withLock { $0.bucketRegions[bucket] = other }
                redirected = true
                attempt -= 1
                continue
            case .region(let other)?:
                throw WinBackError(
                    .ioError, "S3 redirected to region \(other) again; not followed (credentials go to one host)",
                    path: uri)
            case .refused(let target)?:
                throw WinBackError(
                    .ioError,
                    "S3 answered HTTP \(r.status), a redirect to \(target); not followed (credentials go to one host)",
                    path: uri)
            case nil: break
            }
            if (200..<300).contains(r.status) {
                guard let why = acceptable(r) else { return r }
                lastProblem = why
                continue
            }
            let xml = S3XML.parse(r.body) ?? []
            let code = S3XML.first(xml, "Error/Code") ?? "HTTP \(r.status)"
            let message = S3XML.first(xml, "Error/Message").map { ": " + $0 } ?? ""
            if [429, 500, 502, 503, 504].contains(r.status) || ["RequestTimeout", "SlowDown"].contains(code) {
                lastProblem = "\(code)\(message)"
                retryAfter = r.headers["retry-after"].flatMap(Double.init).map { min(max($0, 0), 60) }
                continue
            }
            if ["ExpiredToken", "InvalidToken", "RequestExpired"].contains(code) && !refreshed {
                // Temporary credentials that ran out: fetched again once.
                chain.forget()
                refreshed = true
                lastProblem = "\(code)\(message)"
                continue
            }
            switch r.status {
            case 401, 403:
                throw WinBackError(.noPermission, "S3 refused to \(what) (\(code)\(message))", path: uri)
            case 400 where ["ExpiredToken", "InvalidToken", "RequestExpired", "InvalidAccessKeyId"].contains(code):
                throw WinBackError(.noPermission, "S3 refused to \(what) (\(code)\(message))", path: uri)
            case 404:
                throw WinBackError(
                    .noInput,
                    code == "NoSuchBucket"
                        ? "no such bucket: \(bucket)"
                        : code == "NoSuchKey" ? "no such object" : "no such bucket or object (\(code))", path: uri)
            case 412, 416:
                throw WinBackError(.ioError, "the object changed while it was read (\(code)); run again", path: uri)
            default:
                throw WinBackError(
                    .configuration, "S3 would not \(what) (HTTP \(r.status), \(code)\(message))", path: uri)
            }
        }
        throw WinBackError(
            .temporary, "S3 did not answer after \(tries) tries to \(what) (\(lastProblem)); run again later", path: uri
        )
    }

    /// Exponential backoff with full jitter: a random wait up to backoff × 2^(attempt − 1), at
    /// most 10 s; or what `Retry-After` asked for.
    func wait(_ attempt: Int, retryAfter: Double?) -> TimeInterval {
        if let retryAfter { return retryAfter }
        let cap = min(10, backoff * pow(2, Double(attempt - 1)))
        return Double.random(in: 0...cap)
    }

    // MARK: Operations

    /// Every object whose key starts with `prefix`, in key order, across every page
    /// (ListObjectsV2). Keys are asked URL-encoded, so that a key with bytes XML cannot carry
    /// (controls) is listed as it is; a page over 16 MiB, a continuation token that repeats or
    /// a listing past a million pages is bad data (65, docs/rules.md §6.2). Only the objects
    /// whose key `keeping` accepts are kept, page by page: a listing of many keys that a glob
    /// mostly rejects is never held whole.
    public func list(
        bucket: String, prefix: String, maxPages: Int = 1_000_000, keeping: (String) -> Bool = { _ in true }
    ) throws -> [S3Object] {
        var out: [S3Object] = []
        var token: String?
        var pages = ListingPages(maxPages: maxPages)
        let listed = "s3://\(bucket)/\(prefix)"
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix), ("encoding-type", "url")]
            if let token { query.append(("continuation-token", token)) }
            let r = try send(
                "GET", bucket: bucket, query: query, what: "list \(prefix)*", limit: ListingPages.maxPageBytes,
                oversized: .badData, expected: 1 << 20)
            guard let xml = S3XML.parse(r.body) else {
                throw WinBackError(.badData, "S3's listing is not XML", path: listed)
            }
            let encoded = S3XML.first(xml, "ListBucketResult/EncodingType") == "url"
            var key: String?
            var size: Int?
            var etag = ""
            // A `Contents` element ends after its children.
            for (path, text) in xml {
                switch path {
                case "ListBucketResult/Contents/Key":
                    guard let k = encoded ? ListingPages.decode(text) : text else {
                        throw WinBackError(
                            .badData, "S3's listing has a key that is not URL-encoded UTF-8", path: listed)
                    }
                    key = k
                case "ListBucketResult/Contents/Size":
                    guard let n = Int(text), n >= 0 else {
                        throw WinBackError(
                            .badData, "S3's listing gives an object the size '\(text.prefix(40))'", path: listed)
                    }
                    size = n
                case "ListBucketResult/Contents/ETag": etag = text
                case "ListBucketResult/Contents":
                    guard let k = key, let n = size else {
                        throw WinBackError(.badData, "S3's listing has an object without a key or a size", path: listed)
                    }
                    if keeping(k) {
                        out.append(S3Object(location: S3Location(bucket: bucket, key: k), size: n, etag: etag))
                    }
                    key = nil
                    size = nil
                    etag = ""
                default: break
                }
            }
            let truncated = S3XML.first(xml, "ListBucketResult/IsTruncated") == "true"
            token = truncated ? S3XML.first(xml, "ListBucketResult/NextContinuationToken") : nil
            if truncated && token == nil {
                throw WinBackError(.badData, "S3's listing is cut without a continuation token", path: listed)
            }
            if let token, let problem = pages.next(token) {
                throw WinBackError(.badData, "S3's listing is refused: \(problem)", path: listed)
            }
        } while token != nil
        return out.sorted { $0.location.key.utf8.lexicographicallyPrecedes($1.location.key.utf8) }
    }

    /// The object's size and ETag (HEAD).
    public func head(_ o: S3Location) throws -> S3Object {
        let r = try send("HEAD", bucket: o.bucket, key: o.key, what: "read")
        guard let size = r.headers["content-length"].flatMap(Int.init) else {
            throw WinBackError(.badData, "S3 gave no length", path: o.uri)
        }
        return S3Object(location: o, size: size, etag: r.headers["etag"] ?? "")
    }

    /// Bytes `from ..< from + count` of the object, which must still be the one listed (its
    /// `etag`, its `size`): 74 when fewer bytes come, or the object changed since.
    public func read(_ o: S3Location, from: Int, count: Int, etag: String? = nil, size: Int? = nil) throws -> Data {
        var headers = [("range", "bytes=\(from)-\(from + count - 1)")]
        if let etag, !etag.isEmpty { headers.append(("if-match", etag)) }
        // The answer says `Content-Encoding: identity` whatever the object was stored with, so
        // nothing on the way (a proxy, an HTTP layer) inflates it: the bytes as stored.
        // An answer longer than the range is refused as it comes, never held (docs/rules.md §6.2).
        let r = try send(
            "GET", bucket: o.bucket, key: o.key, query: [("response-content-encoding", "identity")], headers: headers,
            what: "read", limit: count, expected: count)
        if let size, r.status == 206, let range = r.headers["content-range"],
            let total = range.split(separator: "/").last.flatMap({ Int($0) }), total != size
        {
            throw WinBackError(
                .ioError, "the object is \(total) bytes now, not the \(size) listed: it changed while it was read",
                path: o.uri)
        }
        guard r.body.count == count else {
            throw WinBackError(
                .ioError,
                "S3 sent \(r.body.count) bytes for a range of \(count) at \(from)"
                    + (r.body.count < count ? ": the read ended early" : ", not the bytes as stored"),
                path: o.uri)
        }
        return r.body
    }

    /// Deletes the object (a missing one is no error).
    public func delete(_ o: S3Location) throws {
        _ = try send("DELETE", bucket: o.bucket, key: o.key, what: "delete")
    }

    /// Puts `data` at `o`, with its SHA-256 for the server to check.
    public func put(_ o: S3Location, _ data: Data, contentType: String = "application/octet-stream") throws {
        let sha = Data(SHA256.hash(data: data)).base64EncodedString()
        _ = try send(
            "PUT", bucket: o.bucket, key: o.key,
            headers: [("content-type", contentType), ("x-amz-checksum-sha256", sha)], body: data, what: "write")
    }

    /// Puts a large file in parts of `partSize` bytes (multipart upload), each with its SHA-256.
    public func putMultipart(_ o: S3Location, file: String, size: Int, partSize: Int = 16 << 20) throws {
        let created = try send(
            "POST", bucket: o.bucket, key: o.key, query: [("uploads", "")],
            headers: [("x-amz-checksum-algorithm", "SHA256")], what: "start a multipart upload")
        guard let xml = S3XML.parse(created.body),
            let id = S3XML.first(xml, "InitiateMultipartUploadResult/UploadId")
        else { throw WinBackError(.badData, "S3 gave no upload id", path: o.uri) }
        var parts: [(Int, String, String)] = []
        do {
            guard let handle = FileHandle(forReadingAtPath: file) else {
                throw WinBackError(.noInput, "cannot read", path: file)
            }
            defer { try? handle.close() }
            var number = 1
            var offset = 0
            while offset < size || number == 1 {
                let chunk = handle.readData(ofLength: min(partSize, size - offset))
                let sha = Data(SHA256.hash(data: chunk)).base64EncodedString()
                let r = try send(
                    "PUT", bucket: o.bucket, key: o.key,
                    query: [("partNumber", String(number)), ("uploadId", id)],
                    headers: [("x-amz-checksum-sha256", sha)], body: chunk, what: "write part \(number)")
                parts.append((number, r.headers["etag"] ?? "", sha))
                offset += chunk.count
                number += 1
                if chunk.isEmpty { break }
            }
            var body = "<CompleteMultipartUpload>"
            for (n, etag, sha) in parts {
                body +=
                    "<Part><PartNumber>\(n)</PartNumber><ETag>\(etag.replacingOccurrences(of: "\"", with: "&quot;"))</ETag>"
                    + "<ChecksumSHA256>\(sha)</ChecksumSHA256></Part>"
            }
            body += "</CompleteMultipartUpload>"
            _ = try send(
                "POST", bucket: o.bucket, key: o.key, query: [("uploadId", id)],
                headers: [("content-type", "application/xml")], body: Data(body.utf8),
                what: "finish a multipart upload",
                acceptable: { r in
                    // A 200 whose body is an error: the upload did not finish.
                    let xml = S3XML.parse(r.body) ?? []
                    return S3XML.first(xml, "CompleteMultipartUploadResult/ETag") != nil
                        ? nil : "finishing the upload failed: \(S3XML.first(xml, "Error/Code") ?? "no result")"
                })
        } catch {
            _ = try? send("DELETE", bucket: o.bucket, key: o.key, query: [("uploadId", id)], what: "abort an upload")
            throw error
        }
    }
}
