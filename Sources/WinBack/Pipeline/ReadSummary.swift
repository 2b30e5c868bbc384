import WinBackRead

/// The read stage's line in the log and the manifest's stages: files, bytes and rows. On an
/// incremental night the files and rows taken from the state are named apart from those read,
/// so that "1 file read" is never followed by the state's rows as if that file had given them
/// (docs/rules.md §12).
struct ReadSummary {
    /// Transaction files read now.
    var filesRead: Int
    /// Transaction files whose rows were taken from the incremental state (0 without one).
    var filesFromState = 0
    /// Bytes of the files read now, as stored.
    var bytesRead: Int
    /// The read stage's counters: the state's rows included.
    var counters: ReadCounters
    /// Of `counters.rowsRead`, the rows the absorbed files gave when they were read.
    var rowsFromState = 0

    /// `12 files, 3.4 MB, 40837 rows, 0 rejected, 12 duplicates`; with a state,
    /// `1 file read, 35 from the state; 0.1 MB, 40837 rows (40000 from the state), …`.
    var line: String {
        let c = counters
        let files =
            filesFromState > 0
            ? counted(filesRead, "file") + " read, \(filesFromState) from the state;"
            : counted(filesRead, "file") + ","
        let rows = counted(c.rowsRead, "row") + (filesFromState > 0 ? " (\(rowsFromState) from the state)" : "")
        return "\(files) \(Progress.mb(bytesRead)), \(rows), \(c.rejected) rejected, "
            + counted(c.duplicates, "duplicate")
    }
}
