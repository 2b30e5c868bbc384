import Foundation
import WinBackSupport

/// Where `output.metrics` may be: never the output folder or below it (docs/rules.md §6.2).
package enum MetricsPlace {
    /// Whether the metrics file `path` is the output folder `output` or anything under it
    /// (docs/rules.md §6.2), both absolute: compared as written (`.` and `..` taken out) and
    /// by real paths where they exist (the folders holding them with every link resolved; the
    /// file's own name is not followed, since a link there is replaced, not written through).
    package static func isInside(_ path: String, output: String) -> Bool {
        let file = normalized(path)
        let out = normalized(output)
        if contains(out, file) { return true }
        // As the system resolves them: a `..` after a link leaves the link's target.
        func resolved(_ p: String) -> String { System.realPath(p) ?? real(normalized(p)) }
        let name = (file as NSString).lastPathComponent
        let folder = resolved((path as NSString).deletingLastPathComponent)
        return contains(resolved(output), (folder == "/" ? "" : folder) + "/" + name)
    }

    /// The configuration error of a metrics file inside the output folder.
    package static func insideProblem(_ metrics: String, output: String) -> String {
        "'\(metrics)' is inside the output folder \(output): a run would replace what it publishes there "
            + "(latest, say); put it in node_exporter's textfile folder"
    }

    /// Whether `path` is `folder` or under it.
    private static func contains(_ folder: String, _ path: String) -> Bool {
        path == folder || path.hasPrefix(folder.hasSuffix("/") ? folder : folder + "/")
    }

    /// An absolute path with empty components, `.` and `..` taken out, as written.
    private static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for c in path.split(separator: "/") where c != "." {
            if c == ".." { _ = parts.popLast() } else { parts.append(c) }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// `path` with its longest existing head resolved to a real path.
    private static func real(_ path: String) -> String {
        var head = path
        var tail: [String] = []
        while head != "/" && !head.isEmpty {
            if let r = System.realPath(head) {
                return tail.isEmpty ? r : ([r == "/" ? "" : r] + tail.reversed()).joined(separator: "/")
            }
            tail.append((head as NSString).lastPathComponent)
            head = (head as NSString).deletingLastPathComponent
        }
        return "/" + tail.reversed().joined(separator: "/")
    }
}
