import Foundation

/// A `strace -f -e trace=openat` log read back: what a run opened, and how.
package enum StraceLog {
    /// One `openat` of the trace that succeeded: its path and flags.
    package struct Open {
        package var path: String
        package var flags: String
    }

    /// The successful `openat` calls of a `strace -f -e trace=openat` log (an interrupted
    /// call's two halves joined).
    package static func opens(_ log: String) -> [Open] {
        var joined: [String] = []
        var pending: [String: String] = [:]
        for line in log.split(separator: "\n").map(String.init) {
            let pid = String(line.prefix { $0 != " " })
            if line.hasSuffix("<unfinished ...>") {
                pending[pid] = String(line.dropLast("<unfinished ...>".count))
            } else if line.contains("resumed>"), let start = pending.removeValue(forKey: pid),
                let rest = line.range(of: "resumed>")
            {
                joined.append(start + line[rest.upperBound...])
            } else {
                joined.append(line)
            }
        }
        return joined.compactMap { line in
            // The result after the last " = ", right after the call's ")" (which strace pads with
            // spaces on a resumed call).
            guard line.contains("openat("), let eq = line.range(of: " = ", options: .backwards),
                line[..<eq.lowerBound].reversed().first(where: { $0 != " " }) == ")",
                Int(line[eq.upperBound...].prefix { $0 != " " }).map({ $0 >= 0 }) == true,
                let q1 = line.firstIndex(of: "\""), let q2 = line[line.index(after: q1)...].firstIndex(of: "\"")
            else { return nil }
            let path = String(line[line.index(after: q1)..<q2])
            let flags = line[line.index(after: q2)...].split(separator: ",", omittingEmptySubsequences: false)
                .dropFirst().first.map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
            return Open(path: path, flags: flags ?? "")
        }
    }
}
