import CZlib
import Crypto
import Foundation
import Testing
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTesting
import WinBackWrite

/// Helpers for the read-stage tests: temporary folders, gzip writing with zlib, sample lines.
package enum ReadSupport {
    /// A fresh empty folder under the test process's temporary folder.
    package static func makeTempDir() throws -> URL {
        URL(fileURLWithPath: Paths.temporary(), isDirectory: true)
    }

    /// Runs `body` with a temporary folder, removed afterwards.
    package static func withTempDir<R>(_ body: (URL) throws -> R) throws -> R {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        return try body(dir)
    }

    /// One gzip member of `data`, compressed with zlib.
    package static func gzip(_ data: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        precondition(winback_deflateInit2(&stream, level, 16 + MAX_WBITS) == Z_OK)
        defer { deflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var input = data
        input.withUnsafeMutableBufferPointer { inp in
            stream.next_in = inp.baseAddress
            stream.avail_in = uInt(inp.count)
            while true {
                let ret = chunk.withUnsafeMutableBufferPointer { c -> Int32 in
                    stream.next_out = c.baseAddress
                    stream.avail_out = uInt(c.count)
                    return deflate(&stream, Z_FINISH)
                }
                out.append(contentsOf: chunk[0..<(chunk.count - Int(stream.avail_out))])
                if ret == Z_STREAM_END { break }
                precondition(ret == Z_OK || ret == Z_BUF_ERROR)
            }
        }
        return out
    }

    package static func gzip(_ text: String) -> [UInt8] { gzip(Array(text.utf8)) }

    @discardableResult
    package static func write(_ bytes: [UInt8], to url: URL) throws -> String {
        try Data(bytes).write(to: url)
        return url.path
    }

    @discardableResult
    package static func write(_ text: String, to url: URL) throws -> String {
        try write(Array(text.utf8), to: url)
    }

    /// Every decompressed byte of `path`, read through ``openSource(path:)``.
    package static func readAll(_ path: String, chunk: Int = 4096, inflater: Inflater = .zlib) throws -> [UInt8] {
        let source = try openSource(path: path, inflater: inflater)
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
            if n == 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return out
    }

    /// The lines `LineCursor.forEachLine` hands out for `path`, as (number, text).
    package static func lines(_ path: String, chunkSize: Int = 1 << 20, inflater: Inflater = .zlib) throws -> [(
        Int, String
    )] {
        var out: [(Int, String)] = []
        try LineCursor(source: try openSource(path: path, inflater: inflater), chunkSize: chunkSize).forEachLine {
            line, n in
            out.append((n, String(decoding: line, as: UTF8.self)))
        }
        return out
    }

    /// Hex SHA-256 of a file: its whole content read at once by Foundation and hashed in one
    /// call by swift-crypto, independent of the streaming reads and hashing under test.
    package static func sha256sum(_ path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}

/// Builds one transaction line as JSON, Apple's field names, with overrides.
package struct TxLine {
    package var fields: [(String, String)]

    /// A valid auto-renewable Production row.
    package init(
        id: String = "1000000000000001", original: String = "1000000000000001", signed: Int64? = 1_700_000_000_000,
        purchase: Int64 = 1_700_000_000_000, expires: Int64 = 1_702_592_000_000
    ) {
        fields = [
            ("transactionId", "\"\(id)\""),
            ("originalTransactionId", "\"\(original)\""),
            ("subscriptionGroupIdentifier", "\"21482345\""),
            ("productId", "\"com.example.pass.monthly\""),
            ("purchaseDate", "\(purchase)"),
            ("expiresDate", "\(expires)"),
            ("type", "\"Auto-Renewable Subscription\""),
            ("environment", "\"Production\""),
            ("inAppOwnershipType", "\"PURCHASED\""),
            ("storefront", "\"USA\""),
        ]
        if let signed { fields.append(("signedDate", "\(signed)")) }
    }

    /// Sets `key` to the raw JSON `value` (replacing it), or removes it when nil.
    package func with(_ key: String, _ value: String?) -> TxLine {
        var c = self
        if let i = c.fields.firstIndex(where: { $0.0 == key }) {
            if let value { c.fields[i].1 = value } else { c.fields.remove(at: i) }
        } else if let value {
            c.fields.append((key, value))
        }
        return c
    }

    package var json: String { "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}" }
}

/// Decodes lines with a fresh decoder and table.
package final class DecodeHarness {
    package let table = StringTable()
    package lazy var decoder = TransactionDecoder(table: table)

    package init() {}

    package func decode(_ line: String) -> TransactionDecoder.Outcome {
        var bytes = Array(line.utf8)
        return bytes.withUnsafeMutableBytes { decoder.decode(UnsafeRawBufferPointer($0)) }
    }

    package func decode(bytes: [UInt8]) -> TransactionDecoder.Outcome {
        bytes.withUnsafeBytes { decoder.decode($0) }
    }

    package func row(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) -> Transaction? {
        switch decode(line) {
        case .row(let t): return t
        case .nonSubscription:
            Issue.record("expected a row, got nonSubscription", sourceLocation: sourceLocation)
        case .rejected(let why):
            Issue.record("expected a row, got rejected: \(why)", sourceLocation: sourceLocation)
        }
        return nil
    }

    package func rejection(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) -> String? {
        switch decode(line) {
        case .rejected(let why): return why
        case let other:
            Issue.record("expected a rejection, got \(other)", sourceLocation: sourceLocation)
            return nil
        }
    }

    package func string(_ id: Int32) -> String? { id == Transaction.none ? nil : table.string(id) }
    package func string(_ key: TransactionKey) -> String { table.string(key) }
}

extension SplitMix64 {
    /// A value in 0..<n.
    package mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
