import Foundation

/// What to do with an S3 answer that points elsewhere (docs/rules.md §6.2: credentials go to
/// one host). A redirect is never followed as it came: S3's own region redirect (AWS only, a
/// bucket in another region than the one asked) is signed anew for that region's endpoint;
/// any other is an error naming where it pointed.
enum S3Redirect: Equatable {
    /// Ask again, signed for this region, at `<bucket>.s3.<region>.amazonaws.com`.
    case region(String)
    /// Refused: where the answer pointed, for the message.
    case refused(String)

    /// The decision for an answer of `status`, or nil when it is no redirect.
    ///
    /// - Parameters:
    ///   - customEndpoint: requests go to `AWS_ENDPOINT_URL_S3`: no answer from it is S3's own.
    ///   - region: the region the request was signed for.
    static func decide(
        status: Int, headers: [String: String], body: Data, customEndpoint: Bool, region: String
    ) -> S3Redirect? {
        let xml = status >= 300 ? S3XML.parse(body) ?? [] : []
        let code = S3XML.first(xml, "Error/Code")
        let s3Code = code == "PermanentRedirect" || code == "TemporaryRedirect"
        guard (300..<400).contains(status) || s3Code else { return nil }
        let named =
            headers["x-amz-bucket-region"] ?? S3XML.first(xml, "Error/Region")
            ?? S3XML.first(xml, "Error/Endpoint").flatMap(regionOf(endpoint:))
        if !customEndpoint, status == 301 || status == 307 || s3Code, let r = named, isRegion(r), r != region {
            return .region(r)
        }
        let target =
            headers["location"] ?? S3XML.first(xml, "Error/Endpoint") ?? named.map { "region \($0)" }
            ?? "nowhere it named"
        return .refused(target)
    }

    /// A region's name as AWS spells them (`eu-west-1`, `us-gov-west-1`).
    static func isRegion(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 32
            && s.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
    }

    /// The region of an S3 endpoint S3 names (`bucket.s3.eu-west-1.amazonaws.com`,
    /// `s3.eu-west-1.amazonaws.com`, `s3-eu-west-1.amazonaws.com`).
    static func regionOf(endpoint: String) -> String? {
        guard endpoint.hasSuffix(".amazonaws.com") else { return nil }
        let labels = endpoint.dropLast(".amazonaws.com".count).split(separator: ".").map(String.init)
        if let i = labels.lastIndex(of: "s3"), i + 1 < labels.count { return labels[i + 1] }
        if let last = labels.last, last.hasPrefix("s3-") { return String(last.dropFirst(3)) }
        return nil
    }
}

/// The pages of one listing, checked as they come (docs/rules.md §6.2): a continuation token
/// seen before would page for ever, and so would a listing past ``maxPages`` pages.
struct ListingPages {
    static let maxPages = 1_000_000
    /// The most bytes of one page (a page of 1000 keys is well under 1 MiB).
    static let maxPageBytes = 16 << 20

    let maxPages: Int
    private(set) var pages = 0
    /// The tokens handed out so far, hashed (seeded per process: no one can aim at a collision).
    private var seen: Set<Int> = []

    init(maxPages: Int = ListingPages.maxPages) { self.maxPages = maxPages }

    /// Counts a page that asks for a next one with `token`: nil to go on, or why not.
    mutating func next(_ token: String) -> String? {
        pages += 1
        if pages >= maxPages { return "the listing goes on past \(maxPages) pages" }
        if !seen.insert(token.hashValue).inserted {
            return "the listing's continuation token repeats after \(pages) pages: it would never end"
        }
        return nil
    }

    /// A key (or prefix) of a listing asked with `encoding-type=url`: `+` is a space and
    /// `%HH` a byte, as S3 writes them; nil when that is not UTF-8.
    static func decode(_ s: String) -> String? {
        s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
