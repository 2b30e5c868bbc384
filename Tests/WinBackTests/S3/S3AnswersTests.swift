import Foundation
import Testing

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport

/// docs/rules.md §6.2, the network is bounded: the pure decisions of the S3 client (redirects,
/// a listing's pages, URL-encoded keys, the network budget, an exchange's time limits) and the
/// `limits.networkSeconds` key.
@Suite("S3: answers refused or bounded")
struct S3AnswersTests {
    static func error(_ code: String, _ more: String = "") -> Data {
        Data("<?xml version=\"1.0\"?><Error><Code>\(code)</Code>\(more)</Error>".utf8)
    }

    @Test("AWS's region redirect (301/307 with x-amz-bucket-region, or PermanentRedirect) is signed for that region")
    func regionRedirect() {
        for status in [301, 307] {
            #expect(
                S3Redirect.decide(
                    status: status, headers: ["x-amz-bucket-region": "eu-west-1"], body: Data(), customEndpoint: false,
                    region: "us-east-1") == .region("eu-west-1"))
        }
        #expect(
            S3Redirect.decide(
                status: 301, headers: [:],
                body: Self.error("PermanentRedirect", "<Endpoint>inputs.s3.eu-central-1.amazonaws.com</Endpoint>"),
                customEndpoint: false, region: "us-east-1") == .region("eu-central-1"))
        #expect(
            S3Redirect.decide(
                status: 400, headers: [:], body: Self.error("PermanentRedirect", "<Region>ap-south-1</Region>"),
                customEndpoint: false, region: "us-east-1") == .region("ap-south-1"))
    }

    @Test("any other redirect is refused, naming where it pointed")
    func refused() {
        // A custom endpoint: even S3's own form is not followed.
        #expect(
            S3Redirect.decide(
                status: 301, headers: ["x-amz-bucket-region": "eu-west-1", "location": "http://elsewhere:9000/x"],
                body: Data(), customEndpoint: true, region: "us-east-1") == .refused("http://elsewhere:9000/x"))
        // A plain redirect on AWS, without a region.
        #expect(
            S3Redirect.decide(
                status: 307, headers: ["location": "http://127.0.0.1:4444/inputs"], body: Data(),
                customEndpoint: false, region: "us-east-1") == .refused("http://127.0.0.1:4444/inputs"))
        // 302 and 308 are not S3's region redirects.
        #expect(
            S3Redirect.decide(
                status: 302, headers: ["x-amz-bucket-region": "eu-west-1"], body: Data(), customEndpoint: false,
                region: "us-east-1") == .refused("region eu-west-1"))
        // The region asked already: no loop.
        #expect(
            S3Redirect.decide(
                status: 301, headers: ["x-amz-bucket-region": "us-east-1"], body: Data(), customEndpoint: false,
                region: "us-east-1") == .refused("region us-east-1"))
        // A region that is no region's name is not signed for.
        #expect(
            S3Redirect.decide(
                status: 301, headers: ["x-amz-bucket-region": "evil.example.com/"], body: Data(),
                customEndpoint: false, region: "us-east-1") == .refused("region evil.example.com/"))
        #expect(
            S3Redirect.decide(status: 300, headers: [:], body: Data(), customEndpoint: false, region: "us-east-1")
                == .refused("nowhere it named"))
    }

    @Test("answers that are no redirect are left to the caller")
    func notRedirects() {
        for status in [200, 206, 403, 404, 500] {
            #expect(
                S3Redirect.decide(
                    status: status, headers: ["x-amz-bucket-region": "eu-west-1"], body: Self.error("NoSuchKey"),
                    customEndpoint: false, region: "us-east-1") == nil)
        }
    }

    @Test("the region of an endpoint S3 names")
    func regionOfEndpoint() {
        #expect(S3Redirect.regionOf(endpoint: "b.s3.eu-west-1.amazonaws.com") == "eu-west-1")
        #expect(S3Redirect.regionOf(endpoint: "s3.us-west-2.amazonaws.com") == "us-west-2")
        #expect(S3Redirect.regionOf(endpoint: "s3-sa-east-1.amazonaws.com") == "sa-east-1")
        #expect(S3Redirect.regionOf(endpoint: "s3.amazonaws.com") == nil)
        #expect(S3Redirect.regionOf(endpoint: "s3.eu-west-1.evil.example") == nil)
    }

    @Test("a continuation token seen before is refused, whichever page repeats it")
    func repeatedToken() {
        var pages = ListingPages()
        #expect(pages.next("a") == nil)
        #expect(pages.next("b") == nil)
        #expect(pages.next("c") == nil)
        #expect(pages.next("a")?.contains("repeats after 4 pages") == true)
        var same = ListingPages()
        #expect(same.next("t") == nil)
        #expect(same.next("t") != nil)
    }

    @Test("a listing is refused at its page limit, not one page before")
    func pageLimit() {
        var pages = ListingPages(maxPages: 5)
        for i in 1...4 { #expect(pages.next("t\(i)") == nil) }
        #expect(pages.next("t5")?.contains("past 5 pages") == true)
        #expect(ListingPages.maxPages == 1_000_000)
    }

    @Test("URL-encoded keys decode as S3 writes them: + is a space, %HH a byte; control bytes kept")
    func decodeKeys() {
        #expect(ListingPages.decode("w/%01transactions-1.jsonl.gz") == "w/\u{01}transactions-1.jsonl.gz")
        #expect(ListingPages.decode("a+b%2Bc%20d") == "a b+c d")
        #expect(ListingPages.decode("caf%C3%A9/%0A") == "café/\n")
        #expect(ListingPages.decode("plain/key.gz") == "plain/key.gz")
        #expect(ListingPages.decode("bad%FF") == nil)
        #expect(ListingPages.decode("bad%zz") == nil)
        // Shown escaped in messages.
        let e = WinBackError(.noInput, "no such object", path: "s3://b/w/\u{01}k\n")
        #expect("\(e)" == "s3://b/w/\\x01k\\x0A: no such object")
    }

    @Test("network time counts once while requests overlap, and not between them")
    func budget() {
        final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 0) }
        let clock = Clock()
        let b = NetworkBudget(seconds: 10) { clock.now }
        #expect(b.remaining == 10)
        b.begin()
        clock.now += 2
        b.begin()  // overlapping
        clock.now += 3
        b.end()
        #expect(b.remaining == 5)
        clock.now += 1
        b.end()
        #expect(b.remaining == 4)
        clock.now += 100  // no request under way: not counted
        #expect(b.remaining == 4)
        b.begin()
        clock.now += 5
        #expect(b.remaining == -1)
        b.end()
        #expect(b.remaining == -1)
    }

    @Test("an exchange's time limits: 15 s without a byte; the whole a floor of 60 s and 1 s per 256 KiB")
    func limits() {
        #expect(HTTP.Limits().idle == 15)
        #expect(HTTP.Limits.forBytes(0).whole == 60)
        #expect(HTTP.Limits.forBytes(2 << 20).whole == 68)
        #expect(HTTP.Limits.forBytes(16 << 20).whole == 124)
        #expect(HTTP.Limits.forBytes(16 << 20).idle == 15)
    }

    @Test("a request's header set again replaces its value, whatever the case of its name")
    func requestHeaders() {
        var r = HTTP.Request(url: URL(string: "http://127.0.0.1:9/b/k")!, method: "PUT")
        r.setHeader("Content-Type", "text/csv")
        r.setHeader("x-amz-date", "20261122T000000Z")
        r.setHeader("content-type", "application/xml")
        #expect(r.headers.map(\.name) == ["content-type", "x-amz-date"])
        #expect(r.header("CONTENT-TYPE") == "application/xml")
        #expect(r.header("range") == nil)
    }

    @Test("a URL that is not http(s), or a header holding a line break or NUL, is refused before anything is sent")
    func refusedUnsent() {
        for url in ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/x"] {
            #expect {
                _ = try HTTP.send(HTTP.Request(url: URL(string: url)!), limit: 10)
            } throws: { e in
                e is HTTP.BadRequest && "\(e)".contains("not an http(s) URL")
            }
        }
        for (name, value) in [
            ("x-amz-security-token", "a\r\nHost: elsewhere"), ("x\nY", "v"), ("x", "\r"), ("x", "a\u{0}b"),
        ] {
            var r = HTTP.Request(url: URL(string: "http://127.0.0.1:9/b/k")!)
            r.setHeader(name, value)
            #expect {
                _ = try HTTP.send(r, limit: 10)
            } throws: { e in
                e is HTTP.BadRequest && "\(e)".contains("line break")
            }
        }
    }

    static let minimal = "name: n\ntransactions:\n  paths: [\"t.jsonl\"]\noffers: o.json\noutput:\n  directory: out\n"

    @Test("limits.networkSeconds: 600 by default, 1 to 86400 accepted, anything else a configuration error")
    func networkSeconds() {
        #expect(PipelineConfig.parse(Self.minimal, path: "/p/pipeline.yaml").0?.networkSeconds == 600)
        for (text, value) in [("20", 20), ("1", 1), ("86400", 86_400)] {
            let (c, problems) = PipelineConfig.parse(
                Self.minimal + "limits:\n  networkSeconds: \(text)\n", path: "/p/pipeline.yaml")
            #expect(c?.networkSeconds == value && problems.isEmpty, "\(problems)")
        }
        for bad in ["0", "-5", "86401", "ten", "1.5"] {
            let (_, problems) = PipelineConfig.parse(
                Self.minimal + "limits:\n  networkSeconds: \(bad)\n", path: "/p/pipeline.yaml")
            #expect(problems.contains { $0.contains("limits.networkSeconds") }, "\(bad): \(problems)")
        }
    }
}
