import Foundation
import Testing

/// Paths of the repository and of the test fixtures.
package enum Paths {
    package static let repo: String = {
        // The repository is the first folder above this file with a Package.swift.
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.path + "/Package.swift") && url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }()

    package static let fixtures = repo + "/Tests/WinBackTests/Fixtures"
    package static let segmentXSD = repo + "/Data/schemas/segment.xsd"

    /// A fresh folder under ``temporaryRoot``.
    package static func temporary() -> String {
        let dir = temporaryRoot + "/" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// This test process's own folder under the system temporary directory, removed when the
    /// process exits. Folders of earlier test processes that are gone (killed before they could
    /// clean up) are removed when it is made.
    package static let temporaryRoot: String = {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("winback-tests").path
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] {
            if let pid = Int32(entry), kill(pid, 0) != 0, errno == ESRCH {
                try? FileManager.default.removeItem(atPath: parent + "/" + entry)
            }
        }
        let root = parent + "/\(getpid())"
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        atexit {
            try? FileManager.default.removeItem(
                atPath: FileManager.default.temporaryDirectory.appendingPathComponent("winback-tests/\(getpid())").path)
        }
        return root
    }()

    /// Copies a fixture world into a fresh temporary folder (runs write next to the pipeline).
    package static func copyFixture(_ name: String) throws -> String {
        let dir = temporary()
        let dest = dir + "/" + name
        try FileManager.default.copyItem(atPath: fixtures + "/" + name, toPath: dest)
        return dest
    }
}

/// Whether golden files are rewritten from the outputs (`WINBACK_UPDATE_GOLDEN=1 swift test`):
/// every changed golden line must then be checked by hand (`git diff`) before it is committed.
package let updatingGolden = ProcessInfo.processInfo.environment["WINBACK_UPDATE_GOLDEN"] == "1"

/// Compares a file with its golden copy; on mismatch records the difference as a unified diff
/// (computed here, in this process). With `WINBACK_UPDATE_GOLDEN=1`, a golden copy that differs
/// is replaced by the file instead, and the difference is still recorded, so that the run says
/// what changed.
package func expectSameFile(_ actual: String, golden: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let a = FileManager.default.contents(atPath: actual)
    let g = FileManager.default.contents(atPath: golden)
    if a != nil, a == g { return }
    defer {
        if updatingGolden, let a {
            try? FileManager.default.createDirectory(
                atPath: (golden as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            if !FileManager.default.createFile(atPath: golden, contents: a) {
                Issue.record("cannot update golden \(golden)", sourceLocation: sourceLocation)
            }
        }
    }
    guard let a, let g else {
        Issue.record(
            "\(a == nil ? actual : golden) is missing (comparing \(actual) with golden \(golden))",
            sourceLocation: sourceLocation)
        return
    }
    let diff = unifiedDiff(
        String(decoding: g, as: UTF8.self), String(decoding: a, as: UTF8.self), from: golden, to: actual)
    Issue.record("\(actual) differs from golden \(golden):\n\(diff)", sourceLocation: sourceLocation)
}

/// The lines that differ between `old` and `new` as one hunk of a unified diff: the common
/// beginning and end are left out but for `context` lines on each side, the lines between are
/// shown removed (`-`) and added (`+`), at most `limit` of each.
package func unifiedDiff(
    _ old: String, _ new: String, from oldName: String, to newName: String, context: Int = 5, limit: Int = 200
) -> String {
    let o = old.split(separator: "\n", omittingEmptySubsequences: false)
    let n = new.split(separator: "\n", omittingEmptySubsequences: false)
    var head = 0
    while head < o.count && head < n.count && o[head] == n[head] { head += 1 }
    var tail = 0
    while tail < o.count - head && tail < n.count - head && o[o.count - 1 - tail] == n[n.count - 1 - tail] {
        tail += 1
    }
    let from = max(0, head - context)
    let oldEnd = o.count - tail
    let newEnd = n.count - tail
    let toOld = min(o.count, oldEnd + context)
    let toNew = min(n.count, newEnd + context)
    var out = ["--- \(oldName)", "+++ \(newName)", "@@ -\(from + 1),\(toOld - from) +\(from + 1),\(toNew - from) @@"]
    out += o[from..<head].map { " " + $0 }
    out += o[head..<oldEnd].prefix(limit).map { "-" + $0 }
    if oldEnd - head > limit { out.append("… \(oldEnd - head - limit) more lines removed") }
    out += n[head..<newEnd].prefix(limit).map { "+" + $0 }
    if newEnd - head > limit { out.append("… \(newEnd - head - limit) more lines added") }
    out += o[oldEnd..<toOld].map { " " + $0 }
    return out.joined(separator: "\n")
}

/// Every file below `dir`, relative, sorted.
package func filesBelow(_ dir: String) -> [String] {
    (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? [])
        .filter {
            var d: ObjCBool = false
            return FileManager.default.fileExists(atPath: dir + "/" + $0, isDirectory: &d) && !d.boolValue
        }
        .sorted()
}

/// Every file of a published folder (`folder` may be the `latest` link) but the manifest, by
/// path below it.
package func publishedFiles(_ folder: String) -> [String: Data] {
    let resolved = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
    var out: [String: Data] = [:]
    for f in filesBelow(resolved) where f != "manifest.json" {
        out[f] = FileManager.default.contents(atPath: resolved + "/" + f)
    }
    return out
}
