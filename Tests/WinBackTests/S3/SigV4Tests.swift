import Foundation
import Testing

@testable import WinBackS3

/// AWS Signature Version 4 for S3: AWS's published example and the signer's pieces, in this
/// process. The comparison with botocore, which runs python3, is in the slow tests
/// (`SigV4BotocoreTests`).
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
}
