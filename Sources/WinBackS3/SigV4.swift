import Crypto
import Foundation
import WinBackSupport

/// An access key, its secret and, for temporary credentials, the session token.
public struct AWSCredentials: Sendable, Equatable {
    public var accessKeyId: String
    public var secretAccessKey: String
    /// The session token of temporary credentials (STS, an instance or task role); nil for a
    /// long-term key.
    public var sessionToken: String?

    public init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }
}

/// AWS Signature Version 4 for S3, in the Authorization header ("Authenticating Requests:
/// Using the Authorization Header (AWS Signature Version 4)" in the S3 API reference).
///
/// Checked byte for byte against botocore's `S3SigV4Auth` (Tests/Reference/sigv4_botocore.py).
/// As there, the path is signed as sent: S3 paths are neither normalised nor encoded twice.
public enum SigV4 {
    /// The payload hash to sign when the body is not hashed (`x-amz-content-sha256`).
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// Signs an S3 request and returns the headers to add to it: `Authorization`,
    /// `x-amz-date`, `x-amz-content-sha256` and, with a session token, `x-amz-security-token`.
    ///
    /// - Parameters:
    ///   - method: The HTTP method, e.g. "GET"; upper-cased for signing.
    ///   - host: The Host header as it will be sent: lowercase, with the port unless it is the
    ///     scheme's default ("127.0.0.1:8333", "bucket.s3.eu-west-1.amazonaws.com").
    ///   - path: The request path exactly as sent, already percent-encoded: "/" + bucket + "/" +
    ///     `encodePath(key)` for a path-style URL, "/" + `encodePath(key)` for a virtual-hosted
    ///     one. An empty path is signed as "/".
    ///   - query: The query parameters, raw (not encoded); the URL must carry them encoded with
    ///     `encodeQuery` (names and values), in any order.
    ///   - headers: The other headers to sign, e.g. content-type, range, x-amz-checksum-sha256;
    ///     they must be sent with the same values. Content-Length need not be among them.
    ///     Values are trimmed and inner runs of whitespace collapsed for signing; a repeated name
    ///     is signed as its values joined by ",". Host, authorization and the x-amz- headers
    ///     this returns are ignored here (the returned ones are signed), as are hop-by-hop
    ///     headers and user-agent, which proxies may change. Do not send a Date header.
    ///   - payloadHash: The lowercase hex SHA-256 of the body (`sha256Hex`; that of no bytes
    ///     for an empty body), or `unsignedPayload`.
    ///   - credentials: The key to sign with.
    ///   - region: The bucket's region, e.g. "us-east-1".
    ///   - date: The signing time; S3 refuses a request more than 15 minutes away from its clock.
    public static func sign(
        method: String, host: String, path: String, query: [(String, String)], headers: [(String, String)],
        payloadHash: String, credentials: AWSCredentials, region: String, date: Date
    ) -> [(String, String)] {
        let amzDate = timestamp(date)
        var added = [("x-amz-date", amzDate), ("x-amz-content-sha256", payloadHash)]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        let (canonical, signedHeaders) = canonicalRequest(
            method: method, host: host, path: path, query: query, headers: headers, added: added,
            payloadHash: payloadHash)
        let scope = "\(amzDate.prefix(8))/\(region)/s3/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(amzDate)\n\(scope)\n\(sha256Hex(Array(canonical.utf8)))"
        var key = SymmetricKey(data: Array("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [String(amzDate.prefix(8)), region, "s3", "aws4_request"] {
            key = SymmetricKey(data: HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key))
        }
        let signature = Hex.string(HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: key))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyId)/\(scope), "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return [("Authorization", authorization)] + added
    }

    /// The percent-encoding of an S3 object key for the request path: every UTF-8 byte except
    /// the unreserved characters (A-Z a-z 0-9 - _ . ~) and "/" becomes %XX, uppercase.
    public static func encodePath(_ key: String) -> String { encode(key, keepingSlash: true) }

    /// The percent-encoding of a query parameter's name or value: as `encodePath`, but "/" is
    /// encoded too (a space is %20, never "+").
    public static func encodeQuery(_ s: String) -> String { encode(s, keepingSlash: false) }

    /// The lowercase hex SHA-256 of `bytes`, as `x-amz-content-sha256` wants it.
    public static func sha256Hex(_ bytes: some Sequence<UInt8>) -> String {
        var hasher = SHA256()
        let hashed: Void? = bytes.withContiguousStorageIfAvailable { hasher.update(bufferPointer: .init($0)) }
        if hashed == nil { hasher.update(data: Array(bytes)) }
        return Hex.string(hasher.finalize())
    }

    // MARK: The parts of the signature

    /// Headers never signed, as in botocore: hop-by-hop ones and user-agent, which proxies and
    /// HTTP clients may change on the way.
    static let unsignable: Set<String> = [
        "connection", "expect", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id",
    ]

    /// Headers that `sign` sets itself; a caller's copy is dropped.
    static let replaced: Set<String> = [
        "authorization", "host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
    ]

    /// The canonical request and its signed-headers list: the caller's `headers` (less those
    /// never signed or set by `sign`), the host and the x-amz- headers `sign` adds (`added`).
    static func canonicalRequest(
        method: String, host: String, path: String, query: [(String, String)], headers: [(String, String)],
        added: [(String, String)], payloadHash: String
    ) -> (request: String, signedHeaders: String) {
        var values: [String: [String]] = [:]
        for (name, value) in headers {
            let name = trimmed(name).lowercased()
            if unsignable.contains(name) || replaced.contains(name) { continue }
            values[name, default: []].append(trimmed(value))
        }
        for (name, value) in [("host", host)] + added { values[name] = [trimmed(value)] }
        let names = values.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let canonicalHeaders = names.map { "\($0):\(values[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let canonicalQuery = query.map { (encodeQuery($0.0), encodeQuery($0.1)) }
            .sorted {
                $0.0 != $1.0
                    ? $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) : $0.1.utf8.lexicographicallyPrecedes($1.1.utf8)
            }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        let request = [
            method.uppercased(), path.isEmpty ? "/" : path, canonicalQuery, canonicalHeaders, signedHeaders,
            payloadHash,
        ]
        return (request.joined(separator: "\n"), signedHeaders)
    }

    /// The x-amz-date form of `date`: YYYYMMDD'T'HHMMSS'Z', UTC, whole seconds (truncated).
    static func timestamp(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let second = (seconds % 86_400 + 86_400) % 86_400
        // The civil date of a day count from 1970-01-01 (Howard Hinnant's civil_from_days).
        let z = (seconds - second) / 86_400 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func digits(_ n: Int64, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return digits(year, 4) + digits(month, 2) + digits(day, 2) + "T" + digits(second / 3600, 2)
            + digits(second / 60 % 60, 2) + digits(second % 60, 2) + "Z"
    }

    /// A header name or value for signing: no leading or trailing whitespace, and each inner run
    /// of it one space. Whitespace is ASCII's (space, tab, CR, LF, VT, FF).
    static func trimmed(_ value: String) -> String {
        let words = value.unicodeScalars.split { $0 == " " || ("\t"..."\r").contains($0) }
        return words.map { String(String.UnicodeScalarView($0)) }.joined(separator: " ")
    }

    /// `s` as UTF-8 with every byte but the unreserved ones (and "/" when `keepingSlash`) as %XX.
    static func encode(_ s: String, keepingSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.append(b)
            case UInt8(ascii: "/") where keepingSlash:
                out.append(b)
            default:
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
