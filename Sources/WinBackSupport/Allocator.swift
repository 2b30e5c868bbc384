import CWinBackShims

/// Settings of the C allocator for a long run over millions of rows.
public enum Allocator {
    /// Serves every block of 1 MiB or more straight from the system and gives it back when
    /// freed. glibc otherwise raises that threshold each time a large block is freed, so the
    /// read stage's temporary tables would stay in the heap and count against peak memory for
    /// the rest of the run. Does nothing where the C library has no such setting.
    public static func configureForBatch() {
        _ = winback_set_mmap_threshold(1 << 20)
    }
}
