import Crypto
import Foundation
import WinBackRead
import WinBackSupport

/// A file winback wrote itself and reads back (a work folder's JSON, a lock's holder), trusted
/// no more than an input (docs/rules.md §6.1, §8.1).
package enum IntermediateFile {
    /// The bytes of an intermediate file: a regular file not reached through a link, at most
    /// `limit` bytes (65 otherwise, 66 when it cannot be read).
    package static func read(_ path: String, limit: Int) throws -> [UInt8] {
        let source = try open(path)
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = try source.read(into: &chunk)
            if n == 0 { return out }
            guard out.count + n <= limit else {
                throw WinBackError(.badData, "intermediate file is larger than winback writes", path: path)
            }
            out += chunk[0..<n]
        }
    }

    /// An intermediate file opened to be read: a regular file not reached through a link (65
    /// when something else is there, 66 when it cannot be opened).
    package static func open(_ path: String) throws -> PlainFileSource {
        do { return try PlainFileSource(path: path, followLinks: false) } catch let e as WinBackError {
            throw e.code == .noInput && System.kind(path, followLinks: false) != .file
                ? WinBackError(.badData, "intermediate file is not a regular file", path: path) : e
        }
    }
}

/// JSON a run writes for itself (markers, ledgers), a checksum line after it.
extension IntermediateFile {
    /// Writes `value` as JSON, synced, followed by a line holding the SHA-256 of the JSON
    /// (docs/rules.md §8.1): `sha256 <64 hex digits>`. ``readJSON(_:from:)`` checks it before
    /// it decodes anything.
    @discardableResult
    package static func writeJSON<T: Encodable>(_ value: T, to path: String) throws -> (bytes: Int, sha256: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var body = Array(try encoder.encode(value))
        body.append(UInt8(ascii: "\n"))
        let trailer = Array((checksumPrefix + Hex.string(SHA256.hash(data: body)) + "\n").utf8)
        let f = try OutputFile(path: path)
        try f.write(body + trailer)
        return try f.finish()
    }

    package static let checksumPrefix = "sha256 "

    /// Reads JSON written by ``writeJSON(_:to:)``, its checksum line checked first: a file
    /// damaged anywhere, cut short or not written by winback is bad data (65). Nil when the
    /// file is missing. The digest is the SHA-256 of the whole file.
    package static func readJSON<T: Decodable>(_ type: T.Type, from path: String) throws -> (T, digest: String)? {
        guard System.kind(path, followLinks: false) != .missing else { return nil }
        let bytes = try IntermediateFile.read(path, limit: 1 << 30)
        let trailerCount = checksumPrefix.utf8.count + 64 + 1
        guard bytes.count > trailerCount, bytes.last == UInt8(ascii: "\n") else {
            throw WinBackError(.badData, "damaged intermediate file: no checksum line (cut short?)", path: path)
        }
        let body = bytes[..<(bytes.count - trailerCount)]
        let trailer = String(decoding: bytes[(bytes.count - trailerCount)...], as: UTF8.self)
        guard trailer == checksumPrefix + Hex.string(SHA256.hash(data: body)) + "\n" else {
            throw WinBackError(.badData, "damaged intermediate file: its checksum does not match", path: path)
        }
        do {
            return (try JSONDecoder().decode(type, from: Data(body)), Hex.string(SHA256.hash(data: bytes)))
        } catch {
            throw WinBackError(.badData, "intermediate file does not decode (\(error))", path: path)
        }
    }

    /// Checks that the file at `path` has the size and SHA-256 recorded when it was written
    /// (docs/rules.md §8.1): 65 naming it when it differs, 66 when it is missing.
    package static func check(_ path: String, against expected: OutputStats) throws {
        guard System.kind(path, followLinks: false) != .missing else {
            throw WinBackError(.noInput, "an output of this task is missing", path: path)
        }
        let source = try IntermediateFile.open(path)
        try source.readThrough(stoppingPast: expected.bytes)
        guard source.fileBytesConsumed == expected.bytes, source.fileSHA256() == expected.sha256 else {
            throw WinBackError(
                .badData, "damaged intermediate file: its size or SHA-256 differs from what its task wrote",
                path: path)
        }
    }
}
