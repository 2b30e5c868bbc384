import Foundation

/// Part files (docs/rules.md §8.1): what one partition task read for one shard, private to
/// winback and versioned. A gzip stream (level 1) of a header — `WBPART01` and the byte stride
/// of a row — then sections, one per input file with rows for the shard:
///
///     u32 file index (in sorted path order) · u32 n · n × (u32 length · bytes): the file's
///     string table, ids 0..<n · u64 rows · rows × stride bytes: the rows, ids in that table
///
/// Rows are stored as they are held in memory, in the order the file gave them, so that a
/// shard deduplicates with the same (signedDate, file, line) order as a run in one process.
/// All tasks of a run must therefore use the same winback build (the stride is checked).
enum PartFile {
    static let magic = Array("WBPART01".utf8)
    static var stride: Int { MemoryLayout<Transaction>.stride }
}

/// Appends sections to one part file; any thread, one section at a time.
// Sections are appended under `lock`.
final class PartWriter: @unchecked Sendable {
    let path: String
    private let out: GzipWriter
    private let lock = NSLock()
    /// Rows written so far.
    private var rowCount = 0

    init(path: String) throws {
        self.path = path
        out = try GzipWriter(path: path, level: 1)
        var header = PartFile.magic
        PartWriter.append(UInt32(PartFile.stride), to: &header)
        try out.write(header)
    }

    static func append<T: FixedWidthInteger>(_ v: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    /// Writes the section of input file `file`: its whole string table and `rows`.
    func append(file: Int, table: StringTable, rows: UnsafeBufferPointer<Transaction>) throws {
        var head: [UInt8] = []
        PartWriter.append(UInt32(file), to: &head)
        PartWriter.append(UInt32(table.count), to: &head)
        for id in 0..<Int32(table.count) {
            table.withBytes(id) { b in
                PartWriter.append(UInt32(b.count), to: &head)
                head.append(contentsOf: b)
            }
        }
        PartWriter.append(UInt64(rows.count), to: &head)
        lock.lock()
        defer { lock.unlock() }
        try out.write(head)
        try out.write(UnsafeRawBufferPointer(rows))
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
        return out.compressedBytes
    }

    /// Ends the stream and syncs the file.
    func close() throws {
        lock.lock()
        defer { lock.unlock() }
        try out.close(sync: true)
    }
}

/// Reads the sections of one part file in order.
final class PartReader {
    let path: String
    private let source: ByteSource
    private var scratch = [UInt8](repeating: 0, count: 1 << 16)

    init(path: String, inflater: Inflater) throws {
        self.path = path
        source = try GzipFileSource(path: path, inflater: inflater)
        var header = [UInt8](repeating: 0, count: PartFile.magic.count + 4)
        guard try fill(&header, allowEnd: false), Array(header[0..<PartFile.magic.count]) == PartFile.magic else {
            throw WinBackError(.badData, "not a winback part file (or of another version)", path: path)
        }
        let stride = header.withUnsafeBytes {
            Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        }
        guard stride == PartFile.stride else {
            throw WinBackError(
                .configuration,
                "written by another winback build (row stride \(stride), this build \(PartFile.stride)); "
                    + "run every task with the same build", path: path)
        }
    }

    /// Reads exactly `buffer.count` bytes; false at a clean end of the file (nothing read).
    private func fill(_ buffer: UnsafeMutableRawBufferPointer, allowEnd: Bool) throws -> Bool {
        var off = 0
        while off < buffer.count {
            let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[off...]))
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
        var remaining = Int(try integer(UInt64.self)!)
        let batch = 4096
        let buffer = UnsafeMutableBufferPointer<Transaction>.allocate(capacity: batch)
        defer { buffer.deallocate() }
        while remaining > 0 {
            let k = min(batch, remaining)
            _ = try fill(
                UnsafeMutableRawBufferPointer(
                    rebasing: UnsafeMutableRawBufferPointer(buffer)[0..<(k * PartFile.stride)]), allowEnd: false)
            for i in 0..<k { try out.add(buffer[i]) }
            remaining -= k
        }
        return (Int(file), out)
    }

    /// Bytes of the part file read so far.
    var fileBytesConsumed: Int { source.fileBytesConsumed }
}
