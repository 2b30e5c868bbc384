import WinBackModel
import WinBackRead
import WinBackSupport

/// `rejects.csv` (docs/rules.md §6, §6.1): file, line, reason, excerpt, sorted by file then
/// line; at most `limits.maxRejectsListed` rows, then one row saying how many more there were.
/// The file is named escaped (``ControlEscape/name(_:)``, §6.2), so each reject is one line
/// whatever its file's name holds.
package enum RejectsWriter {
    package static func bytes(_ rejects: RejectList, relativeTo folder: String) -> [UInt8] {
        var out = CSVRecord.header(["file", "line", "reason", "excerpt"])
        var rec = CSVRecord()
        let prefix = folder.hasSuffix("/") ? folder : folder + "/"
        for r in rejects.listed {
            rec.reset()
            rec.field(ControlEscape.name(r.file.hasPrefix(prefix) ? String(r.file.dropFirst(prefix.count)) : r.file))
            rec.field(r.line)
            rec.field(r.reason)
            rec.field(r.excerpt)
            rec.end()
            out.append(contentsOf: rec.bytes)
        }
        if rejects.omitted > 0 {
            rec.reset()
            rec.field("")
            rec.field("")
            rec.field(notListed)
            rec.field("\(rejects.omitted) more rejected rows not listed (limits.maxRejectsListed: \(rejects.limit))")
            rec.end()
            out.append(contentsOf: rec.bytes)
        }
        return out
    }

    /// The reason of the last row when some rejects are not listed.
    static let notListed = "not_listed"
}
