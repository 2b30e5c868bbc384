import Foundation
import Testing
import WinBackTestSupport
import X509

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// Each way a JWS can fail offline verification, with JWSs crafted on a test chain, and a real
/// one signed by Apple.
@Suite struct SignedVerificationTests {
    static let year2020 = Date(timeIntervalSince1970: 1_577_836_800)
    static let year2040 = Date(timeIntervalSince1970: 2_208_988_800)

    let chain: TestChain
    let leaf: TestChain.Leaf
    let signer: JWSSigner
    /// A signedDate inside every certificate's validity.
    let signed = ms("2025-03-01T10:00:00Z")

    init() throws {
        chain = try TestChain(from: Self.year2020, until: Self.year2040)
        leaf = try chain.leaf(from: Self.year2020, until: Self.year2040)
        signer = try chain.signer(leaf)
    }

    func payload(_ signedDate: Int64) -> [UInt8] {
        Array(#"{"transactionId":"1000000000000001","signedDate":\#(signedDate)}"#.utf8)
    }

    /// The failure of `jws` checked against `roots` (the test chain's by default) at `time`.
    func failure(_ jws: String, roots: [Certificate]? = nil, at time: Int64? = nil) -> SignedDataFailure? {
        let chains = ChainVerifier(roots: roots ?? [chain.root])
        return Array(jws.utf8).withUnsafeBytes { b in
            guard let c = CompactJWS(b) else { return SignedDataFailure(.jwsFormat, "not three segments") }
            return SignedDataVerifier(chains: chains).verify(c, at: time ?? signed)
        }
    }

    func step(_ jws: String, roots: [Certificate]? = nil, at time: Int64? = nil) -> SignedDataFailure.Step? {
        failure(jws, roots: roots, at: time)?.step
    }

    @Test func aWellSignedJWSVerifiesAndItsChainIsValidatedOnce() throws {
        let chains = ChainVerifier(roots: [chain.root])
        let verifier = SignedDataVerifier(chains: chains)
        for _ in 0..<3 {
            let jws = try signer.sign(payload(signed))
            let f = Array(jws.utf8).withUnsafeBytes { verifier.verify(CompactJWS($0)!, at: signed) }
            #expect(f == nil)
        }
        #expect(chains.fullValidations == 1)
    }

    @Test func aJWSWithoutThreeSegmentsIsMalformed() throws {
        let jws = try signer.sign(payload(signed))
        let parts = jws.split(separator: ".").map(String.init)
        #expect(step(parts[0] + "." + parts[1]) == .jwsFormat)
        #expect(step(jws + ".AAAA") == .jwsFormat)
        #expect(step("." + parts[1] + "." + parts[2]) == .jwsFormat)
        #expect(step("not a jws") == .jwsFormat)
    }

    @Test(arguments: ["ES384", "none", "HS256"])
    func anAlgorithmOtherThanES256IsMalformed(alg: String) throws {
        let x5c = try [leaf.certificate, chain.intermediate, chain.root].map {
            Data(try TestChain.der($0)).base64EncodedString()
        }
        let forged = JWSSigner(key: leaf.key, header: JWSSigner.header(alg: alg, x5c: x5c))
        let jws = try forged.sign(payload(signed))
        #expect(step(jws) == .jwsFormat)
        #expect(failure(jws)?.detail.contains(alg) == true)
        // `none` with no signature at all is refused just the same.
        let bare = jws.split(separator: ".").prefix(2).joined(separator: ".") + "."
        #expect(step(bare) == .jwsFormat)
    }

    @Test func x5cMissingOrShortIsMalformed() throws {
        let x5c = try [leaf.certificate, chain.intermediate, chain.root].map {
            Data(try TestChain.der($0)).base64EncodedString()
        }
        for list in [nil, [x5c[0]], [x5c[0], x5c[1]], x5c + [x5c[2]]] as [[String]?] {
            let jws = try JWSSigner(key: leaf.key, header: JWSSigner.header(alg: "ES256", x5c: list)).sign(
                payload(signed))
            #expect(step(jws) == .jwsFormat, "x5c \(list?.count ?? -1)")
        }
    }

    @Test func x5cCertificatesThatAreNotBase64OrNotDERBreakTheChain() throws {
        let x5c = try [leaf.certificate, chain.intermediate, chain.root].map {
            Data(try TestChain.der($0)).base64EncodedString()
        }
        let notBase64 = [String(x5c[0].dropLast(3)) + "%%%", x5c[1], x5c[2]]
        let notDER = [Data("not a certificate".utf8).base64EncodedString(), x5c[1], x5c[2]]
        for list in [notBase64, notDER] {
            let jws = try JWSSigner(key: leaf.key, header: JWSSigner.header(alg: "ES256", x5c: list)).sign(
                payload(signed))
            #expect(step(jws) == .certificateChain)
        }
    }

    @Test func aChainToAnotherRootIsRefused() throws {
        let other = try TestChain(from: Self.year2020, until: Self.year2040, name: "Other Root")
        let jws = try other.signer(other.leaf(from: Self.year2020, until: Self.year2040)).sign(payload(signed))
        #expect(step(jws) == .certificateChain)
        #expect(step(jws, roots: [other.root]) == nil)
        #expect(step(jws, roots: [chain.root, other.root]) == nil)
    }

    @Test func aLeafWithoutApplesOIDIsRefused() throws {
        let plain = try chain.signer(chain.leaf(from: Self.year2020, until: Self.year2040, oid: false))
        let f = failure(try plain.sign(payload(signed)))
        #expect(f?.step == .certificateOID)
        #expect(f?.detail.contains("leaf") == true)
    }

    @Test func anIntermediateWithoutApplesOIDIsRefused() throws {
        let plain = try TestChain(from: Self.year2020, until: Self.year2040, intermediateOID: false)
        let jws = try plain.signer(plain.leaf(from: Self.year2020, until: Self.year2040)).sign(payload(signed))
        let f = failure(jws, roots: [plain.root])
        #expect(f?.step == .certificateOID)
        #expect(f?.detail.contains("intermediate") == true)
    }

    @Test func validityIsCheckedAtSignedDateNotToday() throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        // Expired today, valid when it signed: accepted.
        let old = try chain.signer(
            chain.leaf(
                from: Date(timeIntervalSince1970: 1_600_000_000), until: Date(timeIntervalSince1970: 1_650_000_000)))
        let early = ms("2021-06-01T00:00:00Z")
        #expect(step(try old.sign(payload(early)), at: early) == nil)
        #expect(step(try old.sign(payload(now)), at: now) == .certificateChain)
        // Valid today, not yet valid at the signedDate it claims: refused.
        let young = try chain.signer(chain.leaf(from: Date(timeIntervalSince1970: 1_700_000_000), until: Self.year2040))
        #expect(step(try young.sign(payload(early)), at: early) == .certificateChain)
        #expect(step(try young.sign(payload(now)), at: now) == nil)
    }

    @Test func aCachedChainIsOnlyReusedInsideItsValidityWindow() throws {
        let old = try chain.signer(
            chain.leaf(
                from: Date(timeIntervalSince1970: 1_600_000_000), until: Date(timeIntervalSince1970: 1_650_000_000)))
        let chains = ChainVerifier(roots: [chain.root])
        let verifier = SignedDataVerifier(chains: chains)
        func check(_ t: Int64) throws -> SignedDataFailure.Step? {
            try Array(old.sign(payload(t)).utf8).withUnsafeBytes { verifier.verify(CompactJWS($0)!, at: t)?.step }
        }
        #expect(try check(ms("2021-06-01T00:00:00Z")) == nil)
        #expect(try check(ms("2023-06-01T00:00:00Z")) == .certificateChain)
        #expect(try check(ms("2020-06-01T00:00:00Z")) == .certificateChain)
        #expect(try check(ms("2021-07-01T00:00:00Z")) == nil)
        #expect(chains.fullValidations == 1)
    }

    @Test func aPayloadChangedAfterSigningIsRefused() throws {
        let jws = try signer.sign(payload(signed))
        let parts = jws.split(separator: ".").map(String.init)
        let changed = parts[0] + "." + Base64URL.encode(payload(signed + 1)) + "." + parts[2]
        #expect(step(changed) == .signature)
    }

    @Test func flippedSignatureBitsAreRefused() throws {
        let jws = try signer.sign(payload(signed))
        let parts = jws.split(separator: ".").map(String.init)
        var sig = [UInt8](repeating: 0, count: 64)
        _ = Array(parts[2].utf8).withUnsafeBytes { Base64URL.decode($0, into: &sig) }
        for i in [0, 31, 32, 63] {
            var flipped = sig
            flipped[i] ^= 0x01
            #expect(step(parts[0] + "." + parts[1] + "." + Base64URL.encode(flipped)) == .signature)
        }
        #expect(step(parts[0] + "." + parts[1] + "." + String(parts[2].dropLast(2))) == .signature)
    }

    @Test func aDEREncodedSignatureIsRefused() throws {
        let jws = try signer.signDER(payload(signed))
        let f = failure(jws)
        #expect(f?.step == .signature)
        #expect(f?.detail.contains("64") == true)
    }

    @Test func aRealAppleJWSVerifiesAgainstAppleRootG3AtItsSignedDate() throws {
        let jws = try String(contentsOfFile: Paths.fixtures + "/signed/apple-sandbox-transaction.jws", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let roots = try ChainVerifier.loadRoots([Paths.repo + "/Data/certs/AppleRootCA-G3.cer"])
        let signedDate: Int64 = 1_739_161_772_561
        #expect(failure(jws, roots: roots, at: signedDate) == nil)
        // Its leaf expired on 2025-10-11: checked today it would fail, which is why offline
        // verification takes the payload's signedDate.
        #expect(step(jws, roots: roots, at: ms("2026-01-01T00:00:00Z")) == .certificateChain)
        // And against another root it does not verify.
        #expect(step(jws, roots: [chain.root], at: signedDate) == .certificateChain)
    }

    @Test func aRefusedHeaderIsRefusedAgainWithoutAnotherValidationUnlessTimeWasTheReason() throws {
        let chains = ChainVerifier(roots: [chain.root])
        let verifier = SignedDataVerifier(chains: chains)
        func check(_ s: JWSSigner, at t: Int64) throws -> SignedDataFailure.Step? {
            try Array(s.sign(payload(t)).utf8).withUnsafeBytes { verifier.verify(CompactJWS($0)!, at: t)?.step }
        }
        let other = try TestChain(from: Self.year2020, until: Self.year2040, name: "Other Root")
        let foreign = try other.signer(other.leaf(from: Self.year2020, until: Self.year2040))
        for _ in 0..<20 { #expect(try check(foreign, at: signed) == .certificateChain) }
        let noOID = try chain.signer(chain.leaf(from: Self.year2020, until: Self.year2040, oid: false))
        for _ in 0..<20 { #expect(try check(noOID, at: signed) == .certificateOID) }
        #expect(chains.validationAttempts == 2)
        // Not yet valid at one time, valid at a later one: that refusal is not kept.
        let young = try chain.signer(chain.leaf(from: Date(timeIntervalSince1970: 1_700_000_000), until: Self.year2040))
        #expect(try check(young, at: ms("2021-06-01T00:00:00Z")) == .certificateChain)
        #expect(try check(young, at: signed) == nil)
        #expect(chains.validationAttempts == 4)
    }
}
