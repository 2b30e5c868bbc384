import Crypto
import Foundation
import WinBackRead

/// Signs payloads as the App Store does: compact JWS, ES256 with a raw r‖s signature, the
/// certificate chain in the header's `x5c`. ECDSA signatures are randomised, so the same
/// payload signs to different bytes each time.
public struct JWSSigner {
    let key: P256.Signing.PrivateKey
    /// The base64url header, the same for every payload.
    public let header: String

    init(key: P256.Signing.PrivateKey, x5c: [[UInt8]]) {
        self.key = key
        header = JWSSigner.header(alg: "ES256", x5c: x5c.map { Data($0).base64EncodedString() })
    }

    init(key: P256.Signing.PrivateKey, header: String) {
        self.key = key
        self.header = header
    }

    /// The base64url header `{"alg":…,"x5c":[…]}`; `x5c` nil leaves the key out.
    static func header(alg: String, x5c: [String]?) -> String {
        var json = #"{"alg":"\#(alg)""#
        if let x5c { json += #","x5c":["# + x5c.map { "\"\($0)\"" }.joined(separator: ",") + "]" }
        return Base64URL.encode(Array((json + "}").utf8))
    }

    /// `header.payload.signature` for the payload's JSON bytes.
    public func sign(_ payload: [UInt8]) throws -> String {
        let input = header + "." + Base64URL.encode(payload)
        let signature = try key.signature(for: Array(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// The same with a DER-encoded signature, as a JWS must not have it (for tests).
    func signDER(_ payload: [UInt8]) throws -> String {
        let input = header + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(try key.signature(for: Array(input.utf8)).derRepresentation)
    }
}
