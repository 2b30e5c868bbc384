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
