/// `rejects.csv` (docs/rules.md §6): file, line, reason, excerpt, sorted by file then line.
enum RejectsWriter {
    static func bytes(_ rejects: [Reject], relativeTo folder: String) -> [UInt8] {
        var out = CSVRecord.header(["file", "line", "reason", "excerpt"])
        let sorted = rejects.enumerated().sorted { a, b in
            a.element.file != b.element.file
                ? a.element.file.utf8.lexicographicallyPrecedes(b.element.file.utf8)
                : a.element.line != b.element.line ? a.element.line < b.element.line : a.offset < b.offset
        }.map(\.element)
        var rec = CSVRecord()
        let prefix = folder.hasSuffix("/") ? folder : folder + "/"
        for r in sorted {
            rec.reset()
            rec.field(r.file.hasPrefix(prefix) ? String(r.file.dropFirst(prefix.count)) : r.file)
            rec.field(r.line)
            rec.field(r.reason)
            rec.field(r.excerpt)
            rec.end()
            out.append(contentsOf: rec.bytes)
        }
        return out
    }
}
