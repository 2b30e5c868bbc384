import Crypto
import Foundation
import WinBackSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
public final class S3Client: @unchecked Sendable {
    /// `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (path-style requests); nil: AWS itself.
    public let endpoint: URL?
    public let region: String
    let chain: CredentialChain
    /// At most this many tries of one request.
    public var tries = 5
    /// The first wait before a retry; it doubles each time (with jitter).
    public var backoff: TimeInterval = 0.2
    let trace = ProcessInfo.processInfo.environment["WINBACK_S3_TRACE"] != nil

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
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

    /// The client of this process, made from its environment on first use.
    nonisolated(unsafe) private static var made: S3Client?
    private static let makeLock = NSLock()
    public static func shared() throws -> S3Client {
        makeLock.lock()
        defer { makeLock.unlock() }
        if let made { return made }
        let c = try S3Client()
        made = c
        return c
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
            host = "\(bucket).s3.\(region).amazonaws.com"
            path = "/" + encodedKey
        }
        let q = query.map { SigV4.encodeQuery($0.0) + "=" + SigV4.encodeQuery($0.1) }.joined(separator: "&")
        return (URL(string: "\(scheme)://\(host)\(path)\(q.isEmpty ? "" : "?" + q)")!, host, path)
    }

    /// Sends one request, retried as the type says; returns a 2xx answer or throws.
    func send(
        _ method: String, bucket: String, key: String = "", query: [(String, String)] = [],
        headers: [(String, String)] = [], body: Data? = nil, what: String
    ) throws -> HTTP.Response {
        let (url, host, path) = address(bucket: bucket, key: key, query: query)
        let uri = "s3://\(bucket)/\(key)"
        var lastProblem = ""
        for attempt in 0..<max(1, tries) {
            if attempt > 0 { Thread.sleep(forTimeInterval: wait(attempt, retryAfter: nil)) }
            let (credentials, _) = try chain.credentials()
            var request = URLRequest(url: url)
            request.httpMethod = method
            let payload = body.map { SigV4.sha256Hex(Array($0)) } ?? SigV4.sha256Hex([UInt8]())
            let signed = SigV4.sign(
                method: method, host: host, path: path, query: query, headers: headers, payloadHash: payload,
                credentials: credentials, region: region, date: Date())
            for (k, v) in headers + signed { request.setValue(v, forHTTPHeaderField: k) }
            request.setValue(host, forHTTPHeaderField: "Host")
            if let body { request.httpBody = body }
            let r: HTTP.Response
            let sent = Date()
            defer {
                if trace {
                    FileHandle.standardError.write(
                        Data("s3 \(method) \(key) \(Int(Date().timeIntervalSince(sent) * 1000)) ms\n".utf8))
                }
            }
            do { r = try HTTP.send(request) } catch {
                lastProblem = "\(error)"
                continue
            }
            if (200..<300).contains(r.status) { return r }
            let xml = S3XML.parse(r.body) ?? []
            let code = S3XML.first(xml, "Error/Code") ?? "HTTP \(r.status)"
            let message = S3XML.first(xml, "Error/Message").map { ": " + $0 } ?? ""
            switch r.status {
            case 429, 500, 502, 503, 504:
                lastProblem = "\(code)\(message)"
                if let after = r.headers["retry-after"].flatMap(Double.init), attempt + 1 < tries {
                    Thread.sleep(forTimeInterval: min(after, 30))
                }
                continue
            case 401, 403:
                throw WinBackError(.noPermission, "S3 refused to \(what) (\(code)\(message))", path: uri)
            case 404:
                throw WinBackError(
                    .noInput, code == "NoSuchBucket" ? "no such bucket: \(bucket)" : "no such object (\(code))",
                    path: uri)
            default:
                throw WinBackError(
                    .configuration, "S3 would not \(what) (HTTP \(r.status), \(code)\(message))", path: uri)
            }
        }
        throw WinBackError(
            .temporary, "S3 did not answer after \(tries) tries to \(what) (\(lastProblem)); run again later", path: uri
        )
    }

    /// Exponential backoff with full jitter: up to backoff × 2^(attempt − 1), at most 10 s.
    func wait(_ attempt: Int, retryAfter: Double?) -> TimeInterval {
        if let retryAfter { return retryAfter }
        let cap = min(10, backoff * pow(2, Double(attempt - 1)))
        return Double.random(in: cap / 2...cap)
    }

    /// The SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    // MARK: Operations

    /// Every object whose key starts with `prefix`, in key order, across every page
    /// (ListObjectsV2).
    public func list(bucket: String, prefix: String) throws -> [S3Object] {
        var out: [S3Object] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            let r = try send("GET", bucket: bucket, query: query, what: "list \(prefix)*")
            guard let xml = S3XML.parse(r.body) else {
                throw WinBackError(.badData, "S3's listing is not XML", path: "s3://\(bucket)/\(prefix)")
            }
            var key: String?
            var size: Int?
            var etag = ""
            // A `Contents` element ends after its children.
            for (path, text) in xml {
                switch path {
                case "ListBucketResult/Contents/Key": key = text
                case "ListBucketResult/Contents/Size": size = Int(text)
                case "ListBucketResult/Contents/ETag": etag = text
                case "ListBucketResult/Contents":
                    if let k = key, let n = size {
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
                throw WinBackError(.badData, "S3's listing is cut without a continuation token", path: "s3://\(bucket)")
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

    /// Bytes `from ..< from + count` of the object; 74 when fewer come.
    public func read(_ o: S3Location, from: Int, count: Int) throws -> Data {
        let r = try send(
            "GET", bucket: o.bucket, key: o.key, headers: [("range", "bytes=\(from)-\(from + count - 1)")], what: "read"
        )
        guard r.body.count == count else {
            throw WinBackError(
                .ioError, "S3 sent \(r.body.count) bytes for a range of \(count) at \(from): the read ended early",
                path: o.uri)
        }
        return r.body
    }

    /// Puts `data` at `o`, with its SHA-256 for the server to check.
    public func put(_ o: S3Location, _ data: Data, contentType: String = "application/octet-stream") throws {
        let sha = Data(S3Client.sha256(Array(data))).base64EncodedString()
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
        guard let handle = FileHandle(forReadingAtPath: file) else {
            throw WinBackError(.noInput, "cannot read", path: file)
        }
        defer { try? handle.close() }
        var parts: [(Int, String, String)] = []
        do {
            var number = 1
            var offset = 0
            while offset < size || number == 1 {
                let chunk = handle.readData(ofLength: min(partSize, size - offset))
                let sha = Data(S3Client.sha256(Array(chunk))).base64EncodedString()
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
                headers: [("content-type", "application/xml")], body: Data(body.utf8), what: "finish a multipart upload"
            )
        } catch {
            _ = try? send("DELETE", bucket: o.bucket, key: o.key, query: [("uploadId", id)], what: "abort an upload")
            throw error
        }
    }
}
