import Foundation

/// The three segments of a JWS in compact serialisation (`header.payload.signature`), as
/// slices of the bytes it was read from: nothing is decoded or copied.
package struct CompactJWS {
    let header: UnsafeRawBufferPointer
    let payload: UnsafeRawBufferPointer
    let signature: UnsafeRawBufferPointer
    /// `header.payload`, the bytes the signature is over.
    let signingInput: UnsafeRawBufferPointer

    /// Nil unless `text` has exactly three segments, a non-empty header and payload.
    package init?(_ text: UnsafeRawBufferPointer) {
        guard let base = text.baseAddress, text.count > 0 else { return nil }
        guard let d1 = memchr(base, 0x2E, text.count) else { return nil }
        let first = base.distance(to: UnsafeRawPointer(d1))
        let after = first + 1
        guard let d2 = memchr(base + after, 0x2E, text.count - after) else { return nil }
        let second = base.distance(to: UnsafeRawPointer(d2))
        if second + 1 < text.count, memchr(base + second + 1, 0x2E, text.count - second - 1) != nil { return nil }
        guard first > 0, second > after else { return nil }
        header = UnsafeRawBufferPointer(rebasing: text[0..<first])
        payload = UnsafeRawBufferPointer(rebasing: text[after..<second])
        signature = UnsafeRawBufferPointer(rebasing: text[(second + 1)...])
        signingInput = UnsafeRawBufferPointer(rebasing: text[0..<second])
    }

    /// `body` given a view of the header's bytes, valid during `body`.
    package func withHeader<R>(_ body: (Span<UInt8>) -> R) -> R {
        body(header.assumingMemoryBound(to: UInt8.self).span)
    }

    /// `body` given the JWS of `text` (nil unless it has three segments), valid during `body`.
    package static func with<R>(_ text: [UInt8], _ body: (CompactJWS?) -> R) -> R {
        text.withUnsafeBytes { body(CompactJWS($0)) }
    }
}

/// The JOSE header of a JWS, read only when its chain is not yet known.
struct JWSHeader {
    var alg: String?
    /// The certificates, base64 DER (standard alphabet, padded), leaf first; nil when absent or
    /// not an array of strings.
    var x5c: [String]?
    /// Whether the header had an `x5c` key at all.
    var hasX5c = false

    /// Nil when the decoded bytes are not a JSON object.
    static func parse(_ json: UnsafeRawBufferPointer) -> JWSHeader? {
        let scanner = JSONLineScanner(keys: ["alg", "x5c"])
        guard scanner.scan(json) else { return nil }
        var h = JWSHeader()
        let v = scanner.lastValues
        if case .string(let s) = v[0] { h.alg = String(decoding: s, as: UTF8.self) }
        switch v[1] {
        case .absent, .null: break
        case .other(.array, let raw):
            h.hasX5c = true
            h.x5c = scanner.stringArray(raw)
        default: h.hasX5c = true
        }
        return h
    }
}
