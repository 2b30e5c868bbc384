#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file's rows while the run is read: fixed-size chunks mapped from the system, so a file
/// never holds spare capacity beyond its last chunk, and released chunks go straight back.
///
/// Growing one array per file would keep up to half of each array unused, and freeing them
/// into the allocator would not lower the process's resident memory.
final class RowChunks {
    private static let chunkShift = 15
    static let chunkRows = 1 << chunkShift
    private static let chunkBytes = chunkRows * MemoryLayout<Transaction>.stride
    private var chunks: [UnsafeMutablePointer<Transaction>] = []
    private(set) var count = 0

    init() {}

    deinit {
        for c in chunks { munmap(UnsafeMutableRawPointer(c), RowChunks.chunkBytes) }
    }

    @inline(__always)
    func append(_ t: Transaction) {
        let k = count & (RowChunks.chunkRows - 1)
        if k == 0 { chunks.append(RowChunks.map()) }
        (chunks[chunks.count - 1] + k).initialize(to: t)
        count += 1
    }

    @inline(__always)
    subscript(i: Int) -> Transaction {
        chunks[i >> RowChunks.chunkShift][i & (RowChunks.chunkRows - 1)]
    }

    private static func map() -> UnsafeMutablePointer<Transaction> {
        guard
            let p = mmap(nil, chunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            p != MAP_FAILED
        else { fatalError("out of memory: cannot map \(chunkBytes) bytes for rows") }
        return p.bindMemory(to: Transaction.self, capacity: chunkRows)
    }
}
