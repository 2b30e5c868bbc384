import Crypto

/// Verifies one JWS as Apple's `SignedDataVerifier` does offline (docs/rules.md §2.6, steps
/// 1–3): the chain of its header at the payload's signedDate, then the ES256 signature over
/// `header.payload` with the leaf's key. One per reading thread (it holds a buffer); the chain
/// cache it uses is shared.
package final class SignedDataVerifier {
    let chains: ChainVerifier
    private let signature = DecodeBuffer(capacity: 128)
    /// The header of the last JWS verified and its chain: consecutive rows are mostly signed by
    /// the same leaf, and this thread then needs neither the shared cache's hash nor its lock.
    private var lastHeader: [UInt8] = []
    private var last: ChainVerifier.VerifiedChain?

    package init(chains: ChainVerifier) { self.chains = chains }

    /// Nil when `jws` is verified at `time` (ms since epoch).
    package func verify(_ jws: CompactJWS, at time: Int64) -> SignedDataFailure? {
        let key: P256.Signing.PublicKey
        if let last, last.notBefore <= time, time <= last.notAfter,
            jws.withHeader({ ChainVerifier.same(lastHeader, $0) })
        {
            key = last.key
        } else {
            switch jws.withHeader({ chains.chain(header: $0, at: time) }) {
            case .failure(let f): return f
            case .success(let c):
                key = c.key
                last = c
                lastHeader = Array(jws.header)
            }
        }
        guard signature.decode(jws.signature) else {
            return SignedDataFailure(.signature, "the signature is not base64url")
        }
        guard signature.count == 64 else {
            return SignedDataFailure(.signature, "the signature is \(signature.count) bytes, not a raw r‖s of 64")
        }
        guard let sig = try? P256.Signing.ECDSASignature(rawRepresentation: signature.bytes) else {
            return SignedDataFailure(.signature, "the signature is not an ECDSA signature")
        }
        guard key.isValidSignature(sig, for: SHA256.hash(data: jws.signingInput)) else {
            return SignedDataFailure(.signature, "the ES256 signature does not verify with the leaf's key")
        }
        return nil
    }
}
