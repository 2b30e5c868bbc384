/// Path names as the pipeline file writes them.
package enum FilePaths {
    /// Makes `path` absolute against `base` and normalises it (`.`/`..`, repeated slashes).
    package static func absolute(_ path: String, base: String) -> String {
        let joined = path.hasPrefix("/") ? path : (base.hasSuffix("/") ? base : base + "/") + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." {
                if !parts.isEmpty { parts.removeLast() }
                continue
            }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }
}
