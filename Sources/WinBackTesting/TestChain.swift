import Crypto
import Foundation
import SwiftASN1
import WinBackRead
import X509

/// A certificate chain shaped like Apple's — a root, an intermediate carrying OID
/// 1.2.840.113635.100.6.2.1, leaves carrying 1.2.840.113635.100.6.11.1 — made afresh, for
/// signed test worlds and tests. Its keys are random: what it signs is never byte-for-byte
/// repeatable.
public struct TestChain {
    public let root: Certificate
    public let intermediate: Certificate
    let intermediateKey: P256.Signing.PrivateKey

    /// A leaf and its key.
    public struct Leaf {
        public let certificate: Certificate
        let key: P256.Signing.PrivateKey
    }

    static let organisation = "winback test chain"

    /// - Parameters:
    ///   - from, until: validity of root and intermediate.
    ///   - intermediateOID: whether the intermediate carries Apple's intermediate OID.
    public init(from: Date, until: Date, intermediateOID: Bool = true, name: String = "Test Root") throws {
        let rootKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName {
            CommonName(name)
            OrganizationName(TestChain.organisation)
        }
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: from,
            notValidAfter: until, issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(rootKey.publicKey))
            }, issuerPrivateKey: .init(rootKey))
        self.root = root
        let intermediateKey = P256.Signing.PrivateKey()
        self.intermediateKey = intermediateKey
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            AuthorityKeyIdentifier(keyIdentifier: try root.extensions.subjectKeyIdentifier?.keyIdentifier)
            SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey))
        }
        if intermediateOID { try extensions.append(TestChain.marker(AppleOIDPolicy.intermediateOID)) }
        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: from,
            notValidAfter: until, issuer: rootName,
            subject: try DistinguishedName {
                CommonName("Test Intermediate")
                OrganizationName(TestChain.organisation)
            }, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: .init(rootKey))
    }

    /// Apple marks its certificates with an extension whose value is an ASN.1 NULL.
    static func marker(_ oid: ASN1ObjectIdentifier) -> Certificate.Extension {
        Certificate.Extension(oid: oid, critical: false, value: [0x05, 0x00])
    }

    /// A new leaf valid from `from` to `until`, with Apple's leaf OID unless `oid` is false.
    public func leaf(from: Date, until: Date, oid: Bool = true) throws -> Leaf {
        let key = P256.Signing.PrivateKey()
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            AuthorityKeyIdentifier(keyIdentifier: try intermediate.extensions.subjectKeyIdentifier?.keyIdentifier)
        }
        if oid { try extensions.append(TestChain.marker(AppleOIDPolicy.leafOID)) }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: from,
            notValidAfter: until, issuer: intermediate.subject,
            subject: try DistinguishedName {
                CommonName("Test Signer")
                OrganizationName(TestChain.organisation)
            }, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: .init(intermediateKey))
        return Leaf(certificate: certificate, key: key)
    }

    /// A signer with `leaf`, whose header lists leaf, intermediate and root.
    public func signer(_ leaf: Leaf) throws -> JWSSigner {
        try JWSSigner(key: leaf.key, x5c: [leaf.certificate, intermediate, root].map(TestChain.der))
    }

    /// The DER bytes of a certificate.
    public static func der(_ c: Certificate) throws -> [UInt8] {
        try c.derBytes()
    }

    /// The certificate as PEM text.
    public static func pem(_ c: Certificate) throws -> String {
        try c.serializeAsPEM().pemString
    }
}
