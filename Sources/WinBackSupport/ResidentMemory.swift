import CWinBackShims

/// What a memory-bounded run holds resident, and what it lets go of between its stages
/// (docs/rules.md §8).
///
/// The kernel maps a program's code a folio at a time (up to hundreds of kilobytes around each
/// page touched) and leaves it mapped: the code that read the pipeline file, partitioned the
/// inputs or evaluated a shard stays counted in the process's resident memory after it last
/// ran, 15 to 20 MB of a release binary, half of what `--memory 32MB` allows. Between stages a
/// bounded run unmaps its read-only file mappings (code and constants of the binary and its
/// libraries) and trims the heap: the pages stay in the page cache, and code that runs again
/// is mapped again by a minor fault. A mapping holding a private copy of any page (relocated
/// data, a library with text relocations) or that can be written is never touched: its
/// contents would be lost.
package enum ResidentMemory {
    /// Unmaps the read-only file mappings that hold no private page and hands the heap's free
    /// pages back; returns the mappings unmapped (0 where /proc/self/smaps cannot be read).
    @discardableResult
    package static func releaseUnused() -> Int {
        winback_trim_heap()
        guard let smaps = System.readGenerated("/proc/self/smaps") else { return 0 }
        var released = 0
        for m in releasable(smaps) where System.unmapPages(m.start, m.end) { released += 1 }
        return released
    }

    /// A mapping of /proc/self/smaps: its address range and whether it may be unmapped.
    struct Mapping: Equatable {
        var start: Int
        var end: Int
    }

    /// The mappings of `smaps` (the text of /proc/self/smaps) that may be unmapped: backed by
    /// a file (an inode), neither writable nor shared-writable, with pages resident, no
    /// anonymous (private, copied) page and not locked.
    static func releasable(_ smaps: [UInt8]) -> [Mapping] {
        var found: [Mapping] = []
        var current: Mapping?
        var candidate = false
        var resident = 0
        var anonymous = -1
        var locked = false
        func close() {
            if let m = current, candidate, resident > 0, anonymous == 0, !locked { found.append(m) }
            current = nil
        }
        for line in smaps.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            let parts = text.split(separator: " ", omittingEmptySubsequences: true)
            if let range = parts.first, range.contains("-"), !range.hasSuffix(":"), parts.count >= 5 {
                close()
                let bounds = range.split(separator: "-")
                guard bounds.count == 2, let start = Int(bounds[0], radix: 16), let end = Int(bounds[1], radix: 16)
                else { continue }
                current = Mapping(start: start, end: end)
                let perms = parts[1]
                let inode = Int(parts[4]) ?? 0
                candidate = perms.count == 4 && perms.first == "r" && !perms.contains("w") && inode != 0
                resident = 0
                anonymous = -1
                locked = false
            } else if parts.count >= 2, let value = Int(parts[1]) {
                switch parts[0] {
                case "Rss:": resident = value
                case "Anonymous:": anonymous = value
                case "Locked:": locked = locked || value > 0
                default: break
                }
            } else if parts.first == "VmFlags:" {
                locked = locked || parts.contains("lo")
            }
        }
        close()
        return found
    }
}
