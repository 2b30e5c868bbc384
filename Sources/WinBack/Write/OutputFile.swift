import Crypto
import Foundation

/// What was written to one output file, for the manifest.
public struct OutputStats: Sendable, Equatable, Codable {
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

    /// Creates the file (replacing a file there, never through a link); with `exclusive`, only
    /// when nothing is at `path` yet.
    init(path: String, sync: DiskSync? = nil, exclusive: Bool = false) throws {
        self.path = path
        self.sync = sync
        do { fd = try exclusive ? System.createNew(path) : System.createForWriting(path) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create", path: path)
        }
        buffer.reserveCapacity(OutputFile.flushAt + 4096)
    }

    deinit { if fd >= 0 { System.closeQuietly(fd) } }

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
            do { try System.writeAll(fd, p) } catch let e as SystemError {
                throw e.winBack(.cannotCreateOutput, "cannot write", path: path)
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
        } else if case let rc = System.fsync(fd), rc != 0 {
            throw SystemError("fsync", errno: rc).winBack(.cannotCreateOutput, "cannot sync", path: path)
        }
        return (bytes, OutputFile.hex(hasher.finalize()))
    }

    /// Creates folder `path` (and its parents) for output files; exit 73 naming it when it
    /// cannot be made.
    static func makeFolder(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw WinBackError(
                .cannotCreateOutput, notAFolder(path) ?? "cannot create the folder: \(error.localizedDescription)",
                path: path)
        }
    }

    /// Why `path` cannot be a folder to write in, when something on the way is not a folder
    /// (`/out` is a file, so `/out/run` cannot be made); nil when nothing says so.
    static func notAFolder(_ path: String) -> String? {
        var prefix = ""
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + part
            guard let what = System.notRegular(prefix) else {
                if System.kind(prefix) == .file { return "\(prefix) is a file, not a folder" }
                return nil
            }
            if what != System.describe(System.folderType) { return "\(prefix) is \(what), not a folder" }
        }
        return nil
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
