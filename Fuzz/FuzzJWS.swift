// libFuzzer entry point: one input = one JWS (or anything), through the compact-JWS splitter,
// the base64url decoder, the header reader and the JSON array walker of signed lines.
nonisolated(unsafe) private let buffer = DecodeBuffer(capacity: 16)
nonisolated(unsafe) private let again = DecodeBuffer(capacity: 16)
nonisolated(unsafe) private let scanner = JSONLineScanner(keys: ["a"])
nonisolated(unsafe) private let element = JSONLineScanner(keys: ["a"])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWS(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size)
    // base64url: decodes exactly the texts of the alphabet with a possible length, and what it
    // decodes encodes back to a text that decodes the same.
    if buffer.decode(input) {
        precondition(Base64URL.isAlphabet(input) && size % 4 != 1)
        precondition(buffer.count == Base64URL.decodedCount(size))
        let bytes = Array(buffer.bytes)
        let text = Array(Base64URL.encode(bytes).utf8)
        precondition(text.withUnsafeBytes { again.decode($0) } && Array(again.bytes) == bytes)
    } else {
        precondition(!Base64URL.isAlphabet(input) || size % 4 == 1)
    }
    if let jws = CompactJWS(input) {
        precondition(jws.header.count + jws.payload.count + jws.signature.count + 2 == size)
        precondition(jws.signingInput.count == jws.header.count + 1 + jws.payload.count)
        precondition(!jws.header.isEmpty && !jws.payload.isEmpty)
        if buffer.decode(jws.header), let h = JWSHeader.parse(buffer.bytes) {
            precondition(h.x5c == nil || h.hasX5c)
        }
        _ = buffer.decode(jws.payload)
        _ = buffer.decode(jws.signature)
    }
    // The input as the value of a key: when it is an array, each element scans as a value.
    let wrapped = Array("{\"a\":".utf8) + Array(input) + Array("}".utf8)
    wrapped.withUnsafeBytes { w in
        guard scanner.scan(w), case .other(.array, let raw) = scanner.lastValues[0] else { return }
        JSONArrayElements.forEach(raw) { e in
            let one = Array("{\"a\":".utf8) + Array(e) + Array("}".utf8)
            precondition(one.withUnsafeBytes { element.scan($0) }, "an element that is not a JSON value")
        }
    }
    return 0
}
