import Foundation
import WinBack
import WinBackTesting

/// The floor of a signed world for `winback bench`: checking every JWS in it once, with its
/// chain already cached — ES256 verifications per second on one core, times the JWS, over the
/// threads. Reading a signed file can go no faster than verifying what it holds.
enum SignedBenchmark {
    /// The JWSs in the files at `paths`.
    static func count(paths: [String], inflater: Inflater) throws -> Int {
        try paths.reduce(0) { $0 + (try count(path: $1, inflater: inflater)) }
    }

    /// The floor of `jws` JWSs: measures verifications per second on one core, then returns
    /// the seconds `threads` cores take at that rate, and the rate.
    static func floor(jws: Int, threads: Int) throws -> (seconds: Double, perSecondPerCore: Double) {
        let rate = try verificationsPerSecond()
        return (Double(jws) / (rate * Double(max(1, threads))), rate)
    }

    /// JWSs in a file: the headers the App Store and the test chain write start alike.
    static func count(path: String, inflater: Inflater) throws -> Int {
        let marker = Array("eyJhbGci".utf8)
        let source = try openSource(path: path, inflater: inflater)
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        // The bytes carried over from the previous read, so that a marker may straddle reads.
        var window: [UInt8] = []
        var found = 0
        while case let n = try source.read(into: &chunk), n > 0 {
            window += chunk[0..<n]
            var at = 0
            while at + marker.count <= window.count,
                let p = window[at...(window.count - marker.count)].firstIndex(of: marker[0])
            {
                if window[p..<(p + marker.count)].elementsEqual(marker) {
                    found += 1
                    at = p + marker.count
                } else {
                    at = p + 1
                }
            }
            window = Array(window.suffix(min(marker.count - 1, window.count - at)))
        }
        return found
    }

    /// Verifications per second on this thread, the chain cached: base64url of the signature,
    /// SHA-256 of `header.payload` and the P-256 check, on JWSs the size of a transaction's.
    static func verificationsPerSecond(seconds budget: Double = 1) throws -> Double {
        let year: Double = 366 * 86_400
        let now = Date()
        let chain = try TestChain(from: now.addingTimeInterval(-year), until: now.addingTimeInterval(year))
        let signer = try chain.signer(
            chain.leaf(from: now.addingTimeInterval(-year), until: now.addingTimeInterval(year)))
        let at = Int64(now.timeIntervalSince1970 * 1000)
        let samples = try (0..<64).map { i in
            Array(
                try signer.sign(
                    Array(
                        (#"{"transactionId":"\#(2_000_000_000_000_000 + i)","originalTransactionId":"2000000000000000","#
                            + #""bundleId":"com.example.streamingpass","productId":"com.example.streamingpass.basic.monthly","#
                            + #""subscriptionGroupIdentifier":"21482345","purchaseDate":1735689600000,"#
                            + #""expiresDate":1738368000000,"type":"Auto-Renewable Subscription","#
                            + #""inAppOwnershipType":"PURCHASED","signedDate":\#(at),"environment":"Production","#
                            + #""transactionReason":"RENEWAL","storefront":"USA","price":4990,"currency":"USD"}"#).utf8)
                ).utf8)
        }
        let verifier = SignedDataVerifier(chains: ChainVerifier(roots: [chain.root]))
        var done = 0
        let start = Date()
        while Date().timeIntervalSince(start) < budget {
            for s in samples {
                let failure = CompactJWS.with(s) { verifier.verify($0!, at: at) }
                precondition(failure == nil, "the benchmark's own JWS does not verify")
            }
            done += samples.count
        }
        return Double(done) / Date().timeIntervalSince(start)
    }
}
