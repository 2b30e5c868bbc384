import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

extension ReadStageTests {
    /// The byte-level JSON object scanner (docs/rules.md §2.1: escapes, unicode, nesting, duplicates, null).
    @Suite struct JSONLineScannerTests {
        enum Scanned: Equatable {
            case success([UInt8])
            case failure(String)
        }

        /// Scans `line` for the key `s` and returns its decoded string bytes, or the scan error.
        private func scanString(_ line: [UInt8]) -> Scanned {
            let scanner = JSONLineScanner(keys: ["s"])
            return line.withUnsafeBytes { p in
                guard scanner.scan(p) else { return .failure(scanner.error) }
                switch scanner.lastValues[0] {
                case .string(let s): return .success(Array(s))
                case let v: return .failure("not a string: \(v.typeName)")
                }
            }
        }

        private func scanString(_ line: String) -> Scanned { scanString(Array(line.utf8)) }

        /// What key "s" of `line` scans as: its type's name, or the scanner's error.
        private func scannedType(_ line: String) -> String {
            let scanner = JSONLineScanner(keys: ["s"])
            let ok = Array(line.utf8).withUnsafeBytes { scanner.scan($0) }
            return ok ? scanner.lastValues[0].typeName : "error: \(scanner.error)"
        }

        /// Strings are found through one mask per 64 bytes of the line: a string starting,
        /// ending or holding a special byte at every place around those boundaries reads
        /// the same, and so does a line of exactly 64 or 128 bytes.
        @Test(arguments: ["plain", "esc\\\"aped", "gr\u{FC}\u{DF}e", "", "a"])
        func stringsReadTheSameAtEveryPlaceAroundTheMasksWords(value: String) {
            let encoded = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
                of: "\"", with: "\\\"")
            for pad in 0..<140 {
                let line = #"{"p":""# + String(repeating: "x", count: pad) + #"","s":""# + encoded + #"","t":1}"#
                #expect(scanString(line) == .success(Array(value.utf8)), "padding \(pad)")
                // Unterminated at the end of the line: an error, never a read past it.
                let cut = #"{"p":""# + String(repeating: "x", count: pad) + #"","s":""# + encoded
                #expect(scanString(cut) != .success(Array(value.utf8)), "padding \(pad)")
            }
            for total in [64, 128] {
                let fixed = #"{"s":""# + encoded + #"","p":""#
                let pad = total - fixed.utf8.count - 2
                guard pad >= 0 else { continue }
                let line = fixed + String(repeating: "y", count: pad) + #""}"#
                #expect(line.utf8.count == total)
                #expect(scanString(line) == .success(Array(value.utf8)), "\(total) bytes")
            }
        }

        /// Keys are placed by a hash chosen per scanner: with many keys, short and long, and
        /// unknown keys that share a length and first eight bytes with known ones, each value
        /// lands under its own key.
        @Test func everyKeyIsFoundAmongManyAndLookalikesAreNot() throws {
            let keys = (0..<47).map { i in i % 3 == 0 ? "k\(i)" : i % 3 == 1 ? "originalKey\(i)" : "abcdefgh\(i)" }
            let scanner = JSONLineScanner(keys: keys)
            var rng = SplitMix64(seed: 7)
            var order = Array(keys.indices)
            for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, Int(rng.next() % UInt64(i + 1))) }
            var fields = order.map { #""\#(keys[$0])":\#($0)"# }
            // Same length and first eight bytes as known keys, or a known key's prefix.
            fields.insert(#""abcdefgh99":-1"#, at: 5)
            fields.insert(#""originalKex1":-2"#, at: 9)
            fields.insert(#""k":-3"#, at: 0)
            fields.append(#""abcdefgh":-4"#)
            let line = Array(("{" + fields.joined(separator: ",") + "}").utf8)
            let ok = line.withUnsafeBytes { scanner.scan($0) }
            try #require(ok, "\(scanner.error)")
            for (i, v) in scanner.lastValues.enumerated() {
                guard case .int(let x) = v else {
                    Issue.record("key \(keys[i]): \(v.typeName)")
                    continue
                }
                #expect(x == Int64(i), "key \(keys[i])")
            }
        }

        static let escapes: [(json: String, expected: String)] = [
            (#"{"s":"a\"b"}"#, "a\"b"),
            (#"{"s":"back\\slash"}"#, "back\\slash"),
            (#"{"s":"sl\/ash"}"#, "sl/ash"),
            (#"{"s":"line\nbreak\ttab\rcr\bbs\fff"}"#, "line\nbreak\ttab\rcr\u{08}bs\u{0C}ff"),
            (#"{"s":"\u0041\u00e9\u20AC"}"#, "Aé€"),
            (#"{"s":"smile \ud83d\ude00!"}"#, "smile 😀!"),
            (#"{"s":"\uD83D\uDE00"}"#, "😀"),
            (#"{"s":"raw Grüße 😀 東京"}"#, "raw Grüße 😀 東京"),
            (#"{"s":"mixed é\u00e9\"😀\\"}"#, "mixed éé\"😀\\"),
            (#"{"s":""}"#, ""),
            (#"{"s":"\u0000"}"#, "\u{0}"),
        ]

        @Test(arguments: escapes)
        func escapesAndUnicodeDecodeToUTF8(json: String, expected: String) {
            #expect(scanString(json) == .success(Array(expected.utf8)))
        }

        @Test func aLoneSurrogateEscapeBecomesTheReplacementCharacter() {
            #expect(scanString(#"{"s":"a\ud83db"}"#) == .success(Array("a\u{FFFD}b".utf8)))
            #expect(scanString(#"{"s":"\ude00"}"#) == .success(Array("\u{FFFD}".utf8)))
            #expect(scanString(#"{"s":"\ud83d\u0041"}"#) == .success(Array("\u{FFFD}A".utf8)))
        }

        @Test func keysAreMatchedAfterDecodingTheirEscapes() {
            #expect(scanString(#"{"\u0073":"escaped key"}"#) == .success(Array("escaped key".utf8)))
            #expect(scanString(#"{"s ":"x","s":"y"}"#) == .success(Array("y".utf8)))
        }

        @Test func nestedKeysWithTheSameNameAreNotTopLevelValues() {
            #expect(scanString(#"{"o":{"s":"inner"},"s":"outer","a":[{"s":"deep"}]}"#) == .success(Array("outer".utf8)))
            #expect(scannedType(#"{"o":{"s":"inner"}}"#) == "absent", "a nested key was taken for a top-level one")
        }

        @Test func lastOfARepeatedKeyWinsEvenWhenItIsNull() {
            #expect(scanString(#"{"s":"first","s":"second"}"#) == .success(Array("second".utf8)))
            #expect(scanString(#"{"s":"fir\u0073t","x":1,"s":"sec\u006fnd"}"#) == .success(Array("second".utf8)))
            #expect(scannedType(#"{"s":"value","s":null}"#) == "null")
        }

        @Test func valuesOfEveryKindAreReportedWithTheirType() {
            let scanner = JSONLineScanner(keys: ["i", "n", "t", "f", "z", "d", "e", "o", "a", "big"])
            let line =
                #"{"i":-42,"n":0,"t":true,"f":false,"z":null,"d":1.5,"e":1e3,"o":{"k":[1]},"a":[],"big":9223372036854775808}"#
            let ok = Array(line.utf8).withUnsafeBytes { scanner.scan($0) }
            #expect(ok, "\(scanner.error)")
            let v = scanner.lastValues
            guard case .int(-42) = v[0], case .int(0) = v[1], case .bool(true) = v[2], case .bool(false) = v[3],
                case .null = v[4]
            else {
                Issue.record("unexpected values: \(v.map(\.typeName))")
                return
            }
            #expect(v[5].typeName == "a number with a fraction or exponent")
            #expect(v[6].typeName == "a number with a fraction or exponent")
            #expect(v[7].typeName == "an object")
            #expect(v[8].typeName == "an array")
            #expect(v[9].typeName == "an integer that does not fit in 64 bits")
        }

        @Test func theInt64ExtremesAreIntegers() {
            let scanner = JSONLineScanner(keys: ["max", "min"])
            let ok = Array(#"{"max":9223372036854775807,"min":-9223372036854775808}"#.utf8).withUnsafeBytes {
                scanner.scan($0)
            }
            #expect(ok)
            guard case .int(Int64.max) = scanner.lastValues[0], case .int(Int64.min) = scanner.lastValues[1] else {
                Issue.record("got \(scanner.lastValues.map(\.typeName))")
                return
            }
        }

        /// Integers of every length from 1 to 20 digits, signed or not, with and without a
        /// leading zero, followed by every kind of byte that can end a number: the value
        /// read (eight digits at a time where they fit) is the number, or the line is not
        /// an integer exactly when Swift's own parser says so.
        @Test func integersOfEveryLengthReadAsTheirValue() {
            var rng = SplitMix64(seed: 9)
            let scanner = JSONLineScanner(keys: ["n"])
            for length in 1...20 {
                for _ in 0..<200 {
                    var digits = (0..<length).map { _ in UInt8(48 + rng.below(10)) }
                    if rng.below(4) != 0 && length > 1 { digits[0] = UInt8(49 + rng.below(9)) }
                    let text = (rng.below(3) == 0 ? "-" : "") + String(decoding: digits, as: UTF8.self)
                    let after = [",\"x\":1}", "}", " }", ".5}", "e3}"][rng.below(5)]
                    let line = Array("{\"n\":\(text)\(after)".utf8)
                    let ok = line.withUnsafeBytes { scanner.scan($0) }
                    let leadingZero = digits.count > 1 && digits[0] == 48
                    if leadingZero {
                        #expect(!ok, "\(text)")
                        continue
                    }
                    #expect(ok, "\(text)\(after)")
                    let integral = !after.hasPrefix(".") && !after.hasPrefix("e")
                    switch scanner.lastValues[0] {
                    case .int(let v): #expect(integral && Int64(text) == v, "\(text)")
                    case .other: #expect(!integral || Int64(text) == nil, "\(text)")
                    case let v: Issue.record("\(text): \(v.typeName)")
                    }
                }
            }
        }

        /// One scanner reads 4,000 lines whose keys come in a few orders (forward, reversed,
        /// with keys left out or added), with more distinct keys than it remembers, keys longer
        /// than it remembers, escaped keys, space around the colon, a key repeated, and keys
        /// that share a prefix or a length with a predicted one: every value is the line's own,
        /// as a fresh scanner reads it.
        @Test func keysPredictedFromEarlierLinesReadAsTheLineSays() {
            let looked = [
                "a", "type", "bundleIdX", "transactionId", "subscriptionGroupIdentifier", "k",
                "keyOfThirtyTwoBytesWithQuotes",
                "keyOfThirtyTwoBytesWithQuotes1",
            ]
            var pool =
                looked + ["b", "typ", "types", "bundleId", "transactionIdentifier", "subscriptionGroupIdentifieR"]
            pool += (0..<90).map { "unknown\($0)" }
            pool.append("aVeryLongKeyNameOfMoreThanThirtyTwoBytesInAll")
            var rng = SplitMix64(seed: 11)
            let scanner = JSONLineScanner(keys: looked)
            let orders = [
                Array(pool.prefix(20)), Array(pool.prefix(20).reversed()), Array(pool.shuffled(using: &rng).prefix(25)),
            ]
            var mismatches: [String] = []
            for lineNumber in 0..<4000 {
                var keys = orders[rng.below(orders.count)]
                // Leave some out, add some from anywhere in the pool.
                keys = keys.filter { _ in rng.below(10) != 0 }
                for _ in 0..<rng.below(3) { keys.insert(pool[rng.below(pool.count)], at: rng.below(keys.count + 1)) }
                var expected: [String: String] = [:]
                var parts: [String] = []
                for key in keys {
                    let value = rng.below(2) == 0 ? "\(rng.below(100_000_000_000))" : "\"v\(rng.below(1000))\""
                    var encodedKey = key
                    if rng.below(20) == 0 {
                        encodedKey = "\\u00" + String(key.utf8.first!, radix: 16) + key.dropFirst()
                    }
                    let colon = rng.below(15) == 0 ? " : " : ":"
                    parts.append("\"\(encodedKey)\"\(colon)\(value)")
                    expected[key] = value
                }
                let line = "{" + parts.joined(separator: ",") + "}"
                let ok = Array(line.utf8).withUnsafeBytes { scanner.scan($0) }
                guard ok else {
                    mismatches.append("line \(lineNumber) rejected: \(scanner.error)")
                    continue
                }
                for (i, key) in looked.enumerated() {
                    let got: String
                    switch scanner.lastValues[i] {
                    case .absent: got = "absent"
                    case .int(let v): got = "\(v)"
                    case .string(let b): got = "\"" + String(decoding: b, as: UTF8.self) + "\""
                    case let v: got = v.typeName
                    }
                    if got != (expected[key] ?? "absent") {
                        mismatches.append(
                            "line \(lineNumber) key \(key): \(got), expected \(expected[key] ?? "absent"): \(line)")
                    }
                }
            }
            #expect(mismatches.isEmpty, "\(mismatches.prefix(3))")
        }

        /// A predicted key is only taken when its bytes are all there: a line that ends inside
        /// it is an error, however the line before went.
        @Test func aLineCutInsideAPredictedKeyIsRejected() {
            let scanner = JSONLineScanner(keys: ["transactionId", "a"])
            let whole = #"{"transactionId":"1","a":2}"#
            for _ in 0..<3 { #expect(Array(whole.utf8).withUnsafeBytes { scanner.scan($0) }) }
            for cut in 1..<whole.utf8.count {
                let line = Array(whole.utf8.prefix(cut))
                #expect(!line.withUnsafeBytes { scanner.scan($0) }, "\(String(decoding: line, as: UTF8.self))")
                #expect(Array(whole.utf8).withUnsafeBytes { scanner.scan($0) })
            }
        }

        @Test func valuesFromAnEarlierLineDoNotLeakIntoTheNext() {
            let scanner = JSONLineScanner(keys: ["s", "i"])
            let first = Array(#"{"s":"a\"long\"escaped\"value","i":7}"#.utf8)
            let second = Array(#"{"x":1}"#.utf8)
            #expect(first.withUnsafeBytes { scanner.scan($0) })
            #expect(second.withUnsafeBytes { scanner.scan($0) })
            guard case .absent = scanner.lastValues[0], case .absent = scanner.lastValues[1] else {
                Issue.record("values of the previous line survived: \(scanner.lastValues.map(\.typeName))")
                return
            }
        }

        @Test func aLineLongerThanTheScratchBufferWithEscapesDecodes() {
            let payload = String(repeating: #"\u0041\n"#, count: 5000)
            let expected = String(repeating: "A\n", count: 5000)
            #expect(scanString(#"{"s":""# + payload + #""}"#) == .success(Array(expected.utf8)))
        }

        static let validObjects: [String] = [
            "{}",
            " \t{ \"s\" : \"v\" , \"n\" : [ 1 , -2 , 3.5e-7 , true , false , null , { } , [ ] ] } \t",
            #"{"a":{"b":{"c":{"d":[[[[]]]]}}}}"#,
            #"{"a":"}","b":"{","c":"]","d":"[","e":",","f":":"}"#,
            #"{"":""}"#,
            #"{"a":-0,"b":0.0,"c":1E+2,"d":1e-2,"e":-1.25E2}"#,
        ]

        @Test(arguments: validObjects)
        func validObjectsScan(line: String) {
            let scanner = JSONLineScanner(keys: ["s"])
            let ok = Array(line.utf8).withUnsafeBytes { scanner.scan($0) }
            #expect(ok, "\(scanner.error)")
        }

        static let invalid: [(String, [UInt8])] = [
            ("truncated object", Array(#"{"transactionId":"1""#.utf8)),
            ("truncated after comma", Array(#"{"a":1,"#.utf8)),
            ("truncated string", Array(#"{"a":"abc"#.utf8)),
            ("truncated escape", Array(#"{"a":"abc\"#.utf8)),
            ("trailing garbage", Array(#"{"a":1}x"#.utf8)),
            ("two objects", Array("{}{}".utf8)),
            ("unquoted key", Array("{a:1}".utf8)),
            ("single-quoted key", Array("{'a':1}".utf8)),
            ("missing colon", Array(#"{"a" 1}"#.utf8)),
            ("missing comma", Array(#"{"a":1 "b":2}"#.utf8)),
            ("trailing comma", Array(#"{"a":1,}"#.utf8)),
            ("trailing comma in array", Array(#"{"a":[1,]}"#.utf8)),
            ("trailing comma in nested object", Array(#"{"a":{"b":1,}}"#.utf8)),
            ("unclosed nested array", Array(#"{"a":[1,2}"#.utf8)),
            ("bad escape", Array(#"{"a":"\x"}"#.utf8)),
            ("bad escape in a used key", Array(#"{"s":"\q"}"#.utf8)),
            ("bad escape in a key", Array(#"{"\k":1}"#.utf8)),
            ("short unicode escape", Array(#"{"a":"\u12"}"#.utf8)),
            ("non-hex unicode escape", Array(#"{"a":"\u12G4"}"#.utf8)),
            ("bad low surrogate escape", Array(#"{"s":"\ud83d\uzzzz"}"#.utf8)),
            ("raw tab in string", Array("{\"a\":\"b\tc\"}".utf8)),
            ("raw newline in used string", Array("{\"s\":\"b\nc\"}".utf8)),
            ("raw NUL in string", [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0x00, 0x22, 0x7D]),
            ("invalid UTF-8 byte", Array(#"{"a":""#.utf8) + [0xFF] + Array(#""}"#.utf8)),
            ("lone continuation byte", Array(#"{"a":""#.utf8) + [0x80] + Array(#""}"#.utf8)),
            ("overlong encoding", Array(#"{"a":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)),
            ("overlong three-byte", Array(#"{"a":""#.utf8) + [0xE0, 0x80, 0xAF] + Array(#""}"#.utf8)),
            ("encoded surrogate", Array(#"{"s":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8)),
            ("beyond U+10FFFF", Array(#"{"a":""#.utf8) + [0xF4, 0x90, 0x80, 0x80] + Array(#""}"#.utf8)),
            ("cut multi-byte sequence", Array(#"{"a":""#.utf8) + [0xE2, 0x82] + Array(#""}"#.utf8)),
            ("multi-byte sequence cut by the line end", Array(#"{"a":""#.utf8) + [0xE2, 0x82]),
            ("invalid UTF-8 outside strings", Array(#"{"a":1"#.utf8) + [0xC3, 0xA9] + Array("}".utf8)),
            ("top-level array", Array(#"[{"a":1}]"#.utf8)),
            ("top-level string", Array(#""a""#.utf8)),
            ("top-level number", Array("42".utf8)),
            ("top-level null", Array("null".utf8)),
            ("leading zero", Array(#"{"a":01}"#.utf8)),
            ("plus sign", Array(#"{"a":+1}"#.utf8)),
            ("bare minus", Array(#"{"a":-}"#.utf8)),
            ("fraction without digits", Array(#"{"a":1.}"#.utf8)),
            ("leading dot", Array(#"{"a":.5}"#.utf8)),
            ("exponent without digits", Array(#"{"a":1e}"#.utf8)),
            ("NaN", Array(#"{"a":NaN}"#.utf8)),
            ("Infinity", Array(#"{"a":Infinity}"#.utf8)),
            ("misspelt true", Array(#"{"a":tru}"#.utf8)),
            ("misspelt null", Array(#"{"s":nul}"#.utf8)),
            ("capitalised literal", Array(#"{"a":True}"#.utf8)),
            ("missing value", Array(#"{"a":}"#.utf8)),
            ("byte-order mark", [0xEF, 0xBB, 0xBF] + Array("{}".utf8)),
            (
                "nesting too deep",
                Array((#"{"a":"# + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}").utf8)
            ),
        ]

        @Test(arguments: invalid)
        func invalidJSONIsRejected(what: String, line: [UInt8]) {
            let harness = DecodeHarness()
            guard case .rejected(let reason) = harness.decode(bytes: line) else {
                Issue.record("\(what): not rejected")
                return
            }
            #expect(reason.hasPrefix("invalid JSON"), "\(what): \(reason)")
            #expect(reason.contains("column"), "\(what): \(reason)")
        }

        @Test func anEmptyLineIsNotAnObject() {
            let scanner = JSONLineScanner(keys: ["s"])
            #expect(!scanner.scan(UnsafeRawBufferPointer(start: nil, count: 0)))
            #expect(![UInt8]().withUnsafeBytes { scanner.scan($0) })
            #expect(!Array("   ".utf8).withUnsafeBytes { scanner.scan($0) })
        }

        @Test func stringArraysAreReadWithTheirEscapes() {
            let raw = Array(#"["wb.a","w\u0062.b",""]"#.utf8)
            #expect(raw.withUnsafeBytes { JSONLineScanner.stringArray($0) } == ["wb.a", "wb.b", ""])
            #expect(Array("[]".utf8).withUnsafeBytes { JSONLineScanner.stringArray($0) } == [])
            #expect(Array(#"["a",1]"#.utf8).withUnsafeBytes { JSONLineScanner.stringArray($0) } == nil)
            #expect(Array(#"{"a":"b"}"#.utf8).withUnsafeBytes { JSONLineScanner.stringArray($0) } == nil)
            let quoted = Array(#"[ "x\"],", "\\" ]"#.utf8)
            #expect(quoted.withUnsafeBytes { JSONLineScanner.stringArray($0) } == [#"x"],"#, "\\"])
            #expect(Array(#"["a",["b"]]"#.utf8).withUnsafeBytes { JSONLineScanner.stringArray($0) } == nil)
        }

        /// The special bits by their definition, a byte at a time.
        private static func specialBits(_ bytes: [UInt8]) -> [UInt64] {
            var out = [UInt64](repeating: 0, count: (bytes.count + 63) / 64)
            for (i, c) in bytes.enumerated() where c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 {
                out[i / 64] |= 1 << UInt64(i % 64)
            }
            return out
        }

        /// Lines of every length up to five words and a bit, of bytes drawn mostly from those at
        /// the edges of the definition (quote, backslash, 0x1F, 0x20, 0x7F, 0x80, 0xFF).
        private static func edgyLines() -> [[UInt8]] {
            var rng = SplitMix64(seed: 17)
            let edges: [UInt8] = [0x22, 0x5C, 0x1F, 0x20, 0x21, 0x7F, 0x80, 0xFF, 0x00, 0x61]
            return (0...330).map { n in
                (0..<n).map { _ in
                    let r = rng.next()
                    return r % 3 == 0 ? UInt8(truncatingIfNeeded: r >> 8) : edges[Int(r >> 8) % edges.count]
                }
            }
        }

        private static func bits(_ bytes: [UInt8], avx2: Bool) -> [UInt64] {
            bytes.withUnsafeBytes { JSONLineScanner.specialBits($0, avx2: avx2) }
        }

        @Test("the bits that end a plain string: quotes, backslashes, controls, bytes from 0x80, at every length")
        func specialBitsMatchTheirDefinition() {
            for line in Self.edgyLines() {
                #expect(Self.bits(line, avx2: false) == Self.specialBits(line), "\(line.count) bytes")
            }
        }

        @Test(
            "AVX2 finds the same bits as SSE2",
            .enabled(if: JSONLineScanner.avx2 != 0, "this processor runs no AVX2 code: only the SSE2 path runs"))
        func avx2MatchesSSE2() {
            for line in Self.edgyLines() {
                #expect(Self.bits(line, avx2: true) == Self.specialBits(line), "\(line.count) bytes")
            }
        }
    }
}
