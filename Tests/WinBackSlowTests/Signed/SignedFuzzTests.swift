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

/// Seeded random mutations of signed lines, for a fixed budget: no crash, every rejection
/// names its step, and with verification on no mutation ever yields a transaction that was not
/// signed. `WINBACK_FUZZ_SCALE` and `WINBACK_FUZZ_SEED` work as for the read-stage fuzzing.
@Suite struct SignedFuzzTests {
    static let scale = ProcessInfo.processInfo.environment["WINBACK_FUZZ_SCALE"].flatMap { Int($0) } ?? 1
    static let seed = ProcessInfo.processInfo.environment["WINBACK_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x5EED_0001

    static let tokens: [[UInt8]] =
        [
            ".", "\"", "{", "}", "[", "]", ",", ":", "eyJ", "-", "_", "=", "+", "/", "\\", " ", "\r", "\n",
            "\"signedPayload\":", "\"signedTransactions\":", "\"data\":", "\"lastTransactions\":", "null", "1.5",
        ].map { Array($0.utf8) } + [[0x00], [0x80], [0xFF]]

    static func mutate(_ input: [UInt8], samples: [[UInt8]], _ rng: inout SplitMix64) -> [UInt8] {
        var b = input
        for _ in 0..<(1 + rng.below(3)) {
            switch rng.below(7) {
            case 0 where !b.isEmpty: b[rng.below(b.count)] ^= UInt8(truncatingIfNeeded: 1 + rng.below(255))
            case 1 where !b.isEmpty: b.removeLast(rng.below(b.count) + 1)
            case 2: b.insert(contentsOf: tokens[rng.below(tokens.count)], at: rng.below(b.count + 1))
            case 3 where b.count > 1:
                let s = rng.below(b.count)
                b.removeSubrange(s..<min(b.count, s + 1 + rng.below(16)))
            case 4 where !b.isEmpty:
                let s = rng.below(b.count)
                b.insert(contentsOf: b[s..<min(b.count, s + 1 + rng.below(200))], at: rng.below(b.count + 1))
            case 5:
                let other = samples[rng.below(samples.count)]
                let cut = rng.below(b.count + 1)
                b = Array(b[0..<cut]) + other[rng.below(other.count)...]
            default:
                if b.count > 1 { b.swapAt(rng.below(b.count), rng.below(b.count)) }
            }
        }
        return b
    }

    static let steps = ["jws_format: ", "certificate_chain: ", "certificate_oid: ", "signature: ", "bundle_id: "]

    @Test func mutatedSignedLinesNeverCrashNorForgeARow() throws {
        let f = try SignedFixture()
        let ids = (1...6).map { "20000000000000\(10 + $0)" }
        let txs = ids.map { SignedFixture.transaction($0) }
        let apple = try String(
            contentsOfFile: Paths.fixtures + "/signed/apple-sandbox-transaction.jws", encoding: .utf8
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
        let samples: [[UInt8]] = try [
            f.sign(txs[0]), "\"\(try f.sign(txs[1]))\"",
            #"{"signedPayload":"\#(try f.notification(transaction: txs[2], renewal: SignedFixture.renewal()))"}"#,
            #"{"signedTransactions":["\#(try f.sign(txs[3]))","\#(try f.sign(txs[4]))"],"revision":"r"}"#,
            #"{"data":[{"subscriptionGroupIdentifier":"1","lastTransactions":[{"signedTransactionInfo":"\#(try f.sign(txs[5]))","signedRenewalInfo":"\#(try f.sign(SignedFixture.renewal()))"}]}]}"#,
            apple,
        ].map { Array($0.utf8) }
        let verifying = FileRows(path: "fuzz", store: try TransactionRows(reservingForRead: ()))
        let reading = FileRows(path: "fuzz", store: try TransactionRows(reservingForRead: ()))
        let roots = [("test", try TestChain.der(f.chain.root)), (AppleRootCA.path, AppleRootCA.der)]
        let now = ms("2026-01-01T00:00:00Z")
        let checked = SignedLine(
            settings: SignedReading(roots: roots, verify: true, bundleId: nil, appAppleId: nil, now: now),
            into: verifying)
        let unchecked = SignedLine(
            settings: SignedReading(roots: roots, verify: false, bundleId: nil, appAppleId: nil, now: now),
            into: reading)
        var rng = SplitMix64(seed: Self.seed)
        var rejected = 0
        let iterations = 1500 * Self.scale
        for i in 0..<iterations {
            let line = Self.mutate(samples[i % samples.count], samples: samples, &rng)
            try line.withUnsafeBytes { b in
                if let why = try checked.read(b) {
                    rejected += 1
                    #expect(Self.steps.contains { why.hasPrefix($0) }, "\(why)")
                }
                if let why = try unchecked.read(b) { #expect(!why.isEmpty) }
            }
        }
        // Every row read with verification is one that was signed.
        let table = verifying.table
        for k in 0..<verifying.rows.count {
            let id = verifying.rows[k].transactionId.withBytes(in: table) { String(decoding: $0, as: UTF8.self) }
            #expect(ids.contains(id), "a row that was never signed: \(id)")
        }
        #expect(rejected > iterations / 2)
        #expect(verifying.rows.count > 0)
    }
}
