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
    /// Seeded random-mutation fuzzing of the line decoder and the gzip reader, for a fixed
    /// budget: no crash, no hang, and every outcome one of the expected kinds.
    /// `WINBACK_FUZZ_SCALE=N` multiplies the budget and `WINBACK_FUZZ_SEED` changes the seeds,
    /// for a longer hunt by hand; by default the run is fixed and repeatable.
    @Suite(.tags(.slow)) struct ReadFuzzTests {
        static let scale = ProcessInfo.processInfo.environment["WINBACK_FUZZ_SCALE"].flatMap { Int($0) } ?? 1
        static let seed = ProcessInfo.processInfo.environment["WINBACK_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x5EED_0000

        static let samples: [String] = [
            TxLine().json,
            TxLine(id: "2000000000000002", original: "2000000000000001", signed: nil)
                .with("offerType", "4").with("offerIdentifier", #""wb.pass.1m""#).with(
                    "offerDiscountType", #""FREE_TRIAL""#
                )
                .with("appAccountToken", #""7e3fb20b-4cdb-47cc-936d-99d65f608138""#).with("isUpgraded", "false")
                .with("revocationDate", "1701000000000").with("revocationReason", "0").json,
            #"{"note":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n","meta":{"a":[1,-2.5e-3,true,null,{"b":"}"}]},"transactionId":"10\u0030","originalTransactionId":"o\u002e1","subscriptionGroupIdentifier":"g","productId":"p","purchaseDate":0,"expiresDate":9223372036854775807,"storefront":"JPN","environment":"Sandbox"}"#,
            #"{"type":"Non-Renewing Subscription","transactionId":"n1","price":1990,"currency":"EUR"}"#,
            #"{ "transactionId" : "a" , "transactionId" : null , "productId" : "Grüße" , "x" : [ [ [ ] ] ] }"#,
        ]

        static let tokens: [[UInt8]] =
            [
                "{", "}", "[", "]", "\"", "\\", "\\u", "\\ud83d", "\\ude00", "\\u00", ":", ",", "null", "true", "-",
                "1e",
                "0.", "99999999999999999999", "\"transactionId\":", "\"purchaseDate\":", " ", "\r", "\n", "\t",
            ].map { Array($0.utf8) } + [
                [0x00], [0x80], [0xC3], [0xED, 0xA0, 0x80], [0xF4, 0x90], [0xFF], [0xE2, 0x82, 0xAC],
            ]

        static func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
            var b = input
            for _ in 0..<(1 + rng.below(4)) {
                switch rng.below(8) {
                case 0 where !b.isEmpty:  // flip bits of one byte
                    b[rng.below(b.count)] ^= UInt8(truncatingIfNeeded: 1 + rng.below(255))
                case 1 where !b.isEmpty:  // truncate
                    b.removeLast(rng.below(b.count) + 1)
                case 2:  // insert a token
                    b.insert(contentsOf: tokens[rng.below(tokens.count)], at: rng.below(b.count + 1))
                case 3 where b.count > 1:  // delete a range
                    let s = rng.below(b.count)
                    b.removeSubrange(s..<min(b.count, s + 1 + rng.below(8)))
                case 4 where !b.isEmpty:  // duplicate a range
                    let s = rng.below(b.count)
                    let piece = b[s..<min(b.count, s + 1 + rng.below(40))]
                    b.insert(contentsOf: piece, at: rng.below(b.count + 1))
                case 5 where !b.isEmpty:  // overwrite with a random byte
                    b[rng.below(b.count)] = UInt8(truncatingIfNeeded: rng.next())
                case 6:  // splice with another sample
                    let other = Array(samples[rng.below(samples.count)].utf8)
                    let cut = rng.below(b.count + 1)
                    b = Array(b[0..<cut]) + other[rng.below(other.count)...]
                default:  // swap two bytes
                    if b.count > 1 { b.swapAt(rng.below(b.count), rng.below(b.count)) }
                }
            }
            return b
        }

        /// An outcome written out with strings, so decoders with different tables compare.
        static func describe(_ o: TransactionDecoder.Outcome, _ table: StringTable) -> String {
            func s(_ id: Int32) -> String { id == Transaction.none ? "-" : table.string(id) }
            switch o {
            case .nonSubscription: return "nonSubscription"
            case .rejected(let why): return "rejected: \(why)"
            case .row(let t):
                return [
                    table.string(t.transactionId), table.string(t.originalTransactionId), s(t.subscriptionGroupId),
                    s(t.productId),
                    "\(t.purchaseDate)", "\(t.expiresDate)", "\(t.signedDate)", "\(t.revocationDate)", "\(t.offerType)",
                    s(t.offerIdentifier), s(t.offerDiscountType), s(t.storefront),
                    t.appAccountToken.string(in: table) ?? "-",
                    "\(t.ownership)",
                    "\(t.production)", "\(t.isUpgraded)", "\(t.isFreeTrial)",
                ].joined(separator: "|")
            }
        }

        @Test func mutatedLinesNeverCrashTheDecoder() {
            var rng = SplitMix64(seed: Self.seed + 1)
            let shared = DecodeHarness()
            var counts = (row: 0, nonSubscription: 0, rejected: 0, invalidJSON: 0)
            let iterations = 20_000 * Self.scale
            for i in 0..<iterations {
                let line = Self.mutate(Array(Self.samples[i % Self.samples.count].utf8), &rng)
                let outcome = shared.decode(bytes: line)
                switch outcome {
                case .row(let t):
                    counts.row += 1
                    #expect(Identifier.isValid(shared.table.string(t.transactionId)), "line \(i)")
                    #expect(Identifier.isValid(shared.table.string(t.originalTransactionId)), "line \(i)")
                    for id in [t.subscriptionGroupId, t.productId] {
                        #expect(Identifier.isValid(shared.table.string(id)), "line \(i)")
                    }
                    #expect(t.expiresDate >= t.purchaseDate)
                case .nonSubscription:
                    counts.nonSubscription += 1
                case .rejected(let why):
                    counts.rejected += 1
                    if why.hasPrefix("invalid JSON") { counts.invalidJSON += 1 }
                    #expect(!why.isEmpty)
                }
                // A decoder that has seen other lines answers like a fresh one.
                if i % 10 == 0 {
                    let fresh = DecodeHarness()
                    #expect(
                        Self.describe(outcome, shared.table) == Self.describe(fresh.decode(bytes: line), fresh.table),
                        "line \(i): \(String(decoding: line, as: UTF8.self))")
                }
            }
            #expect(counts.row + counts.nonSubscription + counts.rejected == iterations)
            // The mutations reach every outcome, so the budget is not spent on one path.
            #expect(counts.row > 100)
            #expect(counts.nonSubscription > 100)
            #expect(counts.invalidJSON > 1000)
            #expect(counts.rejected - counts.invalidJSON > 100)
        }

        /// Whether an accepted line holds a `\uD800`–`\uDFFF` escape not part of a pair: valid
        /// JSON text by RFC 8259's grammar, which the scanner reads as U+FFFD and Foundation refuses.
        static func hasLoneSurrogateEscape(_ b: [UInt8]) -> Bool {
            func hex4(_ at: Int) -> Int? {
                guard at + 4 <= b.count else { return nil }
                return Int(String(decoding: b[at..<(at + 4)], as: UTF8.self), radix: 16)
            }
            var i = 0
            while i < b.count {
                guard b[i] == UInt8(ascii: "\\"), i + 1 < b.count else {
                    i += 1
                    continue
                }
                guard b[i + 1] == UInt8(ascii: "u"), let v = hex4(i + 2) else {
                    i += 2
                    continue
                }
                if (0xDC00..<0xE000).contains(v) { return true }
                if (0xD800..<0xDC00).contains(v) {
                    guard i + 8 < b.count, b[i + 6] == UInt8(ascii: "\\"), b[i + 7] == UInt8(ascii: "u"),
                        let low = hex4(i + 8), (0xDC00..<0xE000).contains(low)
                    else { return true }
                    i += 12
                    continue
                }
                i += 6
            }
            return false
        }

        /// Whether a line holds a number with an exponent beyond Double's range: valid JSON text,
        /// which Foundation refuses.
        static func hasHugeExponent(_ b: [UInt8]) -> Bool {
            let text = String(decoding: b, as: UTF8.self)
            return text.matches(of: #/[0-9](\.[0-9]+)?[eE][+-]?[0-9]+/#).contains { m in
                let digits = text[m.range].drop { $0 != "e" && $0 != "E" }.dropFirst()
                return Double("1e" + digits).map { !$0.isFinite || $0 == 0 } ?? true
            }
        }

        /// Whether a line has a comma right before a closing bracket (outside strings, most
        /// likely): invalid JSON, which Foundation accepts.
        static func hasTrailingComma(_ b: [UInt8]) -> Bool {
            String(decoding: b, as: UTF8.self).contains(#/,[ \t\r\n]*[}\]]/#)
        }

        /// The scanner's verdict on a mutated line agrees with Foundation's JSON parser, except
        /// where Foundation is knowingly laxer or stricter than RFC 8259: lone surrogate escapes
        /// and out-of-range exponents (valid, refused by Foundation), trailing commas (invalid,
        /// accepted by Foundation).
        @Test func theScannerAgreesWithFoundationOnValidity() {
            var rng = SplitMix64(seed: Self.seed + 2)
            let scanner = JSONLineScanner(keys: ["transactionId", "note"])
            var disagreements: [String] = []
            var knownDifferences = 0
            for i in 0..<(20_000 * Self.scale) {
                let line = Self.mutate(Array(Self.samples[i % Self.samples.count].utf8), &rng)
                let ours = line.withUnsafeBytes { scanner.scan($0) }
                let theirs = (try? JSONSerialization.jsonObject(with: Data(line))) is [String: Any]
                if ours && !theirs && (Self.hasLoneSurrogateEscape(line) || Self.hasHugeExponent(line)) {
                    knownDifferences += 1
                } else if !ours && theirs && Self.hasTrailingComma(line) {
                    knownDifferences += 1
                } else if ours != theirs {
                    disagreements.append(
                        "\(ours ? "accepted" : "rejected (\(scanner.error))"): \(String(decoding: line, as: UTF8.self))"
                    )
                }
            }
            #expect(knownDifferences < 2_000 * Self.scale)
            #expect(
                disagreements.isEmpty, "\(disagreements.count): \(disagreements.prefix(10).joined(separator: "\n"))")
        }

        @Test(.timeLimit(.minutes(10)))
        func mutatedGzipFilesReadOrFailAsBadData() throws {
            try ReadSupport.withTempDir { dir in
                var rng = SplitMix64(seed: Self.seed + 3)
                let text = Self.samples.joined(separator: "\r\n") + "\n\n" + Self.samples.joined(separator: "\n")
                let half = text.utf8.count / 2
                let valid =
                    ReadSupport.gzip(Array(text.utf8.prefix(half)))
                    + ReadSupport.gzip(Array(text.utf8.dropFirst(half)), level: 1)
                var (read, failed) = (0, 0)
                for i in 0..<(300 * Self.scale) {
                    var b = valid
                    switch rng.below(4) {
                    case 0:  // a few flipped bytes
                        for _ in 0..<(1 + rng.below(4)) {
                            b[rng.below(b.count)] ^= UInt8(truncatingIfNeeded: 1 + rng.below(255))
                        }
                    case 1:  // truncated
                        b.removeLast(1 + rng.below(b.count))
                    case 2:  // bytes inserted
                        b.insert(
                            contentsOf: (0..<(1 + rng.below(8))).map { _ in UInt8(truncatingIfNeeded: rng.next()) },
                            at: rng.below(b.count + 1))
                    default:  // a range removed or repeated
                        let s = rng.below(b.count)
                        let piece = b[s..<min(b.count, s + 1 + rng.below(30))]
                        if rng.below(2) == 0 {
                            b.removeSubrange(piece.indices)
                        } else {
                            b.insert(contentsOf: piece, at: s)
                        }
                    }
                    let path = try ReadSupport.write(b, to: dir.appendingPathComponent("m\(i).jsonl.gz"))
                    do {
                        var lines = 0
                        try LineCursor(source: try openSource(path: path), chunkSize: 64).forEachLine { _, _ in
                            lines += 1
                        }
                        let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), threads: 1)
                        #expect(set.counters.rowsRead <= lines)
                        read += 1
                    } catch let e as WinBackError {
                        #expect(e.code == .badData, "mutant \(i): \(e)")
                        #expect(e.path == path)
                        failed += 1
                    }
                    try FileManager.default.removeItem(atPath: path)
                }
                #expect(read + failed == 300 * Self.scale)
                #expect(failed > 150 * Self.scale)
            }
        }
    }
}
