import CWinBackShims

extension System {
    /// Swaps the folders `a` and `b` in one step (renameat2 with RENAME_EXCHANGE): both must
    /// exist. Throws where the system or the file system cannot (ENOSYS, EINVAL).
    package static func exchange(_ a: String, _ b: String) throws {
        if winback_rename_exchange(a, b) != 0 { throw SystemError("renameat2") }
    }
}
