import Crypto
import Foundation
import WinBackSupport

/// A stream of a file's (decompressed) bytes, read in chunks.
package protocol ByteSource: AnyObject {
    /// Fills `buffer` from the front; returns how many bytes were written, 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Bytes of the file itself consumed so far (compressed bytes for gzip).
    var fileBytesConsumed: Int { get }
    /// Bytes handed out by `read` so far (decompressed bytes for gzip).
    var bytesProduced: Int { get }
    /// SHA-256 (hex) of the file's bytes read so far: of the whole file once at its end.
    func fileSHA256() -> String
    /// Once every line is read, what names lines `numbers` better than their number (a table's
    /// row: its cursor value, docs/rules.md §14.1); empty for a file.
    func lineNames(_ numbers: [Int]) -> [Int: String]
}

extension ByteSource {
    /// Fills `chunk` from the front, as ``read(into:)-(UnsafeMutableRawBufferPointer)`` does;
    /// returns how many bytes were written, 0 at the end.
    package func read(into chunk: inout [UInt8]) throws -> Int {
        try chunk.withUnsafeMutableBytes { try read(into: $0) }
    }
}

extension ByteSource {
    package func lineNames(_ numbers: [Int]) -> [Int: String] { [:] }
}

/// The raw bytes of an input, before any inflating: a local file or an object in S3.
protocol RawInput: AnyObject {
    /// The file's path or the object's URI, for messages.
    var path: String { get }
    /// Reads up to `buffer.count` bytes; 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Hex SHA-256 of every byte read so far.
    func sha256() -> String
}

/// An open file descriptor, closed when the owner goes away.
final class FileHandleFD: RawInput {
    let fd: Int32
    let path: String
    @exclusivity(unchecked) private var hasher = SHA256()

    /// Size of the file when it was opened.
    let size: Int

    /// Opens a regular file (docs/rules.md §6.1): a FIFO, a device, a socket or a folder is an
    /// input error (66) before anything is read; without `followLinks`, so is a link. Without
    /// `hashed`, no digest is kept (``sha256()`` means nothing).
    init(path: String, followLinks: Bool = true, hashed: Bool = true) throws {
        self.path = path
        hashing = hashed
        do { (fd, size) = try System.openRegularFile(path, followLinks: followLinks) } catch let e as SystemError {
            throw e.winBack(.noInput, "cannot open", path: path)
        } catch let e as System.NotRegularFile {
            throw WinBackError(.noInput, "is \(e.what), not a regular file", path: path)
        }
    }

    /// Reads up to `buffer.count` bytes.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n: Int
        do { n = try System.read(fd, into: buffer) } catch let e as SystemError {
            throw e.winBack(.noInput, "cannot read", path: path)
        }
        if hashing { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
        return n
    }

    /// False once the reader has moved: the digest of a file read out of order means nothing.
    @exclusivity(unchecked) private var hashing = true

    /// Reads on from `offset`; the file's digest is no longer kept.
    func seek(to offset: Int) throws {
        hashing = false
        do { try System.seek(fd, to: offset) } catch let e as SystemError {
            throw e.winBack(.noInput, "cannot read", path: path)
        }
    }

    /// Hex SHA-256 of every byte read so far.
    func sha256() -> String {
        Hex.string(hasher.finalize())
    }

    deinit { System.closeQuietly(fd) }
}

/// A plain (uncompressed) file.
package final class PlainFileSource: ByteSource {
    private let file: FileHandleFD
    @exclusivity(unchecked) package private(set) var fileBytesConsumed = 0

    /// - Parameter hashed: whether the file's SHA-256 is kept as it is read (``fileSHA256()``);
    ///   a file this run just wrote and reads back needs none.
    package init(path: String, followLinks: Bool = true, hashed: Bool = true) throws {
        file = try FileHandleFD(path: path, followLinks: followLinks, hashed: hashed)
    }

    package func fileSHA256() -> String { file.sha256() }

    /// Size of the file when it was opened.
    package var size: Int { file.size }

    /// Reads the file through, its bytes hashed as they go (``fileSHA256()``), and stops once
    /// more than `limit` bytes were read: a file checked against its recorded size and digest.
    package func readThrough(stoppingPast limit: Int = .max) throws {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 18, alignment: 16)
        defer { chunk.deallocate() }
        while try read(into: chunk) > 0 {
            guard fileBytesConsumed <= limit else { return }
        }
    }

    /// Goes on reading at `offset` (the file's digest no longer means anything).
    package func seek(to offset: Int) throws {
        try file.seek(to: offset)
        fileBytesConsumed = offset
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = try file.read(into: buffer)
        fileBytesConsumed += n
        return n
    }

    package var bytesProduced: Int { fileBytesConsumed }
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

/// Opens `path` as a byte source, from the store it is kept in as it is now: gzip (inflated by
/// `inflater`) when it ends in `.gz` (any case), plain otherwise.
package func openSource(path: String, inflater: Inflater = .zlib) throws -> ByteSource {
    let store = try InputStores.store(for: path)
    if store is LocalStore {
        return isGzipName(path) ? try GzipFileSource(path: path, inflater: inflater) : try PlainFileSource(path: path)
    }
    return try source(store.open(path), inflater: inflater)
}

/// Opens `input` as resolved (an object changed since is an error): gzip (inflated by
/// `inflater`) when its name ends in `.gz` (any case), plain otherwise.
package func openSource(input: Input, inflater: Inflater = .zlib) throws -> ByteSource {
    let store = try InputStores.store(for: input.path)
    if store is LocalStore { return try openSource(path: input.path, inflater: inflater) }
    return try source(store.open(input), inflater: inflater)
}

private func source(_ raw: RawInput, inflater: Inflater) throws -> ByteSource {
    isGzipName(raw.path) ? try GzipFileSource(input: raw, inflater: inflater) : RawSource(raw)
}

/// Any raw input as it is (an uncompressed object in S3).
final class RawSource: ByteSource {
    private let input: RawInput
    @exclusivity(unchecked) private(set) var fileBytesConsumed = 0

    init(_ input: RawInput) { self.input = input }

    func fileSHA256() -> String { input.sha256() }

    func lineNames(_ numbers: [Int]) -> [Int: String] { (input as? TableInput)?.lineNames(numbers) ?? [:] }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = try input.read(into: buffer)
        fileBytesConsumed += n
        return n
    }

    var bytesProduced: Int { fileBytesConsumed }
}

/// Whether a file's name says gzip: `.gz`, `.GZ`, `.Gz`.
package func isGzipName(_ path: String) -> Bool {
    path.suffix(3).lowercased() == ".gz"
}
