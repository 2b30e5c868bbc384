import CWinBackShims
import Foundation
import WinBackModel
import WinBackSupport

/// A value found for one of the keys a ``JSONLineScanner`` looks for.
///
/// Trivial (no reference-counted payload): a row's values are reset and copied per line.
enum ScannedValue {
    case absent
    case null
    case string(UnsafeRawBufferPointer)
    case int(Int64)
    case bool(Bool)
    /// Any other value (a number with a fraction, an object, an array, or a CSV cell that does
    /// not parse as the field's type), with its raw bytes.
    case other(kind: OtherKind, raw: UnsafeRawBufferPointer)

    enum OtherKind {
        case object, array, fraction, bigInteger
        /// CSV cells: the text did not parse as the field's type.
        case notInteger, notBoolean, notDate
    }

    var typeName: String {
        switch self {
        case .absent: return "absent"
        case .null: return "null"
        case .string: return "a string"
        case .int: return "an integer"
        case .bool: return "a boolean"
        case .other(let kind, let raw):
            let text = "'\(ControlEscape.escaped(String(decoding: raw.prefix(30), as: UTF8.self)))'"
            switch kind {
            case .object: return "an object"
            case .array: return "an array"
            case .fraction: return "a number with a fraction or exponent"
            case .bigInteger: return "an integer that does not fit in 64 bits"
            case .notInteger: return text + ", not an integer"
            case .notBoolean: return text + ", not true or false"
            case .notDate: return text + ", not a date"
            }
        }
    }
}

/// Scans one line holding a JSON object for a fixed set of top-level keys, from bytes.
///
/// The whole line is validated as JSON (nested values of keys not looked for are checked and
/// skipped); the values of the keys looked for are kept as slices of the line, or of a scratch
/// buffer when a string had escapes. No String is made per field. A key given twice: the last
/// wins. Slices stay valid until the next `scan`.
final class JSONLineScanner {
    /// The keys' bytes, one after another (no per-key array to retain in the hot loop).
    private let keyBytes: UnsafeMutableRawPointer
    /// A key looked for, in its slot of ``slots``: its length, first and last (up to) eight
    /// bytes, so that keys of up to sixteen bytes are matched without comparing more.
    private struct Slot {
        var index: Int32 = -1
        var count: Int32 = 0
        var start: Int32 = 0
        var prefix: UInt64 = 0
        var suffix: UInt64 = 0
    }
    /// 128 slots placed by ``bucket(count:prefix:multiplier:)``; index -1 when empty.
    private let slots: UnsafeMutablePointer<Slot>
    /// The hash multiplier, chosen so that each key has a slot of its own: a key looked
    /// for is then found at the first probe.
    private let multiplier: UInt64
    /// The values of the last scan, indexed like the keys.
    private let slotsOfValues: UnsafeMutablePointer<ScannedValue>
    private let valueCount: Int
    /// The values of the last scan, in the scanner's own storage: valid until the next scan.
    var lastValues: UnsafeBufferPointer<ScannedValue> { UnsafeBufferPointer(start: slotsOfValues, count: valueCount) }
    /// Keys seen plain (`"name":`, no escape, nothing between the quote and the colon), up to
    /// ``maxKnown`` of them: per key, five words (its bytes from the opening quote to the colon
    /// in the first four, zero-padded, and its last eight bytes), its length and the index of
    /// the key it is (-1 when not looked for).
    private let knownWords: UnsafeMutablePointer<UInt64>
    private let knownLength: UnsafeMutablePointer<Int32>
    private let knownIndex: UnsafeMutablePointer<Int32>
    @exclusivity(unchecked) private var knownCount = 0
    /// Per known key, up to ``ways`` different known keys seen to follow it, in the order they
    /// were first seen; entry ``maxKnown`` stands for the start of a line. -1 when none.
    /// Several, because exports write some lines' keys in another order (e.g. reversed) than
    /// others', and leave out optional keys.
    private let successor: UnsafeMutablePointer<Int8>
    static let ways = 4
    static let maxKnown = 64
    @exclusivity(unchecked) private var scratch: UnsafeMutableRawBufferPointer
    @exclusivity(unchecked) private var scratchUsed = 0
    /// Per 64 bytes of the line, which end a plain string (see `winback_special_bits_with`):
    /// found for the whole line at once, so finding a string's end takes no loop.
    @exclusivity(unchecked) private var specials: UnsafeMutablePointer<UInt64>
    @exclusivity(unchecked) private var specialsCapacity = 0
    /// Whether the special bits are found with AVX2 (32 bytes a step) rather than SSE2 (16):
    /// asked of the processor once per process; the bits are the same either way.
    static let avx2: Int32 = winback_cpu_has_avx2()
    private let avx2 = JSONLineScanner.avx2

    /// The special bits of `bytes`, as ``scan(_:)`` finds them, with AVX2 or without (tests
    /// hold both paths to the definition).
    static func specialBits(_ bytes: UnsafeRawBufferPointer, avx2: Bool) -> [UInt64] {
        [UInt64](unsafeUninitializedCapacity: (bytes.count + 63) / 64) { out, n in
            winback_special_bits_with(
                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, out.baseAddress, avx2 ? 1 : 0)
            n = out.count
        }
    }
    @exclusivity(unchecked) private var base: UnsafeRawPointer = UnsafeRawPointer(bitPattern: 1)!
    @exclusivity(unchecked) private var count = 0
    @exclusivity(unchecked) private var pos = 0
    /// Why the last line was not valid JSON.
    @exclusivity(unchecked) private(set) var error: String = ""

    init(keys: [String]) {
        let utf8 = keys.map { Array($0.utf8) }
        let flat = UnsafeMutableRawPointer.allocate(byteCount: max(1, utf8.reduce(0) { $0 + $1.count }), alignment: 8)
        var starts: [Int] = []
        var at = 0
        for k in utf8 {
            starts.append(at)
            k.withUnsafeBytes { if let b = $0.baseAddress { (flat + at).copyMemory(from: b, byteCount: k.count) } }
            at += k.count
        }
        keyBytes = flat
        let signatures = utf8.map { k in k.withUnsafeBytes { (k.count, JSONLineScanner.prefix($0)) } }
        precondition(keys.count < 48, "a scanner looks for a handful of keys")
        func place(_ multiplier: UInt64) -> (buckets: [Int8], probes: Int) {
            var buckets = [Int8](repeating: -1, count: 128)
            var probes = 0
            for (i, sig) in signatures.enumerated() {
                var b = JSONLineScanner.bucket(count: sig.0, prefix: sig.1, multiplier: multiplier)
                while buckets[b] >= 0 {
                    b = (b + 1) & 127
                    probes += 1
                }
                buckets[b] = Int8(i)
            }
            return (buckets, probes)
        }
        // Odd multipliers in turn until no two keys share a slot (a few tries for a dozen
        // keys); should none do, the last one with probing. Keys of the same length and first
        // eight bytes (`revocationDate`, `revocationType`) share a slot under any multiplier:
        // those probes are no reason to go on.
        var unavoidable = 0
        for (i, sig) in signatures.enumerated() {
            unavoidable += signatures[..<i].filter { $0.0 == sig.0 && $0.1 == sig.1 }.count
        }
        var m: UInt64 = 0x9E37_79B9_7F4A_7C15
        var placed = place(m)
        for seed in 1..<4096 where placed.probes > unavoidable {
            m = (0x9E37_79B9_7F4A_7C15 &+ UInt64(seed) &* 0x6A09_E667_F3BC_C909) | 1
            placed = place(m)
        }
        multiplier = m
        slots = .allocate(capacity: 128)
        slots.initialize(repeating: Slot(), count: 128)
        for (b, i) in placed.buckets.enumerated() where i >= 0 {
            let k = utf8[Int(i)]
            let suffix = k.withUnsafeBytes {
                k.count >= 8 ? $0.loadUnaligned(fromByteOffset: k.count - 8, as: UInt64.self) : 0
            }
            slots[b] = Slot(
                index: Int32(i), count: Int32(k.count), start: Int32(starts[Int(i)]), prefix: signatures[Int(i)].1,
                suffix: suffix)
        }
        valueCount = keys.count
        slotsOfValues = .allocate(capacity: max(1, keys.count))
        slotsOfValues.initialize(repeating: .absent, count: max(1, keys.count))
        knownWords = .allocate(capacity: 5 * JSONLineScanner.maxKnown)
        knownLength = .allocate(capacity: JSONLineScanner.maxKnown)
        knownIndex = .allocate(capacity: JSONLineScanner.maxKnown)
        successor = .allocate(capacity: JSONLineScanner.ways * (JSONLineScanner.maxKnown + 1))
        successor.initialize(repeating: -1, count: JSONLineScanner.ways * (JSONLineScanner.maxKnown + 1))
        scratch = .allocate(byteCount: 4096, alignment: 8)
        specialsCapacity = 64
        specials = .allocate(capacity: specialsCapacity)
    }

    deinit {
        specials.deallocate()
        scratch.deallocate()
        keyBytes.deallocate()
        slots.deallocate()
        slotsOfValues.deallocate()
        knownWords.deallocate()
        knownLength.deallocate()
        knownIndex.deallocate()
        successor.deallocate()
    }

    private struct Invalid: Error {}

    /// Calls `body` with the values of the last scan, indexed like the keys.
    @inline(__always)
    func withValues<R>(_ body: (UnsafeBufferPointer<ScannedValue>) -> R) -> R {
        body(lastValues)
    }

    /// Scans `line`; false when it is not a valid JSON object (see `error`).
    func scan(_ line: UnsafeRawBufferPointer) -> Bool {
        slotsOfValues.update(repeating: .absent, count: valueCount)
        guard let b = line.baseAddress else {
            error = "empty line"
            return false
        }
        base = b
        count = line.count
        pos = 0
        scratchUsed = 0
        if scratch.count < count {
            scratch.deallocate()
            scratch = .allocate(byteCount: count, alignment: 8)
        }
        let words = (count + 63) >> 6
        if specialsCapacity < words {
            specials.deallocate()
            specialsCapacity = words
            specials = .allocate(capacity: words)
        }
        winback_special_bits_with(b.assumingMemoryBound(to: UInt8.self), count, specials, avx2)
        do {
            skipWS()
            guard pos < count, byte(pos) == UInt8(ascii: "{") else {
                error = "expected a JSON object at column \(pos + 1)"
                return false
            }
            try parseTopObject()
            skipWS()
            if pos != count {
                error = "unexpected data after the object at column \(pos + 1)"
                return false
            }
            return true
        } catch {
            return false
        }
    }

    @inline(__always) private func byte(_ i: Int) -> UInt8 { base.load(fromByteOffset: i, as: UInt8.self) }

    @inline(__always) private func skipWS() {
        var p = pos
        while p < count {
            let c = byte(p)
            if Whitespace.contains(c) { p += 1 } else { break }
        }
        pos = p
    }

    private func fail(_ what: String) -> Invalid {
        error = "\(what) at column \(pos + 1)"
        return Invalid()
    }

    /// The first (up to) eight bytes of `k`, little-endian, zero-padded.
    @inline(__always) static func prefix(_ k: UnsafeRawBufferPointer) -> UInt64 {
        if k.count >= 8 { return k.loadUnaligned(as: UInt64.self) }
        var v: UInt64 = 0
        for i in 0..<k.count { v |= UInt64(k[i]) << (8 * UInt64(i)) }
        return v
    }

    /// Open-addressing slot of a key's signature in ``buckets``.
    @inline(__always) private static func bucket(count: Int, prefix: UInt64, multiplier: UInt64) -> Int {
        Int(truncatingIfNeeded: ((prefix ^ UInt64(count)) &* multiplier) >> 57)
    }

    /// The index of key `k`, whose ``prefix(_:)`` is `p`, or -1.
    @inline(__always) private func keyIndex(_ k: UnsafeRawBufferPointer, prefix p: UInt64) -> Int {
        var b = JSONLineScanner.bucket(count: k.count, prefix: p, multiplier: multiplier)
        while true {
            let slot = slots[b]
            if slot.index < 0 { return -1 }
            if Int(slot.count) == k.count && slot.prefix == p {
                if k.count <= 8 { return Int(slot.index) }
                if k.loadUnaligned(fromByteOffset: k.count - 8, as: UInt64.self) == slot.suffix
                    && (k.count <= 16
                        || StringTable.same(keyBytes + Int(slot.start) + 8, k.baseAddress! + 8, k.count - 16))
                {
                    return Int(slot.index)
                }
            }
            b = (b + 1) & 127
        }
    }

    /// Whether the bytes at `p` (of a line of `n` bytes) are those of known key `e`.
    @inline(__always) private func matches(_ e: Int, at p: Int, _ n: Int) -> Bool {
        let length = Int(knownLength[e])
        let words = knownWords + 5 &* e
        if length >= 8 {
            guard p &+ length <= n else { return false }
            var o = 0
            while o &+ 8 < length {
                if base.loadUnaligned(fromByteOffset: p &+ o, as: UInt64.self) != words[o >> 3] { return false }
                o &+= 8
            }
            return base.loadUnaligned(fromByteOffset: p &+ length &- 8, as: UInt64.self) == words[4]
        }
        guard p &+ 8 <= n else { return false }
        let mask: UInt64 = (1 &<< UInt64(8 &* length)) &- 1
        return base.loadUnaligned(fromByteOffset: p, as: UInt64.self) & mask == words[0]
    }

    /// The known key of the `length` bytes at `start` (a plain key from its opening quote to
    /// the colon), remembered now if new and there is room; -1 when it cannot be.
    private func known(start: Int, length: Int, index: Int) -> Int {
        guard length <= 32 else { return -1 }
        // The first four words of a known key are its bytes, in order.
        for e in 0..<knownCount
        where Int(knownLength[e]) == length && StringTable.same(knownWords + 5 * e, base + start, length) {
            return e
        }
        guard knownCount < JSONLineScanner.maxKnown else { return -1 }
        let e = knownCount
        let words = knownWords + 5 * e
        for w in 0..<4 {
            var v: UInt64 = 0
            for i in 0..<8 where 8 * w + i < length {
                v |= UInt64(base.load(fromByteOffset: start + 8 * w + i, as: UInt8.self)) << UInt64(8 * i)
            }
            words[w] = v
        }
        words[4] = length >= 8 ? base.loadUnaligned(fromByteOffset: start + length - 8, as: UInt64.self) : 0
        knownLength[e] = Int32(length)
        knownIndex[e] = Int32(index)
        knownCount += 1
        return e
    }

    /// The top-level object, on a local cursor. The common shapes of an export line (keys and
    /// string values of printable ASCII without escapes, integers of up to 18 digits without a
    /// leading zero) are read here in one pass (``plainValue(at:key:_:)``); any other value, or a
    /// string with an escape or multi-byte UTF-8, is handed to the general parser
    /// (``generalValue(at:key:)``: ``parseValue()``, ``skipValue(depth:)``, ``parseString()``) at
    /// the same position, so every byte of the line is validated.
    ///
    /// Keys are predicted: the lines of an export repeat their keys in much the same order, so
    /// each key is expected to be followed by the key that followed it last time. When the
    /// bytes at the cursor are exactly that key's, quotes and colon included, its index is
    /// known without reading it again (``predictedKey(at:after:way:_:)``); any other key is read
    /// in full (``readKey(at:_:)``), and becomes the prediction (``learn(_:after:way:)``).
    private func parseTopObject() throws {
        let line = Line(
            bytes: base.assumingMemoryBound(to: UInt8.self), count: count, specials: specials,
            words: (count &+ 63) >> 6)
        var p = line.spaces(pos &+ 1)  // after {
        if p < line.count && line.bytes[p] == UInt8(ascii: "}") {
            pos = p &+ 1
            return
        }
        var previous = JSONLineScanner.maxKnown  // the start of the line
        var way = 0
        while true {
            p = line.spaces(p)
            let k: Int
            let guess = previous >= 0 ? predictedKey(at: p, after: previous, way: &way, line.count) : -1
            if guess >= 0 {
                k = Int(knownIndex[guess])
                p &+= Int(knownLength[guess])
                previous = guess
            } else {
                let key = try readKey(at: p, line)
                if previous >= 0 && key.known >= 0 { learn(key.known, after: previous, way: &way) }
                k = key.index
                previous = key.known
                p = key.end
            }
            p = line.spaces(p)
            guard p < line.count else {
                pos = p
                throw fail("expected a value")
            }
            let end = plainValue(at: p, key: k, line)
            p = end >= 0 ? end : try generalValue(at: p, key: k)
            p = line.spaces(p)
            guard p < line.count else {
                pos = p
                throw fail("unterminated object")
            }
            let d = line.bytes[p]
            p &+= 1
            if d == UInt8(ascii: "}") {
                pos = p
                return
            }
            if d != UInt8(ascii: ",") {
                pos = p &- 1
                throw fail("expected ',' or '}'")
            }
        }
    }

    /// The line being scanned by ``parseTopObject()``, in values a step can keep in registers.
    private struct Line {
        let bytes: UnsafePointer<UInt8>
        let count: Int
        /// The line's special bits (see ``JSONLineScanner/specials``) and their number of words.
        let specials: UnsafeMutablePointer<UInt64>
        let words: Int

        /// The first index at or after `p` that is not white space. One comparison for the bytes
        /// that follow a token in an export line, which are never white space.
        @inline(__always) func spaces(_ p: Int) -> Int {
            var p = p
            while p < count, Whitespace.contains(bytes[p]) {
                p &+= 1
            }
            return p
        }

        /// The end of a plain string whose content starts at `from`: the index of its closing
        /// quote, or -1 when it has a special byte before (escape, control, non-ASCII) or none.
        @inline(__always) func plainEnd(_ from: Int) -> Int {
            guard from < count else { return -1 }
            var w = from >> 6
            let m = specials[w] >> UInt64(from & 63)
            let q: Int
            if m != 0 {
                q = from &+ m.trailingZeroBitCount
            } else {
                w &+= 1
                while w < words && specials[w] == 0 { w &+= 1 }
                guard w < words else { return -1 }
                q = w << 6 &+ specials[w].trailingZeroBitCount
            }
            return bytes[q] == 0x22 ? q : -1
        }

        /// The integer at `p` when it is plain, `-?[1-9][0-9]{0,17}` not followed by a digit,
        /// '.', 'e' or 'E': its value and the index past it; nil for any other number.
        @inline(always) func plainInteger(at p: Int) -> (value: Int64, end: Int)? {
            let negative = bytes[p] == UInt8(ascii: "-")
            var q = negative ? p &+ 1 : p
            guard q < count, bytes[q] >= 0x31, bytes[q] <= 0x39 else { return nil }
            let first = q
            var v: Int64 = 0
            // Up to sixteen digits a word at a time, any rest one by one.
            if q &+ 8 <= count {
                let (digits, value) = Digits.leading(UnsafeRawPointer(bytes + q).loadUnaligned(as: UInt64.self))
                v = Int64(value)
                q &+= digits
                if digits == 8, q &+ 8 <= count {
                    let (more, rest) = Digits.leading(UnsafeRawPointer(bytes + q).loadUnaligned(as: UInt64.self))
                    v = v &* Int64(Digits.power(more)) &+ Int64(rest)
                    q &+= more
                }
            }
            while q < count, q &- first < 18, case let d = bytes[q] &- 0x30, d < 10 {
                v = v &* 10 &+ Int64(d)
                q &+= 1
            }
            let next = q < count ? bytes[q] : 0x20
            if next &- 0x30 < 10 || next == UInt8(ascii: ".") || next | 0x20 == UInt8(ascii: "e") { return nil }
            return (negative ? -v : v, q)
        }
    }

    /// The known key that the bytes at `p` are, among those seen to follow known key `previous`
    /// (the start of a line: ``maxKnown``), or -1. The way that held the last key is tried
    /// first, since a line's keys follow one order; `way` becomes the one that matched.
    @inline(__always)
    private func predictedKey(at p: Int, after previous: Int, way: inout Int, _ n: Int) -> Int {
        let ways = successor + JSONLineScanner.ways &* previous
        let e = Int(ways[way])
        if e >= 0 && matches(e, at: p, n) { return e }
        for w in 0..<JSONLineScanner.ways where w != way {
            let e = Int(ways[w])
            if e >= 0 && matches(e, at: p, n) {
                way = w
                return e
            }
        }
        return -1
    }

    /// A key not predicted, read in full from its opening quote at `start` to past its colon:
    /// its index among the keys looked for (-1 when it is not one), the known key it is (-1
    /// when it cannot be one: see ``known(start:length:index:)``) and the index past the colon.
    private func readKey(at start: Int, _ line: Line) throws -> (index: Int, known: Int, end: Int) {
        let n = line.count
        guard start < n, line.bytes[start] == 0x22 else {
            pos = start
            throw fail("expected a key string")
        }
        var p: Int
        let key: UnsafeRawBufferPointer
        let keyPrefix: UInt64
        let keyEnd = line.plainEnd(start &+ 1)
        if keyEnd >= 0 {
            key = UnsafeRawBufferPointer(start: base + (start &+ 1), count: keyEnd &- start &- 1)
            if start &+ 9 <= n {
                // Eight bytes at once, the bytes past a short key masked off.
                let w = (base + (start &+ 1)).loadUnaligned(as: UInt64.self)
                keyPrefix = key.count >= 8 ? w : w & ((1 &<< UInt64(8 &* key.count)) &- 1)
            } else {
                keyPrefix = JSONLineScanner.prefix(key)
            }
            p = keyEnd &+ 1
        } else {
            pos = start
            key = try parseString()
            keyPrefix = JSONLineScanner.prefix(key)
            p = pos
        }
        let afterKey = p
        p = line.spaces(p)
        guard p < n, line.bytes[p] == UInt8(ascii: ":") else {
            pos = p
            throw fail("expected ':'")
        }
        p &+= 1
        let index = key.count > 0 ? keyIndex(key, prefix: keyPrefix) : -1
        let current =
            keyEnd >= 0 && afterKey == p &- 1 && key.count > 0
            ? known(start: start, length: p &- start, index: index) : -1
        return (index, current, p)
    }

    /// Remembers known key `current` as one that follows known key `previous`: into the first
    /// free way, or else the last, so that ways keep the orders in which they were learnt and
    /// one way tends to hold one order for all keys. `way` becomes the one written.
    @inline(__always)
    private func learn(_ current: Int, after previous: Int, way: inout Int) {
        let ways = successor + JSONLineScanner.ways * previous
        way = JSONLineScanner.ways - 1
        for w in 0..<JSONLineScanner.ways where ways[w] < 0 {
            way = w
            break
        }
        ways[way] = Int8(current)
    }

    /// The value at `p` (not white space) when it is a plain string or integer, kept in slot `k`
    /// when it is a key looked for (`k` ≥ 0): the index past it, or -1 for any other value (for
    /// ``generalValue(at:key:)``).
    ///
    /// `@inline(always)`, not `@inline(__always)`: with the latter the optimizer left this a
    /// call of its own from the loop, and a run took 1.6 % more instructions (callgrind).
    @inline(always)
    private func plainValue(at p: Int, key k: Int, _ line: Line) -> Int {
        let c = line.bytes[p]
        if c == 0x22 {
            let end = line.plainEnd(p &+ 1)
            if end >= 0 {
                if k >= 0 {
                    slotsOfValues[k] = .string(UnsafeRawBufferPointer(start: base + (p &+ 1), count: end &- p &- 1))
                }
                return end &+ 1
            }
        } else if c == UInt8(ascii: "-") || (c >= 0x31 && c <= 0x39), let integer = line.plainInteger(at: p) {
            if k >= 0 { slotsOfValues[k] = .int(integer.value) }
            return integer.end
        }
        return -1
    }

    /// Any value at `p` but a plain string or integer, by the general parser: kept in slot `k`
    /// when `k` ≥ 0, else validated and skipped. Returns the index past it.
    private func generalValue(at p: Int, key k: Int) throws -> Int {
        pos = p
        if k >= 0 { slotsOfValues[k] = try parseValue() } else { try skipValue(depth: 1) }
        return pos
    }

    private func parseValue() throws -> ScannedValue {
        guard pos < count else { throw fail("expected a value") }
        let start = pos
        switch byte(pos) {
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "{"):
            try skipValue(depth: 1)
            return .other(kind: .object, raw: UnsafeRawBufferPointer(start: base + start, count: pos - start))
        case UInt8(ascii: "["):
            try skipValue(depth: 1)
            return .other(kind: .array, raw: UnsafeRawBufferPointer(start: base + start, count: pos - start))
        default:
            throw fail("unexpected character")
        }
    }

    private func literal(_ word: StaticString) throws {
        let n = word.utf8CodeUnitCount
        guard pos + n <= count, memcmp(base + pos, word.utf8Start, n) == 0 else { throw fail("invalid literal") }
        pos += n
    }

    private func parseNumber() throws -> ScannedValue {
        let start = pos
        var negative = false
        if byte(pos) == UInt8(ascii: "-") {
            negative = true
            pos += 1
        }
        guard pos < count, byte(pos) >= 48, byte(pos) <= 57 else { throw fail("invalid number") }
        var value: Int64 = 0
        var overflow = false
        if byte(pos) == 48 {
            pos += 1
        } else {
            while pos < count, case let c = byte(pos), c >= 48, c <= 57 {
                let (m, o1) = value.multipliedReportingOverflow(by: 10)
                let (s, o2) =
                    negative ? m.subtractingReportingOverflow(Int64(c - 48)) : m.addingReportingOverflow(Int64(c - 48))
                overflow = overflow || o1 || o2
                value = s
                pos += 1
            }
        }
        var integral = true
        if pos < count && byte(pos) == UInt8(ascii: ".") {
            integral = false
            pos += 1
            guard pos < count, byte(pos) >= 48, byte(pos) <= 57 else { throw fail("invalid number") }
            while pos < count, byte(pos) >= 48, byte(pos) <= 57 { pos += 1 }
        }
        if pos < count && (byte(pos) == UInt8(ascii: "e") || byte(pos) == UInt8(ascii: "E")) {
            integral = false
            pos += 1
            if pos < count && (byte(pos) == UInt8(ascii: "+") || byte(pos) == UInt8(ascii: "-")) { pos += 1 }
            guard pos < count, byte(pos) >= 48, byte(pos) <= 57 else { throw fail("invalid number") }
            while pos < count, byte(pos) >= 48, byte(pos) <= 57 { pos += 1 }
        }
        let raw = UnsafeRawBufferPointer(start: base + start, count: pos - start)
        if !integral { return .other(kind: .fraction, raw: raw) }
        if overflow { return .other(kind: .bigInteger, raw: raw) }
        return .int(value)
    }

    /// One bit (the high bit of the byte) per byte of `w` (little-endian) that is special in a
    /// string: `"`, `\\`, a control character or a byte ≥ 0x80. The lowest set bit is exact: the
    /// borrow in each zero-byte test can only mark bytes above a true match.
    @inline(__always) static func specialMask(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let q = w ^ (ones &* 0x22)
        let b = w ^ (ones &* 0x5C)
        let quote = (q &- ones) & ~q
        let backslash = (b &- ones) & ~b
        let control = w &- (ones &* 0x20)
        return (quote | backslash | control | w) & high
    }

    /// The index of the first byte of `base[..<count]` at or after `from` that is special in a
    /// string (see ``specialMask(_:)``), or `count`: eight bytes per step, then one at a time.
    @inline(__always)
    private static func firstSpecial(_ base: UnsafeRawPointer, _ count: Int, _ from: Int) -> Int {
        var q = from
        while q + 8 <= count {
            let m = JSONLineScanner.specialMask(base.loadUnaligned(fromByteOffset: q, as: UInt64.self))
            if m != 0 { return q + m.trailingZeroBitCount >> 3 }
            q += 8
        }
        while q < count {
            let c = base.load(fromByteOffset: q, as: UInt8.self)
            if c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 { return q }
            q += 1
        }
        return count
    }

    /// Parses a string at `pos` (on its opening quote); returns its decoded bytes. The fast
    /// path stops at the quote, the backslash, control characters and the start of multi-byte
    /// UTF-8 (which is validated on the side).
    private func parseString() throws -> UnsafeRawBufferPointer {
        pos += 1
        let start = pos
        // Fast path: no escapes. A local cursor, eight bytes per step between special bytes:
        // this loop sees most bytes of every line.
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        do {
            var p = pos
            while true {
                p = JSONLineScanner.firstSpecial(base, count, p)
                guard p < count, bytes[p] >= 0x80 else { break }
                pos = p
                try skipUTF8()
                p = pos
            }
            pos = p
        }
        while pos < count {
            let c = byte(pos)
            if c == UInt8(ascii: "\"") {
                let s = UnsafeRawBufferPointer(start: base + start, count: pos - start)
                pos += 1
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("control character in string") }
            if c >= 0x80 { try skipUTF8() } else { pos += 1 }
        }
        guard pos < count else { throw fail("unterminated string") }
        // Slow path: decode into scratch.
        let out = scratch.baseAddress! + scratchUsed
        var n = pos - start
        out.copyMemory(from: base + start, byteCount: n)
        while pos < count {
            let c = byte(pos)
            if c == UInt8(ascii: "\"") {
                pos += 1
                scratchUsed += n
                return UnsafeRawBufferPointer(start: out, count: n)
            }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") {
                let s = pos
                if c >= 0x80 { try skipUTF8() } else { pos += 1 }
                (out + n).copyMemory(from: base + s, byteCount: pos - s)
                n += pos - s
                continue
            }
            pos += 1
            guard pos < count else { throw fail("unterminated escape") }
            let e = byte(pos)
            pos += 1
            var decoded: UInt8 = 0
            switch e {
            case UInt8(ascii: "\""): decoded = 0x22
            case UInt8(ascii: "\\"): decoded = 0x5C
            case UInt8(ascii: "/"): decoded = 0x2F
            case UInt8(ascii: "b"): decoded = 0x08
            case UInt8(ascii: "f"): decoded = 0x0C
            case UInt8(ascii: "n"): decoded = 0x0A
            case UInt8(ascii: "r"): decoded = 0x0D
            case UInt8(ascii: "t"): decoded = 0x09
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    // A high surrogate: a low one should follow.
                    if pos + 6 <= count && byte(pos) == UInt8(ascii: "\\") && byte(pos + 1) == UInt8(ascii: "u") {
                        let save = pos
                        pos += 2
                        let low = try hex4()
                        if low >= 0xDC00 && low < 0xE000 {
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            pos = save
                            scalar = 0xFFFD
                        }
                    } else {
                        scalar = 0xFFFD
                    }
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    scalar = 0xFFFD
                }
                // UTF-8 of a scalar is never longer than the 6+ bytes of its escape.
                n += encodeUTF8(scalar, out + n)
                continue
            default:
                pos -= 1
                throw fail("invalid escape")
            }
            out.storeBytes(of: decoded, toByteOffset: n, as: UInt8.self)
            n += 1
        }
        throw fail("unterminated string")
    }

    private func hex4() throws -> UInt32 {
        guard pos + 4 <= count else { throw fail("invalid \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = byte(pos)
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 65...70: d = UInt32(c - 55)
            case 97...102: d = UInt32(c - 87)
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    private func encodeUTF8(_ s: UInt32, _ out: UnsafeMutableRawPointer) -> Int {
        if s < 0x80 {
            out.storeBytes(of: UInt8(s), as: UInt8.self)
            return 1
        } else if s < 0x800 {
            out.storeBytes(of: UInt8(0xC0 | (s >> 6)), as: UInt8.self)
            out.storeBytes(of: UInt8(0x80 | (s & 0x3F)), toByteOffset: 1, as: UInt8.self)
            return 2
        } else if s < 0x10000 {
            out.storeBytes(of: UInt8(0xE0 | (s >> 12)), as: UInt8.self)
            out.storeBytes(of: UInt8(0x80 | ((s >> 6) & 0x3F)), toByteOffset: 1, as: UInt8.self)
            out.storeBytes(of: UInt8(0x80 | (s & 0x3F)), toByteOffset: 2, as: UInt8.self)
            return 3
        } else {
            out.storeBytes(of: UInt8(0xF0 | (s >> 18)), as: UInt8.self)
            out.storeBytes(of: UInt8(0x80 | ((s >> 12) & 0x3F)), toByteOffset: 1, as: UInt8.self)
            out.storeBytes(of: UInt8(0x80 | ((s >> 6) & 0x3F)), toByteOffset: 2, as: UInt8.self)
            out.storeBytes(of: UInt8(0x80 | (s & 0x3F)), toByteOffset: 3, as: UInt8.self)
            return 4
        }
    }

    /// Steps over one well-formed UTF-8 sequence at `pos`.
    private func skipUTF8() throws {
        let c = byte(pos)
        let need: Int
        var min: UInt32
        var v: UInt32
        switch c {
        case 0xC2...0xDF:
            need = 1
            min = 0x80
            v = UInt32(c & 0x1F)
        case 0xE0...0xEF:
            need = 2
            min = 0x800
            v = UInt32(c & 0x0F)
        case 0xF0...0xF4:
            need = 3
            min = 0x10000
            v = UInt32(c & 0x07)
        default: throw fail("invalid UTF-8")
        }
        guard pos + need < count else { throw fail("invalid UTF-8") }
        for k in 1...need {
            let d = byte(pos + k)
            guard d & 0xC0 == 0x80 else { throw fail("invalid UTF-8") }
            v = v << 6 | UInt32(d & 0x3F)
        }
        guard v >= min, v <= 0x10FFFF, !(v >= 0xD800 && v < 0xE000) else { throw fail("invalid UTF-8") }
        pos += need + 1
    }

    /// Validates and steps over any value.
    private func skipValue(depth: Int) throws {
        guard depth < 512 else { throw fail("nesting too deep") }
        guard pos < count else { throw fail("expected a value") }
        switch byte(pos) {
        case UInt8(ascii: "{"):
            pos += 1
            skipWS()
            if pos < count && byte(pos) == UInt8(ascii: "}") {
                pos += 1
                return
            }
            while true {
                skipWS()
                guard pos < count, byte(pos) == UInt8(ascii: "\"") else { throw fail("expected a key string") }
                _ = try parseStringNoDecode()
                skipWS()
                guard pos < count, byte(pos) == UInt8(ascii: ":") else { throw fail("expected ':'") }
                pos += 1
                skipWS()
                try skipValue(depth: depth + 1)
                skipWS()
                guard pos < count else { throw fail("unterminated object") }
                let c = byte(pos)
                pos += 1
                if c == UInt8(ascii: "}") { return }
                if c != UInt8(ascii: ",") {
                    pos -= 1
                    throw fail("expected ',' or '}'")
                }
            }
        case UInt8(ascii: "["):
            pos += 1
            skipWS()
            if pos < count && byte(pos) == UInt8(ascii: "]") {
                pos += 1
                return
            }
            while true {
                skipWS()
                try skipValue(depth: depth + 1)
                skipWS()
                guard pos < count else { throw fail("unterminated array") }
                let c = byte(pos)
                pos += 1
                if c == UInt8(ascii: "]") { return }
                if c != UInt8(ascii: ",") {
                    pos -= 1
                    throw fail("expected ',' or ']'")
                }
            }
        case UInt8(ascii: "\""):
            _ = try parseStringNoDecode()
        default:
            _ = try parseValue()
        }
    }

    /// Validates a string without keeping its decoded bytes.
    private func parseStringNoDecode() throws {
        let saved = scratchUsed
        _ = try parseString()
        scratchUsed = saved
    }

    /// The strings of a JSON array of strings (e.g. `eligibleWinBackOfferIds`), or nil.
    static func stringArray(_ raw: UnsafeRawBufferPointer) -> [String]? {
        JSONLineScanner(keys: []).stringArray(raw)
    }

    /// The strings of `raw`, a JSON array of strings (a value some scanner has validated; the
    /// values of this one's last line stay valid), or nil when it is something else. The
    /// elements are found by ``JSONArrayElements``; each string is decoded, escapes and all.
    func stringArray(_ raw: UnsafeRawBufferPointer) -> [String]? {
        guard raw.first == UInt8(ascii: "[") else { return nil }
        if scratchUsed + raw.count > scratch.count {
            // Only a fresh scanner can be short: decoded strings never outgrow their line.
            guard scratchUsed == 0 else { return nil }
            scratch.deallocate()
            scratch = .allocate(byteCount: raw.count, alignment: 8)
        }
        let saved = (base, count, pos, scratchUsed)
        defer { (base, count, pos, scratchUsed) = saved }
        var out: [String] = []
        var strings = true
        JSONArrayElements.forEach(raw) { e in
            guard strings else { return }
            guard let s = wholeString(e) else {
                strings = false
                return
            }
            out.append(String(decoding: s, as: UTF8.self))
            scratchUsed = saved.3
        }
        return strings ? out : nil
    }

    /// The decoded bytes of `e` when it is exactly one string, quotes included, or nil.
    private func wholeString(_ e: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let b = e.baseAddress, e.first == UInt8(ascii: "\"") else { return nil }
        base = b
        count = e.count
        pos = 0
        guard let s = try? parseString(), pos == count else { return nil }
        return s
    }
}

extension JSONArrayElements {
    /// Calls `body` with each element of `raw` (``forEach(in:_:)``) as a view of its bytes, valid
    /// while `raw` is.
    static func forEach(_ raw: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        forEach(in: raw.assumingMemoryBound(to: UInt8.self).span) { body(UnsafeRawBufferPointer(rebasing: raw[$0])) }
    }
}
