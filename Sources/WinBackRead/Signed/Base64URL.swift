import Foundation

/// base64url without padding (RFC 4648 §5), the alphabet of every JWS segment, decoded from
/// bytes without making a String or a Data.
package enum Base64URL {
    /// By byte: its 6-bit value, or 0xFF for a byte outside the alphabet.
    static let values: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            t[Int(c)] = UInt8(i)
        }
        return t
    }()

    /// Bytes that `count` characters decode to, or nil when no unpadded text has that length.
    @inline(__always)
    static func decodedCount(_ count: Int) -> Int? {
        count % 4 == 1 ? nil : count / 4 * 3 + max(0, count % 4 - 1)
    }

    /// Whether every byte of `text` is in the alphabet.
    static func isAlphabet(_ text: UnsafeRawBufferPointer) -> Bool {
        values.withUnsafeBufferPointer { v in
            var bad: UInt8 = 0
            for c in text { bad |= v[Int(c)] }
            return bad & 0x80 == 0
        }
    }

    /// Decodes `text` into `out`, which holds at least ``decodedCount(_:)`` bytes; returns the
    /// bytes written, or nil for a byte outside the alphabet or an impossible length. Bits left
    /// over in the last character are ignored, as most decoders do.
    static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) -> Int? {
        guard let n = decodedCount(text.count) else { return nil }
        return values.withUnsafeBufferPointer { v -> Int? in
            var bad: UInt8 = 0
            var o = 0
            var i = 0
            let whole = text.count & ~3
            while i < whole {
                let a = v[Int(text[i])]
                let b = v[Int(text[i + 1])]
                let c = v[Int(text[i + 2])]
                let d = v[Int(text[i + 3])]
                bad |= a | b | c | d
                let w = UInt32(a & 63) << 18 | UInt32(b & 63) << 12 | UInt32(c & 63) << 6 | UInt32(d & 63)
                out.storeBytes(of: UInt8(truncatingIfNeeded: w >> 16), toByteOffset: o, as: UInt8.self)
                out.storeBytes(of: UInt8(truncatingIfNeeded: w >> 8), toByteOffset: o + 1, as: UInt8.self)
                out.storeBytes(of: UInt8(truncatingIfNeeded: w), toByteOffset: o + 2, as: UInt8.self)
                o += 3
                i += 4
            }
            let rest = text.count - whole
            if rest >= 2 {
                let a = v[Int(text[i])]
                let b = v[Int(text[i + 1])]
                let c = rest == 3 ? v[Int(text[i + 2])] : 0
                bad |= a | b | c
                let w = UInt32(a & 63) << 18 | UInt32(b & 63) << 12 | UInt32(c & 63) << 6
                out.storeBytes(of: UInt8(truncatingIfNeeded: w >> 16), toByteOffset: o, as: UInt8.self)
                if rest == 3 {
                    out.storeBytes(of: UInt8(truncatingIfNeeded: w >> 8), toByteOffset: o + 1, as: UInt8.self)
                }
                o += rest - 1
            }
            guard bad & 0x80 == 0 else { return nil }
            assert(o == n)
            return o
        }
    }

    /// Encodes `bytes` (for signed worlds and tests; never on a read path).
    package static func encode<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }
}

/// A growable byte buffer reused from row to row, so that decoding a segment allocates nothing
/// once it is large enough.
final class DecodeBuffer {
    private(set) var storage: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int = 4096) {
        self.capacity = capacity
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { storage.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: count) }

    /// ``decode(_:)-(UnsafeRawBufferPointer)`` of a view of the text.
    func decode(_ text: Span<UInt8>) -> Bool {
        text.withUnsafeBytes { decode($0) }
    }

    /// Decodes base64url `text` into the buffer; false when it is not base64url.
    func decode(_ text: UnsafeRawBufferPointer) -> Bool {
        guard let n = Base64URL.decodedCount(text.count) else { return false }
        if n > capacity {
            storage.deallocate()
            capacity = max(n, capacity * 2)
            storage = .allocate(byteCount: capacity, alignment: 8)
        }
        guard let written = Base64URL.decode(text, into: storage) else {
            count = 0
            return false
        }
        count = written
        return true
    }
}
