import Foundation
import WinBackRead
import WinBackSupport

/// The rejected lines of a run that name a customer (`explain`): read again from their files,
/// and searched for the customer's ids as written, or inside the base64url parts of a signed
/// line (a JWS whose signature failed still names its transaction). A customer whose timeline
/// lacks a row because its line was rejected (a forged or damaged line) is told so.
package enum RejectedLines {
    /// The rejects among `rejects` whose lines mention one of `ids`.
    package static func mentioning(_ ids: [String], in rejects: [Reject], limits: ReadLimits) -> [Reject] {
        let needles = ids.filter { !$0.isEmpty }.map { Array($0.utf8) }
        guard !needles.isEmpty, !rejects.isEmpty else { return [] }
        var found: [Reject] = []
        let byFile = Dictionary(grouping: rejects, by: \.file)
        for file in byFile.keys.sorted(by: FileName.precedes) {
            let wanted = Dictionary(byFile[file]!.map { ($0.line, $0) }, uniquingKeysWith: { a, _ in a })
            guard let source = try? openSource(path: file) else { continue }
            let lines = LineCursor(source: source, maxLineBytes: limits.maxLineBytes)
            try? lines.forEachLine { line, number in
                guard let r = wanted[number] else { return }
                if mentions(Array(line), needles) { found.append(r) }
            }
        }
        // In the order of rejects.csv: by the bytes of the file's name, then line.
        return found.sorted { $0.file != $1.file ? FileName.precedes($0.file, $1.file) : $0.line < $1.line }
    }

    /// Whether `line`, or a base64url part of it that decodes, holds one of `needles`.
    package static func mentions(_ bytes: [UInt8], _ needles: [[UInt8]]) -> Bool {
        if needles.contains(where: { contains(bytes, $0) }) { return true }
        // Runs of base64url characters, split at dots: a JWS's header, payload and signature.
        var part: [UInt8] = []
        func decodedHolds() -> Bool {
            defer { part.removeAll(keepingCapacity: true) }
            guard part.count >= 16 else { return false }
            var text = String(decoding: part, as: UTF8.self).replacingOccurrences(of: "-", with: "+")
                .replacingOccurrences(of: "_", with: "/")
            text += String(repeating: "=", count: (4 - text.count % 4) % 4)
            guard let data = Data(base64Encoded: text) else { return false }
            let decoded = Array(data)
            return needles.contains { contains(decoded, $0) }
        }
        for c in bytes {
            let base64 =
                (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D
                || c == 0x5F
            if base64 {
                part.append(c)
            } else if decodedHolds() {
                return true
            }
        }
        return decodedHolds()
    }

    package static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count, let first = needle.first else { return false }
        var i = 0
        while i + needle.count <= haystack.count {
            if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
