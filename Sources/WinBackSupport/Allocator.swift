import CWinBackShims

/// Settings of the C allocator for a long run over millions of rows.
public enum Allocator {
    /// Serves every block of 1 MiB or more straight from the system and gives it back when
    /// freed. glibc otherwise raises that threshold each time a large block is freed, so the
    /// read stage's temporary tables would stay in the heap and count against peak memory for
    /// the rest of the run. Does nothing where the C library has no such setting.
    public static func configureForBatch() {
        _ = winback_set_mmap_threshold(batchMmapThreshold)
    }

    /// The size from which a block is the system's own (``configureForBatch()``): 1 MiB.
    static let batchMmapThreshold: Int32 = 1 << 20

    /// Keeps up to 64 MiB of freed memory at the top of each heap instead of handing it back
    /// at once, and serves blocks of up to 4 MiB from the heaps: a run in memory frees and
    /// allocates again such blocks by the thousand (a file's buffers and token lists, a piece's
    /// lines, each part's deduplication index), and each block handed back, or taken straight
    /// from the system, was faulted in again, page by page, by the next. A worker thread's heap
    /// keeps little at its top, so there every block of 1 MiB or more had been fresh pages. For
    /// a run without a memory limit only: the pages kept count in its peak (docs/performance.md).
    public static func keepFreedPages() {
        _ = winback_set_trim_threshold(64 << 20)
        _ = winback_set_mmap_threshold(4 << 20)
    }

    /// Hands freed memory at a heap's top back once past 128 KiB, glibc's default, and blocks
    /// of 1 MiB or more when freed: for a run under a memory limit, in a process where a run
    /// in memory kept more (``keepFreedPages()``).
    public static func handFreedPagesBack() {
        _ = winback_set_trim_threshold(128 << 10)
        _ = winback_set_mmap_threshold(batchMmapThreshold)
    }
}
