import Crypto
import Foundation
import WinBackSupport
import X509

/// How `appstore-signed` files are read: whether and against which roots their signatures are
/// verified, and the app they must belong to (docs/rules.md §2.6–2.7). Shared by the reading
/// threads; its chain cache is the only state, and that is thread-safe.
public struct SignedReading: Sendable {
    /// A root certificate the run trusts, as the manifest records it.
    public struct Root: Sendable, Equatable {
        /// The file as the pipeline names it; `(built in)` for the default Apple root.
        public var path: String
        /// SHA-256 of its DER bytes, lowercase hex.
        public var sha256: String
    }

    /// nil when verification is off (`apple.verify: false`).
    let chains: ChainVerifier?
    public let roots: [Root]
    public let bundleId: String?
    public let appAppleId: Int64?
    /// The validation time of a payload without signedDate, ms since epoch.
    public let now: Int64

    public var verifies: Bool { chains != nil }

    /// Verification against Apple Root CA - G3, no app checks.
    public init(now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) {
        // The built-in root is a constant: it parses.
        self.init(roots: [(AppleRootCA.path, AppleRootCA.der)], verify: true, bundleId: nil, appAppleId: nil, now: now)
    }

    /// - Parameter roots: each root's name (for the manifest) and DER bytes.
    package init(
        roots: [(name: String, der: [UInt8])], verify: Bool, bundleId: String?, appAppleId: Int64?, now: Int64
    ) {
        let parsed = roots.compactMap { try? Certificate(derEncoded: $0.der) }
        chains = verify ? ChainVerifier(roots: parsed) : nil
        self.roots = roots.map { Root(path: $0.name, sha256: Hex.string(SHA256.hash(data: $0.der))) }
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.now = now
    }

    /// The settings of a pipeline file; a root file that is missing or not a certificate is a
    /// configuration error (exit 78).
    public static func resolve(_ apple: AppleSettings, folder: String, now: Int64) throws -> SignedReading {
        var roots: [(name: String, der: [UInt8])] = []
        if apple.roots.isEmpty {
            roots = [(AppleRootCA.path, AppleRootCA.der)]
        } else {
            for name in apple.roots {
                let path = InputFiles.absolute(name, base: folder)
                roots.append((name, try ChainVerifier.loadRoots([path])[0].derBytes()))
            }
        }
        return SignedReading(
            roots: roots, verify: apple.verify, bundleId: apple.bundleId, appAppleId: apple.appAppleId, now: now)
    }
}
