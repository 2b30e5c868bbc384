import Crypto
import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackWrite

/// Identity rows split on disk by the hash of their key (``IdentityJoin``).
package final class IdentityBuckets {
    package static let bucketCount = 64
    package let folder: String
    package let columns: Int
    /// Bytes of records a group of buckets may hold in memory with its table.
    package let budget: Int
    private var writers: [IntermediateWriter] = []
    private var sizes: [(bytes: Int, rows: Int, sha256: String)] = []
    /// The group that answers each bucket, once grouped.
    private var groupOf: [Int] = []
    private var groups = 0
    /// Per list, per group: the answers file's name, size and SHA-256.
    private var answers: [String: [(String, Int, String)]] = [:]
    private var record: [UInt8] = []

    package init(folder: String, columns: Int, budget: Int) throws {
        self.folder = folder
        self.columns = columns
        self.budget = max(budget, 1 << 20)
        // What a killed run of the same work folder left goes first.
        discard()
        do { try System.makeDirectory(folder, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create the identities' work folder", path: folder)
        }
        writers = try (0..<Self.bucketCount).map { try IntermediateWriter(path: folder + "/bucket-\($0)") }
    }

    package static func bucket(_ key: UnsafeRawBufferPointer) -> Int { Int(IdentityIndex.hash(key) >> 58) }

    package static func bucket(_ key: String) -> Int {
        var k = key
        return k.withUTF8 { bucket(UnsafeRawBufferPointer($0)) }
    }

    package func add(key: UnsafeRawBufferPointer, values: [UnsafeRawBufferPointer]) throws {
        record.removeAll(keepingCapacity: true)
        IdentityIndex.appendRecord(key: key, values: values, to: &record)
        try writers[Self.bucket(key)].write(record)
    }

    /// Closes the buckets and groups them: consecutive buckets whose records and table fit
    /// ``budget`` load together.
    package func close() throws {
        sizes = try writers.map { try $0.finish() }
        writers = []
        var held = 0
        groupOf = []
        groups = 0
        for s in sizes {
            // The records, and a table of up to four slots of 8 bytes a row.
            let cost = s.bytes + s.rows * 4 * MemoryLayout<Int>.stride
            if groupOf.isEmpty || held + cost > budget {
                if !groupOf.isEmpty { groups += 1 }
                held = 0
            }
            held += cost
            groupOf.append(groups)
        }
        groups += 1
    }

    /// Loads each group in turn and writes, per list, the answers of the rows whose key falls
    /// in it; returns the rows whose key an earlier row had.
    package func answer(lists: [String], from source: SegmentSource, key: (SegmentRow) -> String) throws -> Int {
        var duplicates = 0
        var files: [[(String, Int, String)]] = Array(repeating: [], count: lists.count)
        for g in 0..<groups {
            let members = (0..<Self.bucketCount).filter { groupOf[$0] == g }
            // The records' bytes are the most the live rows can take: reserved once, never doubled.
            let index = IdentityIndex(
                columns: columns, reservingBytes: members.reduce(0) { $0 + sizes[$1].bytes },
                rows: members.reduce(0) { $0 + sizes[$1].rows })
            for b in members {
                // Record by record: a key repeated over and over costs its live row only.
                let r = try IntermediateReader(
                    path: folder + "/bucket-\(b)", bytes: sizes[b].bytes, sha256: sizes[b].sha256)
                try r.forEachRecord(columns: columns) { index.insert(key: $0, values: $1) }
                System.unlinkIfPresent(folder + "/bucket-\(b)")
            }
            duplicates += index.replaced
            for (l, list) in lists.enumerated() {
                let name = folder + "/answers-\(g)-\(l)"
                let out = try IntermediateWriter(path: name)
                try source.forEachRow(of: list) { f in
                    let k = key(f)
                    guard groupOf[Self.bucket(k)] == g else { return }
                    record.removeAll(keepingCapacity: true)
                    if let r = index.find(k) {
                        record.append(1)
                        for c in 0..<columns {
                            let v = index.value(r, c)
                            record.append(UInt8(truncatingIfNeeded: v.utf8.count))
                            record.append(UInt8(truncatingIfNeeded: v.utf8.count >> 8))
                            record.append(contentsOf: v.utf8)
                        }
                    } else {
                        record.append(0)
                    }
                    try out.write(record)
                }
                let (bytes, _, sha) = try out.finish()
                files[l].append((name, bytes, sha))
            }
        }
        for (l, list) in lists.enumerated() { answers[list] = files[l] }
        return duplicates
    }

    /// Reads `list` with its answers, in segment order.
    package func read(
        list: String, from source: SegmentSource, key: (SegmentRow) -> String,
        _ row: (SegmentRow, [String]?) throws -> Void
    ) throws {
        guard let files = answers[list] else {
            throw WinBackError(.badData, "no identities were joined to this list", path: list)
        }
        let readers = try files.map { try IntermediateReader(path: $0.0, bytes: $0.1, sha256: $0.2) }
        try source.forEachRow(of: list) { f in
            let r = readers[groupOf[Self.bucket(key(f))]]
            guard try r.byte() == 1 else { return try row(f, nil) }
            var values: [String] = []
            for _ in 0..<columns {
                let n = Int(try r.byte()) | Int(try r.byte()) << 8
                values.append(String(decoding: try r.bytes(n), as: UTF8.self))
            }
            try row(f, values)
        }
        for r in readers where !r.atEnd {
            throw WinBackError(.badData, "an identities answers file is longer than its list", path: r.path)
        }
    }

    package func discard() { Self.removeFolder(folder) }

    /// A work folder of `what`'s own (made anew: what a killed run left there goes first) with
    /// one writer per bucket, `<name>-<bucket>`.
    package static func writers(in folder: String, named name: String, for what: String) throws -> [IntermediateWriter]
    {
        removeFolder(folder)
        do { try System.makeDirectory(folder, mode: 0o700) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create the work folder of \(what)", path: folder)
        }
        return try (0..<bucketCount).map { try IntermediateWriter(path: folder + "/\(name)-\($0)") }
    }

    /// Removes a work folder of the run's own files (buckets, answers): each file, then the folder.
    package static func removeFolder(_ folder: String) {
        // A link in its place is removed, never followed.
        if System.linkKind(folder) == System.symbolicLinkType { return System.unlinkIfPresent(folder) }
        for name in System.entries(folder) {
            System.unlinkIfPresent(folder + "/" + name)
        }
        System.removeTreeQuietly(folder)
    }
}

/// A file of the run's own, written through a buffer and hashed as it goes (neither synced nor
/// published: it lives only while the run does).
package final class IntermediateWriter {
    private let file: OutputFile
    private var rows = 0

    /// 32 KiB of buffer: a join writes 64 buckets at once.
    package init(path: String) throws {
        file = try OutputFile(path: path, exclusive: true, durable: false, bufferBytes: 32 << 10)
    }

    package func write(_ record: [UInt8]) throws {
        try file.write(record)
        rows += 1
    }

    /// Flushes and closes; returns (bytes, records, SHA-256).
    package func finish() throws -> (bytes: Int, rows: Int, sha256: String) {
        let (bytes, sha) = try file.finish()
        return (bytes, rows, sha)
    }
}

/// Reads a file this run wrote, sequentially, after checking it whole (size and SHA-256).
package final class IntermediateReader {
    package let path: String
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var at = 0
    private var eof = false

    package init(path: String, bytes: Int, sha256: String) throws {
        self.path = path
        do {
            let (fd, size) = try System.openRegularFile(path, followLinks: false)
            self.fd = fd
            var hasher = SHA256()
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            var total = 0
            while true {
                let n = try chunk.withUnsafeMutableBytes { try System.read(fd, into: $0) }
                if n == 0 { break }
                chunk.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<n])) }
                total += n
            }
            // Thrown once the descriptor is held: deinit closes it.
            guard size == bytes, total == bytes, Hex.string(hasher.finalize()) == sha256 else {
                throw WinBackError(.badData, "a file of the run does not match what it wrote", path: path)
            }
            try System.seek(fd, to: 0)
        } catch let e as SystemError {
            throw e.winBack(.badData, "cannot read a file of the run", path: path)
        }
    }

    /// Calls `body` with each record's key and `columns` values (``IdentityIndex`` records).
    package func forEachRecord(
        columns: Int, _ body: (UnsafeRawBufferPointer, [UnsafeRawBufferPointer]) throws -> Void
    ) throws {
        var flat: [UInt8] = []
        var ranges: [Range<Int>] = []
        while !atEnd {
            flat.removeAll(keepingCapacity: true)
            ranges.removeAll(keepingCapacity: true)
            for _ in 0...columns {
                let n = Int(try byte()) | Int(try byte()) << 8
                ranges.append(flat.count..<(flat.count + n))
                flat.append(contentsOf: try bytes(n))
            }
            try flat.withUnsafeBytes { p in
                let parts = ranges.map { UnsafeRawBufferPointer(rebasing: p[$0]) }
                try body(parts[0], Array(parts.dropFirst()))
            }
        }
    }

    deinit { System.closeQuietly(fd) }

    package var atEnd: Bool {
        if at < buffer.count { return false }
        return (try? fill()) == false
    }

    /// Reads more; false at the end of the file.
    @discardableResult
    private func fill() throws -> Bool {
        if eof { return false }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let n: Int
        do { n = try chunk.withUnsafeMutableBytes { try System.read(fd, into: $0) } } catch let e as SystemError {
            throw e.winBack(.badData, "cannot read a file of the run", path: path)
        }
        if n == 0 {
            eof = true
            return false
        }
        buffer = Array(buffer[at...]) + chunk[..<n]
        at = 0
        return true
    }

    package func byte() throws -> UInt8 {
        while at >= buffer.count {
            guard try fill() else {
                throw WinBackError(.badData, "an identities answers file ends early", path: path)
            }
        }
        defer { at += 1 }
        return buffer[at]
    }

    package func bytes(_ n: Int) throws -> ArraySlice<UInt8> {
        while buffer.count - at < n {
            guard try fill() else {
                throw WinBackError(.badData, "an identities answers file ends early", path: path)
            }
        }
        defer { at += n }
        return buffer[at..<(at + n)]
    }
}
