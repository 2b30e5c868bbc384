import Crypto
import Foundation
import SwiftASN1
import Synchronization
import WinBackModel
import WinBackSupport
// A fixed validation time (the payload's signedDate) is behind this SPI since 1.21; the public
// `init(validationTime:)` Apple's verifier uses is deprecated in its favour.
@_spi(FixedExpiryValidationTime) import X509

/// Finds the leaf key of a JWS header: its `x5c` leaf and intermediate must chain to one of the
/// configured roots under RFC 5280 at the validation time (the payload's signedDate) and carry
/// Apple's OIDs, as Apple's `ChainVerifier` checks offline (docs/rules.md §2.6, step 2).
///
/// A verified chain is cached by the header's bytes (identical on every row its leaf signed)
/// with the window in which every certificate of the chain is valid: a later row signed inside
/// the window reuses the key, one outside it is rejected without another validation. Shared by
/// the reading threads.
package final class ChainVerifier: Sendable {
    /// A chain that passed, as the cache keeps it: immutable once made, so that the reading
    /// threads share it (swift-crypto does not mark its public key `Sendable`).
    struct VerifiedChain: @unchecked Sendable {
        let key: P256.Signing.PublicKey
        /// The intersection of the validity of leaf, intermediate and root, in ms.
        let notBefore: Int64
        let notAfter: Int64
    }

    private let roots: CertificateStore
    private let rootCertificates: [Certificate]
    /// What the reading threads share, behind one lock.
    private struct State {
        /// By hash of the header bytes: the headers with that hash and their chains.
        var cache: [Int: [(header: [UInt8], chain: VerifiedChain)]] = [:]
        var validations = 0
        /// By hash of the header bytes: headers refused for a reason no validation time changes
        /// (not a valid header, a certificate that does not parse, a missing OID, no path to a
        /// root while every certificate was in its validity), so that a file of rows forged
        /// alike costs one validation. At most ``maxRefused`` of them: all-different headers
        /// cannot grow it further.
        var refused: [Int: [(header: [UInt8], failure: SignedDataFailure)]] = [:]
        var refusedCount = 0
        var attempts = 0
    }
    private let state = Mutex(State())
    static let maxRefused = 1024

    package init(roots: [Certificate]) {
        self.roots = CertificateStore(roots)
        rootCertificates = roots
    }

    /// How many chains were validated in full and cached, for tests.
    var fullValidations: Int { state.withLock { $0.validations } }

    /// How many headers were decoded and checked (cache misses), for tests.
    var validationAttempts: Int { state.withLock { $0.attempts } }

    /// The verified chain of the base64url `header` of a JWS, valid at `time` (ms since epoch).
    func chain(header: Span<UInt8>, at time: Int64) -> Result<VerifiedChain, SignedDataFailure> {
        var hasher = Hasher()
        Bytes.combine(header, into: &hasher)
        let hash = hasher.finalize()
        let (known, refusal) = state.withLock { s -> (VerifiedChain?, SignedDataFailure?) in
            let known = s.cache[hash]?.first { ChainVerifier.same($0.header, header) }?.chain
            let refusal = known == nil ? s.refused[hash]?.first { ChainVerifier.same($0.header, header) }?.failure : nil
            if known == nil && refusal == nil { s.attempts += 1 }
            return (known, refusal)
        }
        if let refusal { return .failure(refusal) }
        if let known {
            guard known.notBefore <= time && time <= known.notAfter else {
                return .failure(
                    SignedDataFailure(.certificateChain, "the chain is not valid at signedDate \(Timestamp.iso(time))"))
            }
            return .success(known)
        }
        switch validate(header: header, at: time) {
        case .failure(let f):
            if f.permanent {
                let bytes = Bytes.array(header)
                state.withLock { s in
                    if s.refusedCount < ChainVerifier.maxRefused {
                        s.refusedCount += 1
                        s.refused[hash, default: []].append((bytes, f.failure))
                    }
                }
            }
            return .failure(f.failure)
        case .success(let chain):
            let bytes = Bytes.array(header)
            state.withLock { s in
                // Another thread may have validated the same header meanwhile.
                if s.cache[hash]?.contains(where: { $0.header == bytes }) != true {
                    s.validations += 1
                    s.cache[hash, default: []].append((bytes, chain))
                }
            }
            return .success(chain)
        }
    }

    /// Whether `a` holds the bytes of `b`.
    @inline(__always)
    static func same(_ a: [UInt8], _ b: Span<UInt8>) -> Bool { Bytes.equal(a.span, b) }

    /// A failure of ``validate(header:at:)``, and whether any other validation time would fail
    /// alike.
    private struct Refusal: Error {
        let failure: SignedDataFailure
        let permanent: Bool

        init(_ step: SignedDataFailure.Step, _ detail: String, permanent: Bool = true) {
            failure = SignedDataFailure(step, detail)
            self.permanent = permanent
        }
    }

    /// Decodes the header and validates its chain in full.
    private func validate(header: Span<UInt8>, at time: Int64) -> Result<VerifiedChain, Refusal> {
        let json = DecodeBuffer(capacity: header.count)
        guard json.decode(header) else { return .failure(Refusal(.jwsFormat, "the header is not base64url")) }
        guard let h = JWSHeader.parse(json.bytes) else {
            return .failure(Refusal(.jwsFormat, "the header is not a JSON object"))
        }
        guard h.alg == "ES256" else {
            return .failure(Refusal(.jwsFormat, "alg is \(h.alg.map { "'\($0)'" } ?? "absent"), not ES256"))
        }
        guard h.hasX5c else { return .failure(Refusal(.jwsFormat, "the header has no x5c")) }
        guard let x5c = h.x5c else {
            return .failure(Refusal(.jwsFormat, "x5c is not an array of strings"))
        }
        guard x5c.count == 3 else {
            return .failure(Refusal(.jwsFormat, "x5c has \(x5c.count) certificates, not 3"))
        }
        var certificates: [Certificate] = []
        for (i, text) in x5c.prefix(2).enumerated() {
            guard let der = Data(base64Encoded: text) else {
                return .failure(Refusal(.certificateChain, "x5c[\(i)] is not base64"))
            }
            guard let c = try? Certificate(derEncoded: Array(der)) else {
                return .failure(Refusal(.certificateChain, "x5c[\(i)] is not a DER certificate"))
            }
            certificates.append(c)
        }
        let (leaf, intermediate) = (certificates[0], certificates[1])
        guard let key = P256.Signing.PublicKey(leaf.publicKey) else {
            return .failure(Refusal(.signature, "the leaf's key is not a P-256 key"))
        }
        let roots = self.roots
        let validationTime = Date(timeIntervalSince1970: Double(time) / 1000)
        let result = BlockingBridge.wait { () async -> CertificateValidationResult in
            var verifier = Verifier(rootCertificates: roots) {
                RFC5280Policy(fixedExpiryValidationTime: validationTime)
                AppleOIDPolicy()
            }
            return await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        }
        switch result {
        case .validCertificate(let chain):
            let ms = { (d: Date) in Int64((d.timeIntervalSince1970 * 1000).rounded(.down)) }
            return .success(
                VerifiedChain(
                    key: key, notBefore: chain.map { ms($0.notValidBefore) }.max()!,
                    notAfter: chain.map { ms($0.notValidAfter) }.min()!))
        case .couldNotValidate(let failures):
            // The Apple policy runs after RFC 5280's: its failure means the chain itself held.
            if let oid = failures.lazy.map(\.policyFailureReason.description).first(where: {
                $0.hasPrefix(AppleOIDPolicy.marker)
            }) {
                return .failure(Refusal(.certificateOID, String(oid.dropFirst(AppleOIDPolicy.marker.count))))
            }
            let why = failures.first.map { ": \($0.policyFailureReason)" } ?? ""
            // With every certificate valid at that time, time was not the reason: no other
            // time would do better.
            let timeless = ([leaf, intermediate] + rootCertificates).allSatisfy {
                $0.notValidBefore <= validationTime && validationTime <= $0.notValidAfter
            }
            return .failure(
                Refusal(
                    .certificateChain,
                    "no valid path to a configured root"
                        + (timeless ? "" : " at signedDate \(Timestamp.iso(time))") + why,
                    permanent: timeless))
        }
    }

    /// Reads root certificates, each file DER or PEM.
    static func loadRoots(_ paths: [String]) throws -> [Certificate] {
        try paths.map { path in
            guard let data = System.contents(path) else {
                throw WinBackError(.configuration, "cannot read root certificate '\(path)'")
            }
            do {
                let text = String(decoding: data, as: UTF8.self)
                if text.contains("-----BEGIN CERTIFICATE-----") {
                    return try Certificate(pemEncoded: text.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                return try Certificate(derEncoded: Array(data))
            } catch {
                throw WinBackError(.configuration, "'\(path)' is not a DER or PEM certificate: \(error)")
            }
        }
    }
}

extension Certificate {
    /// The certificate's DER encoding (what its SHA-256 fingerprint is taken over).
    package func derBytes() throws -> [UInt8] {
        var s = DER.Serializer()
        try s.serialize(self)
        return s.serializedBytes
    }
}
