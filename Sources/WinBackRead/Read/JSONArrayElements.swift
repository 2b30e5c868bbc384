import WinBackSupport

/// The elements of a JSON array already validated by a ``JSONLineScanner`` (the raw bytes of
/// an `.other(.array, …)` value), each as its raw bytes, whitespace trimmed: the one walker of
/// arrays, for signed lines' `signedTransactions` and `data` and for the scanner's own
/// ``JSONLineScanner/stringArray(_:)``.
///
/// The array was validated when it was scanned (every string, escape and UTF-8 sequence, and
/// nesting up to the scanner's limit), so the walk only finds where each element ends: a
/// string (a JWS is thousands of bytes) is crossed from quote to quote (`Bytes.firstIndex`, `memchr`), brackets
/// and braces are counted, and a comma outside them ends the element.
enum JSONArrayElements {
    /// Calls `body` with the range of each element of `raw`, which starts with `[` (nothing when
    /// it does not).
    static func forEach(in raw: Span<UInt8>, _ body: (Range<Int>) -> Void) {
        guard !raw.isEmpty, raw[0] == UInt8(ascii: "[") else { return }
        let n = raw.count
        var i = 1  // after `[`
        while i < n {
            while i < n && Whitespace.contains(raw[i]) { i += 1 }
            guard i < n, raw[i] != UInt8(ascii: "]") else { return }
            let start = i
            var depth = 0
            while i < n {
                let c = raw[i]
                if c == UInt8(ascii: "\"") {
                    // A string (a JWS is thousands of bytes): jump from quote to quote; one
                    // ends it unless an odd run of backslashes escapes it.
                    let open = i
                    var end = n
                    var from = i + 1
                    while let at = Bytes.firstIndex(of: 0x22, in: raw, from: from) {
                        var slashes = 0
                        while at - 1 - slashes > open && raw[at - 1 - slashes] == UInt8(ascii: "\\") { slashes += 1 }
                        if slashes % 2 == 0 {
                            end = at
                            break
                        }
                        from = at + 1
                    }
                    i = end
                } else if c == UInt8(ascii: "[") || c == UInt8(ascii: "{") {
                    depth += 1
                } else if c == UInt8(ascii: "]") || c == UInt8(ascii: "}") {
                    if depth == 0 { break }
                    depth -= 1
                } else if c == UInt8(ascii: ",") && depth == 0 {
                    break
                }
                i += 1
            }
            var end = min(i, n)
            while end > start && Whitespace.contains(raw[end - 1]) { end -= 1 }
            body(start..<end)
            i += 1  // past `,` (or `]`, which ends the loop)
        }
    }
}
