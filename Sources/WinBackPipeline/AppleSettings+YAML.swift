import WinBackRead
import Yams

extension YAMLChecker {
    /// Reads the `apple:` block.
    package mutating func apple(_ node: Node) -> AppleSettings {
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
