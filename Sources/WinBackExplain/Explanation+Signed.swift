import WinBackRead

extension Explanation {
    /// Records how the rows of a signed input were checked. Every row shown was read from a
    /// JWS that passed (a forged one is rejected before it becomes a row), so with verification
    /// on each row is verified, with it off none is.
    package mutating func markSignatures(_ signed: SignedReading) {
        let roots = signed.roots.map(\.path).joined(separator: ", ")
        signatures =
            signed.verifies
            ? "each row verified: ES256 signature, chain to \(roots) valid at the row's signedDate"
            : "not verified (apple.verify: false)"
        for i in rows.indices { rows[i].signatureVerified = signed.verifies }
    }
}
