/// Why a JWS was not accepted: the step of the verification that failed (docs/rules.md §2.6)
/// and what exactly went wrong. A rejected row's reason reads `<step>: <detail>`.
package struct SignedDataFailure: Error, Equatable, Sendable {
    enum Step: String, Sendable {
        /// Not three base64url segments, not JSON, `alg` not ES256, `x5c` not three certificates.
        case jwsFormat = "jws_format"
        /// A certificate that does not parse, or no valid path to a configured root at signedDate.
        case certificateChain = "certificate_chain"
        /// The intermediate or the leaf lacks Apple's marker extension.
        case certificateOID = "certificate_oid"
        case signature
        case bundleId = "bundle_id"
        case appAppleId = "app_apple_id"
    }

    let step: Step
    let detail: String

    init(_ step: Step, _ detail: String) {
        self.step = step
        self.detail = detail
    }

    var reason: String { "\(step.rawValue): \(detail)" }
}
