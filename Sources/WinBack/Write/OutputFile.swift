import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What was written to one output file, for the manifest.
public struct OutputStats: Sendable, Equatable {
    /// Path relative to the run folder.
    public var path: String
    public var bytes: Int
    /// Data rows (records after the header; customers for XML).
    public var rows: Int
    public var sha256: String
}

/// A file written through a large buffer, hashed as it goes, synced to disk on close: at
/// once, or in the background by a ``DiskSync`` that the run waits for before publishing.
final class OutputFile {
    let path: String
    /// -1 once handed to `sync`.
    @exclusivity(unchecked) private var fd: Int32
    private let sync: DiskSync?
    @exclusivity(unchecked) private var buffer: [UInt8] = []
    @exclusivity(unchecked) private var hasher = SHA256()
    @exclusivity(unchecked) private(set) var bytes = 0
    static let flushAt = 1 << 20

    init(path: String, sync: DiskSync? = nil) throws {
        self.path = path
        self.sync = sync
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw WinBackError(.cannotCreateOutput, "cannot create: \(String(cString: strerror(errno)))", path: path)
        }
        buffer.reserveCapacity(OutputFile.flushAt + 4096)
    }

    deinit { if fd >= 0 { close(fd) } }

    @inline(__always)
    func write(_ bytes: [UInt8]) throws {
        buffer.append(contentsOf: bytes)
        if buffer.count >= OutputFile.flushAt { try flush() }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        buffer.append(contentsOf: bytes)
        if buffer.count >= OutputFile.flushAt { try flush() }
    }

    /// Appends through `body`, flushing when the buffer is large.
    @inline(__always)
    func append(_ body: (inout [UInt8]) -> Void) throws {
        body(&buffer)
        if buffer.count >= OutputFile.flushAt { try flush() }
    }

    func flush() throws {
        try buffer.withUnsafeBytes { p in
            hasher.update(bufferPointer: p)
            var off = 0
            while off < p.count {
                let n = Glibc.write(fd, p.baseAddress! + off, p.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw WinBackError(
                        .cannotCreateOutput, "cannot write: \(String(cString: strerror(errno)))", path: path)
                }
                off += n
            }
        }
        bytes += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, then syncs and closes (or hands the file to `sync` for that); returns (bytes,
    /// hex SHA-256).
    func finish() throws -> (Int, String) {
        try flush()
        if let sync {
            sync.sync(fd, path: path)
            fd = -1
        } else if fsync(fd) != 0 {
            throw WinBackError(.cannotCreateOutput, "cannot sync: \(String(cString: strerror(errno)))", path: path)
        }
        return (bytes, OutputFile.hex(hasher.finalize()))
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in digest {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
