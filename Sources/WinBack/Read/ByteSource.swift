import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A stream of a file's (decompressed) bytes, read in chunks.
protocol ByteSource: AnyObject {
    /// Fills `buffer` from the front; returns how many bytes were written, 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Bytes of the file itself consumed so far (compressed bytes for gzip).
    var fileBytesConsumed: Int { get }
    /// Bytes handed out by `read` so far (decompressed bytes for gzip).
    var bytesProduced: Int { get }
    /// SHA-256 (hex) of the file's bytes read so far: of the whole file once at its end.
    func fileSHA256() -> String
}

/// An open file descriptor, closed when the owner goes away.
final class FileHandleFD {
    let fd: Int32
    let path: String
    @exclusivity(unchecked) private var hasher = SHA256()

    init(path: String) throws {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw WinBackError(.noInput, "cannot open: \(String(cString: strerror(errno)))", path: path)
        }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw WinBackError(.noInput, "is a directory, not a file", path: path)
        }
        self.fd = fd
    }

    /// Reads up to `buffer.count` bytes; retries on EINTR.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n = Glibc_read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 {
                hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                return n
            }
            if errno == EINTR { continue }
            throw WinBackError(.noInput, "cannot read: \(String(cString: strerror(errno)))", path: path)
        }
    }

    /// Hex SHA-256 of every byte read so far.
    func sha256() -> String {
        hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    deinit { close(fd) }
}

@inline(__always)
private func Glibc_read(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int) -> Int {
    #if canImport(Glibc)
        return Glibc.read(fd, p, n)
    #else
        return Darwin.read(fd, p, n)
    #endif
}

/// A plain (uncompressed) file.
final class PlainFileSource: ByteSource {
    private let file: FileHandleFD
    @exclusivity(unchecked) private(set) var fileBytesConsumed = 0

    init(path: String) throws { file = try FileHandleFD(path: path) }

    func fileSHA256() -> String { file.sha256() }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = try file.read(into: buffer)
        fileBytesConsumed += n
        return n
    }

    var bytesProduced: Int { fileBytesConsumed }
}

/// A callback for a reader's `afterChunk`: reports the file bytes consumed since the last call.
func progressTap(_ source: ByteSource, _ progress: @escaping @Sendable (Int) -> Void) -> () -> Void {
    var last = 0
    return {
        let c = source.fileBytesConsumed
        progress(c - last)
        last = c
    }
}

/// Opens `path` as a byte source: gzip (inflated by `inflater`) when it ends in `.gz` (any
/// case), plain otherwise.
func openSource(path: String, inflater: Inflater = .zlib) throws -> ByteSource {
    isGzipName(path) ? try GzipFileSource(path: path, inflater: inflater) : try PlainFileSource(path: path)
}

/// Whether a file's name says gzip: `.gz`, `.GZ`, `.Gz`.
func isGzipName(_ path: String) -> Bool {
    path.suffix(3).lowercased() == ".gz"
}
