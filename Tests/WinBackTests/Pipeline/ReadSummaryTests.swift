import Testing

@testable import WinBack
@testable import WinBackRead

/// The read stage's line names the files and rows taken from an incremental state apart from
/// those read (docs/rules.md §12), and counts in the singular when there is one.
@Suite("The read stage's line")
struct ReadSummaryTests {
    static func counters(rows: Int, rejected: Int = 0, duplicates: Int = 0) -> ReadCounters {
        var c = ReadCounters()
        c.rowsRead = rows
        c.rejected = rejected
        c.duplicates = duplicates
        return c
    }

    @Test("a night that takes 35 files from the state and reads one")
    func incrementalNight() {
        let s = ReadSummary(
            filesRead: 1, filesFromState: 35, bytesRead: 120_000, counters: Self.counters(rows: 40837, duplicates: 12),
            rowsFromState: 40000)
        #expect(
            s.line
                == "1 file read, 35 from the state; 0.1 MB, 40837 rows (40000 from the state), 0 rejected, 12 duplicates"
        )
    }

    @Test("a run without a state, or one that read everything, says nothing of a state")
    func withoutState() {
        let s = ReadSummary(filesRead: 36, bytesRead: 3_400_000, counters: Self.counters(rows: 40837, rejected: 2))
        #expect(s.line == "36 files, 3.4 MB, 40837 rows, 2 rejected, 0 duplicates")
    }

    @Test("one of each is singular")
    func singular() {
        let s = ReadSummary(filesRead: 1, bytesRead: 0, counters: Self.counters(rows: 1, rejected: 1, duplicates: 1))
        #expect(s.line == "1 file, 0.0 MB, 1 row, 1 rejected, 1 duplicate")
        let none = ReadSummary(
            filesRead: 0, filesFromState: 1, bytesRead: 0, counters: Self.counters(rows: 5), rowsFromState: 5)
        #expect(
            none.line == "0 files read, 1 from the state; 0.0 MB, 5 rows (5 from the state), 0 rejected, 0 duplicates")
    }
}
