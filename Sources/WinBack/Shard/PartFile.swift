import Foundation

/// Part files (docs/rules.md §8.1): what one partition task read for one shard, private to
/// winback and versioned. `WBPART02`, then sections, one per input file with rows for the shard:
///
///     u32 file index (in sorted path order) · u32 n · n × (u32 length · bytes): the file's
///     string table, ids 0..<n · u64 rows · u64 bytes · u32 CRC-32 of the bytes · the rows,
///     encoded by ``RowCodec`` with ids in that table
///
/// Integers are little-endian. Rows keep the order the file gave them, so that a shard
/// deduplicates with the same (signedDate, file, line) order as a run in one process.
enum PartFile {
    static let magic = Array("WBPART02".utf8)
}

/// Appends sections to one part file; any thread, one section at a time.
// Sections are appended under `lock`.
final class PartWriter: @unchecked Sendable {
    let path: String
    private var fd: Int32
    private let lock = NSLock()
    private var rowCount = 0
    private var byteCount = 0

    init(path: String) throws {
        self.path = path
        do { fd = try System.createForWriting(path) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create", path: path)
        }
        try write(PartFile.magic)
    }

    deinit { if fd >= 0 { System.closeQuietly(fd) } }

    static func append<T: FixedWidthInteger>(_ v: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    private func write(_ bytes: [UInt8]) throws {
        do { try bytes.withUnsafeBytes { try System.writeAll(fd, $0) } } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot write", path: path)
        }
        byteCount += bytes.count
    }

    /// Writes the section of input file `file`: its whole string table and `rows`.
    func append(file: Int, table: StringTable, rows: UnsafeBufferPointer<Transaction>) throws {
        var out: [UInt8] = []
        out.reserveCapacity(64 + rows.count * 40)
        PartWriter.append(UInt32(file), to: &out)
        PartWriter.append(UInt32(table.count), to: &out)
        for id in 0..<Int32(table.count) {
            table.withBytes(id) { b in
                PartWriter.append(UInt32(b.count), to: &out)
                out.append(contentsOf: b)
            }
        }
        PartWriter.append(UInt64(rows.count), to: &out)
        let sizeAt = out.count
        PartWriter.append(UInt64(0), to: &out)
        PartWriter.append(UInt32(0), to: &out)
        let start = out.count
        RowCodec.encode(rows, into: &out)
        let n = out.count - start
        let crc = out.withUnsafeBytes { RowCodec.crc(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        withUnsafeBytes(of: UInt64(n).littleEndian) { for (i, b) in $0.enumerated() { out[sizeAt + i] = b } }
        withUnsafeBytes(of: crc.littleEndian) { for (i, b) in $0.enumerated() { out[sizeAt + 8 + i] = b } }
        lock.lock()
        defer { lock.unlock() }
        try write(out)
        rowCount += rows.count
    }

    /// Rows written so far.
    var rows: Int {
        lock.lock()
        defer { lock.unlock() }
        return rowCount
    }

    /// Bytes of the file written so far.
    var compressedBytes: Int {
        lock.lock()
        defer { lock.unlock() }
        return byteCount
    }

    /// Syncs and closes the file.
    func close() throws {
        lock.lock()
        defer { lock.unlock() }
        let fd = self.fd
        self.fd = -1
        if case let rc = System.fsync(fd), rc != 0 {
            System.closeQuietly(fd)
            throw SystemError("fsync", errno: rc).winBack(.cannotCreateOutput, "cannot sync", path: path)
        }
        do { try System.close(fd) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot close", path: path)
        }
    }
}

/// Reads the sections of one part file in order.
final class PartReader {
    let path: String
    private let fd: Int32
    private var scratch = [UInt8](repeating: 0, count: 1 << 16)

    init(path: String) throws {
        self.path = path
        do { fd = try System.openForReading(path) } catch let e as SystemError {
            throw e.winBack(.noInput, "cannot open", path: path)
        }
        var header = [UInt8](repeating: 0, count: PartFile.magic.count)
        guard (try? fill(&header, allowEnd: false)) == true, header == PartFile.magic else {
            System.closeQuietly(fd)
            throw WinBackError(.badData, "not a winback part file (or of another version)", path: path)
        }
    }

    deinit { System.closeQuietly(fd) }

    /// Reads exactly `buffer.count` bytes; false at a clean end of the file (nothing read).
    private func fill(_ buffer: UnsafeMutableRawBufferPointer, allowEnd: Bool) throws -> Bool {
        var off = 0
        while off < buffer.count {
            let n: Int
            do { n = try System.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[off...])) } catch let e
                as SystemError
            {
                throw e.winBack(.noInput, "cannot read", path: path)
            }
            if n == 0 {
                if off == 0 && allowEnd { return false }
                throw WinBackError(.badData, "part file ends inside a section (truncated)", path: path)
            }
            off += n
        }
        return true
    }

    private func fill(_ bytes: inout [UInt8], allowEnd: Bool) throws -> Bool {
        try bytes.withUnsafeMutableBytes { try fill($0, allowEnd: allowEnd) }
    }

    private func integer<T: FixedWidthInteger>(_: T.Type, allowEnd: Bool = false) throws -> T? {
        var v = T.zero
        let ok = try withUnsafeMutableBytes(of: &v) { try fill($0, allowEnd: allowEnd) }
        return ok ? T(littleEndian: v) : nil
    }

    /// The next section: the index of its input file, and its rows made by `make` (a file's rows
    /// of the shard, with the section's strings in its table); nil at the end of the part file.
    func next(into make: (_ file: Int) -> FileRows) throws -> (file: Int, rows: FileRows)? {
        guard let file = try integer(UInt32.self, allowEnd: true) else { return nil }
        let out = make(Int(file))
        let strings = Int(try integer(UInt32.self)!)
        for expected in 0..<strings {
            let n = Int(try integer(UInt32.self)!)
            guard n <= 1 << 20 else { throw WinBackError(.badData, "part file holds an impossible string", path: path) }
            if scratch.count < n { scratch = [UInt8](repeating: 0, count: n) }
            let id = try scratch.withUnsafeMutableBytes { b -> Int32 in
                let s = UnsafeMutableRawBufferPointer(rebasing: b[0..<n])
                _ = try fill(s, allowEnd: false)
                return out.table.intern(UnsafeRawBufferPointer(s))
            }
            guard id == Int32(expected) else {
                throw WinBackError(.badData, "part file repeats a string of its table", path: path)
            }
        }
        let rows = Int(try integer(UInt64.self)!)
        let bytes = Int(try integer(UInt64.self)!)
        let crc = try integer(UInt32.self)!
        guard bytes <= 1 << 40, rows <= bytes else {
            throw WinBackError(.badData, "part file section of an impossible size", path: path)
        }
        if scratch.count < bytes { scratch = [UInt8](repeating: 0, count: bytes) }
        try scratch.withUnsafeMutableBytes { b in
            let s = UnsafeMutableRawBufferPointer(rebasing: b[0..<bytes])
            _ = try fill(s, allowEnd: false)
            guard RowCodec.crc(UnsafeRawBufferPointer(s)) == crc else {
                throw WinBackError(.badData, "part file section damaged (CRC-32 mismatch)", path: path)
            }
            do {
                try RowCodec.decode(UnsafeRawBufferPointer(s), count: rows, strings: strings) { try out.add($0) }
            } catch is RowCodec.Malformed {
                throw WinBackError(.badData, "part file section does not decode", path: path)
            }
        }
        return (Int(file), out)
    }
}
