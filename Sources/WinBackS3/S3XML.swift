import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The few XML documents S3 answers with: a listing, an error, a multipart upload's id, STS's
/// credentials. Read as (element path → text), which is all they need.
final class S3XML: NSObject, XMLParserDelegate {
    /// Every element's text, in document order, by its path (`ListBucketResult/Contents/Key`).
    private(set) var values: [(path: String, text: String)] = []
    private var stack: [String] = []
    private var text = ""

    static func parse(_ data: Data) -> [(path: String, text: String)]? {
        let p = XMLParser(data: data)
        let doc = S3XML()
        p.delegate = doc
        p.shouldResolveExternalEntities = false
        return p.parse() ? doc.values : nil
    }

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        stack.append(name)
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        values.append((stack.joined(separator: "/"), text))
        stack.removeLast()
        text = ""
    }

    /// The first value at `path`.
    static func first(_ values: [(path: String, text: String)], _ path: String) -> String? {
        values.first { $0.path == path }?.text
    }
}
