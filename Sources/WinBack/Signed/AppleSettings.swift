import Yams

/// The `apple:` block of a pipeline file (docs/rules.md §2.7): how signed inputs are verified.
public struct AppleSettings: Sendable, Equatable {
    public var verify = true
    /// Root certificate files (DER or PEM) as written, relative to the pipeline file's folder;
    /// empty = Apple Root CA - G3, built in.
    public var roots: [String] = []
    public var bundleId: String?
    public var appAppleId: Int64?

    public init() {}

    static let keys: Set<String> = ["verify", "roots", "bundleId", "appAppleId"]
    static let environments = ["Production", "Sandbox"]
}

extension YAMLChecker {
    /// Reads the `apple:` block.
    mutating func apple(_ node: Node) -> AppleSettings {
        var a = AppleSettings()
        guard let m = node.mapping else {
            fail("apple", "expected a mapping with verify, roots, bundleId and appAppleId")
            return a
        }
        allow(m, AppleSettings.keys, at: "apple.")
        if let v = string(m, "verify", at: "apple.") {
            switch v {
            case "true": a.verify = true
            case "false": a.verify = false
            default: fail("apple.verify", "expected true or false, found '\(v)'")
            }
        }
        if m["roots"] != nil {
            a.roots = strings(m, "roots", at: "apple.")
            if a.roots.isEmpty { fail("apple.roots", "lists no root certificate") }
        }
        a.bundleId = string(m, "bundleId", at: "apple.")
        if let id = string(m, "appAppleId", at: "apple.") {
            if let n = Int64(id), n > 0 {
                a.appAppleId = n
            } else {
                fail("apple.appAppleId", "expected a positive whole number, found '\(id)'")
            }
        }
        return a
    }
}
