import Foundation

/// File names as winback holds them (docs/rules.md §6.2): a `String` that says exactly which
/// bytes the system gave, whether or not they are UTF-8.
///
/// A name's valid UTF-8 is kept as its characters; each byte that is not part of valid UTF-8
/// becomes one *marker*, the scalar U+10FE00 + byte (U+10FE80–U+10FEFF, private use). A name
/// whose UTF-8 really holds a marker scalar has that scalar's four bytes written as markers
/// too, so every string made here decodes back to the exact bytes it came from. Names that
/// are valid UTF-8 without markers (nearly all) are unchanged, and their order, bytewise, is
/// their `utf8` order.
///
/// Names are encoded where the system hands them over (glob(3)) and decoded only where they
/// are handed back (``System``'s calls that take a path), so reading and comparing names costs
/// nothing more. Paths taken from the pipeline file are text: ``fromText(_:)`` makes them
/// names before they are joined with names the system gave (the input globs). Other paths
/// of the pipeline file (the output folder, say) are used as they are, which is the same
/// unless they hold a character U+10FE80–U+10FEFF.
package enum FileName {
    /// The first marker scalar's value less 0x80: byte `b` (0x80–0xFF) is U+10FE00 + b.
    static let markerBase: UInt32 = 0x10FE00

    /// Whether `s` stands for a byte of a name.
    @inline(__always)
    package static func isMarker(_ s: Unicode.Scalar) -> Bool {
        s.value >= markerBase + 0x80 && s.value <= markerBase + 0xFF
    }

    /// The byte a marker stands for.
    @inline(__always)
    package static func byte(ofMarker s: Unicode.Scalar) -> UInt8 { UInt8(truncatingIfNeeded: s.value - markerBase) }

    /// The marker of a byte 0x80–0xFF.
    @inline(__always)
    static func marker(_ b: UInt8) -> Unicode.Scalar { Unicode.Scalar(markerBase + UInt32(b))! }

    /// The name of the bytes `bytes` (no NUL among them).
    package static func string<C: Collection>(fromBytes bytes: C) -> String where C.Element == UInt8 {
        let bytes = Array(bytes)
        if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        var out = String.UnicodeScalarView()
        var i = 0
        while i < bytes.count {
            if let (scalar, length) = scalar(in: bytes, at: i), !isMarker(scalar) {
                out.append(scalar)
                i += length
            } else {
                // Not UTF-8 here, or a marker's own bytes: one marker per byte (a valid marker
                // scalar's lead byte is followed by continuation bytes, each invalid alone).
                out.append(marker(bytes[i]))
                i += 1
            }
        }
        return String(out)
    }

    /// A path written as text (the pipeline file, the command line) as a name: unchanged
    /// unless it holds a marker scalar, whose bytes are then marked.
    package static func fromText(_ text: String) -> String {
        text.utf8.contains(0xF4) ? string(fromBytes: text.utf8) : text
    }

    /// The bytes a name stands for: markers as their bytes, everything else as its UTF-8.
    package static func bytes(_ name: String) -> [UInt8] {
        guard mayHoldMarkers(name) else { return Array(name.utf8) }
        var out: [UInt8] = []
        out.reserveCapacity(name.utf8.count)
        for s in name.unicodeScalars {
            if isMarker(s) { out.append(byte(ofMarker: s)) } else { out.append(contentsOf: UTF8.encode(s)!) }
        }
        return out
    }

    /// Whether `a` sorts before `b` by the bytes they stand for (docs/rules.md §6: inputs and
    /// rejects in path order). As cheap as comparing `utf8` for names without markers.
    package static func precedes(_ a: String, _ b: String) -> Bool {
        var i = a.utf8.makeIterator()
        var j = b.utf8.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return false
            case (nil, _): return true
            case (_, nil): return false
            case (let x?, let y?):
                // A scalar from U+100000 up, markers included, starts with 0xF4: from there on
                // the names' bytes are compared.
                if x == 0xF4 || y == 0xF4 { return bytes(a).lexicographicallyPrecedes(bytes(b)) }
                if x != y { return x < y }
            }
        }
    }

    /// False when `name` surely holds no marker (no byte 0xF4 in its UTF-8).
    @inline(__always)
    static func mayHoldMarkers(_ name: String) -> Bool { name.utf8.contains(0xF4) }

    /// The scalar of the valid UTF-8 sequence at `i`, and its length; nil when the bytes there
    /// are not UTF-8 (a stray continuation byte, an overlong form, a surrogate, a cut sequence,
    /// a value past U+10FFFF).
    package static func scalar(in bytes: [UInt8], at i: Int) -> (Unicode.Scalar, Int)? {
        let b0 = bytes[i]
        if b0 < 0x80 { return (Unicode.Scalar(b0), 1) }
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: length = 2
        case 0xE0: (length, low) = (3, 0xA0)
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: (length, high) = (3, 0x9F)
        case 0xF0: (length, low) = (4, 0x90)
        case 0xF1...0xF3: length = 4
        case 0xF4: (length, high) = (4, 0x8F)
        default: return nil
        }
        guard i + length <= bytes.count else { return nil }
        var value = UInt32(b0) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
        for k in 1..<length {
            let b = bytes[i + k]
            if k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF) { return nil }
            value = value << 6 | UInt32(b & 0x3F)
        }
        return Unicode.Scalar(value).map { ($0, length) }
    }
}
