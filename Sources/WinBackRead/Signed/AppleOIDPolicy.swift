import SwiftASN1
import X509

/// Apple's rule on top of RFC 5280 (as its `ChainVerifier` has it): a chain of exactly leaf,
/// intermediate and root, the intermediate marked as Apple Worldwide Developer Relations
/// (1.2.840.113635.100.6.2.1) and the leaf as an App Store receipt signer
/// (1.2.840.113635.100.6.11.1).
package struct AppleOIDPolicy: VerifierPolicy {
    package static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    package static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    /// Starts every failure reason of this policy, so that a failed validation tells an OID
    /// failure from a chain one.
    static let marker = "Apple OID policy: "

    package let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    package func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(
                reason: AppleOIDPolicy.marker + "the chain has \(chain.count) certificates, not 3")
        }
        if !chain[1].extensions.contains(where: { $0.oid == AppleOIDPolicy.intermediateOID }) {
            return .failsToMeetPolicy(
                reason: AppleOIDPolicy.marker + "the intermediate lacks OID 1.2.840.113635.100.6.2.1")
        }
        if !chain[0].extensions.contains(where: { $0.oid == AppleOIDPolicy.leafOID }) {
            return .failsToMeetPolicy(reason: AppleOIDPolicy.marker + "the leaf lacks OID 1.2.840.113635.100.6.11.1")
        }
        return .meetsPolicy
    }
}
