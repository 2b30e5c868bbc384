import Crypto
import Foundation
import WinBackSupport

/// What was written to one output file, for the manifest.
public struct OutputStats: Sendable, Equatable, Codable {
    package init(path: String, bytes: Int, rows: Int, sha256: String) {
        self.path = path
        self.bytes = bytes
        self.rows = rows
        self.sha256 = sha256
    }

    /// Path relative to the run folder.
    public var path: String
    public var bytes: Int
    /// Data rows (records after the header; customers for XML).
    public var rows: Int
    public var sha256: String
}

/// A file written through a large buffer, hashed as it goes, synced to disk on close: at
/// once, or in the background by a ``DiskSync`` that the run waits for before publishing.
package final class OutputFile {
    let path: String
    /// -1 once handed to `sync`.
    @exclusivity(unchecked) private var fd: Int32
    private let sync: DiskSync?
    @exclusivity(unchecked) private var buffer: [UInt8] = []
    @exclusivity(unchecked) private var hasher = SHA256()
    @exclusivity(unchecked) private(set) var bytes = 0
    static let flushAt = 1 << 20

    /// Whether ``finish()`` syncs the file to disk (false: a file that lives only while the run
    /// does, checked by its SHA-256 before it is read again).
    private let durable: Bool

    /// Creates the file (replacing a file there, never through a link); with `exclusive`, only
    /// when nothing is at `path` yet.
    /// The bytes kept before they are written: ``flushAt`` unless given (a run writing many
    /// files at once, such as the buckets of an identities join, gives less).
    private let bufferBytes: Int

    package init(
        path: String, sync: DiskSync? = nil, exclusive: Bool = false, durable: Bool = true,
        bufferBytes: Int = OutputFile.flushAt, group: gid_t? = nil
    ) throws {
        self.path = path
        self.sync = sync
        self.durable = durable
        self.bufferBytes = bufferBytes
        do {
            fd = try exclusive ? System.createNew(path) : System.createForWriting(path)
            // 0640 whatever the umask, with the run's group (docs/rules.md §6.1), set as it is
            // made: the publish never opens it again for its mode.
            do { try System.secure(fd, mode: 0o640, group: group ?? sync?.group) } catch {
                System.closeQuietly(fd)
                throw error
            }
        } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create", path: path)
        }
        // All the room at once: pages the buffer never reaches are never touched, and it is
        // never copied as it grows.
        buffer.reserveCapacity(bufferBytes + 4096)
    }

    deinit { if fd >= 0 { System.closeQuietly(fd) } }

    @inline(__always)
    package func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// Buffers `bytes`; as many as the buffer holds or more (a segment file's piece) go to the
    /// file as they are, after what was buffered, never copied.
    package func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count >= bufferBytes else {
            buffer.append(contentsOf: bytes)
            if buffer.count >= bufferBytes { try flush() }
            return
        }
        try flush()
        try put(bytes)
    }

    /// Hashes and writes `p` (nothing buffered before it).
    private func put(_ p: UnsafeRawBufferPointer) throws {
        hasher.update(bufferPointer: p)
        do { try System.writeAll(fd, p) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot write", path: path)
        }
        bytes += p.count
    }

    /// Appends through `body`, flushing when the buffer is large.
    @inline(__always)
    func append(_ body: (inout [UInt8]) -> Void) throws {
        body(&buffer)
        if buffer.count >= bufferBytes { try flush() }
    }

    func flush() throws {
        if buffer.isEmpty { return }
        try buffer.withUnsafeBytes { try put($0) }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, then syncs and closes (or hands the file to `sync` for that); returns (bytes,
    /// hex SHA-256).
    package func finish() throws -> (Int, String) {
        try flush()
        if !durable {
            try System.close(fd)
            fd = -1
        } else if let sync {
            sync.sync(fd, path: path)
            fd = -1
        } else if case let rc = System.fsync(fd), rc != 0 {
            throw SystemError("fsync", errno: rc).winBack(.cannotCreateOutput, "cannot sync", path: path)
        }
        return (bytes, Hex.string(hasher.finalize()))
    }

    /// Creates folder `path` (and its parents) for output files; exit 73 naming it when it
    /// cannot be made.
    package static func makeFolder(_ path: String) throws {
        do {
            try System.makeFolders(path)
        } catch {
            throw WinBackError(
                .cannotCreateOutput, "cannot create the folder: \(folderProblem(path, error))", path: path)
        }
    }

    /// Why folder `path` could not be created, in words for a message: the first part of the
    /// path that exists but is not a folder (`/srv/out is a file, not a folder`), else the
    /// system's words for `error` (`Permission denied`).
    static func folderProblem(_ path: String, _ error: Error) -> String {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            let kind = System.kind(prefix)
            if kind == .missing { break }
            if kind == .file { return "\(prefix) is a file, not a folder" }
            if kind == .other { return "\(prefix) is not a folder" }
        }
        if let e = error as? SystemError { return e.message }
        let nsError = error as NSError
        if let posix = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return SystemError("mkdir", errno: Int32(posix.code)).message
        }
        return nsError.localizedDescription
    }
}
