import Crypto
import Foundation
import WinBackModel
import WinBackSupport

/// Part files (docs/rules.md §8.1): what one partition task read for one shard, private to
/// winback and versioned. `WBPART05`, then sections of rows of input files for the shard:
///
///     u32 file index (in sorted path order) · u32 first · u32 n · n × (u32 length · bytes):
///     the strings first..<first + n of the file's string table · u64 rows · u64 bytes ·
///     u32 CRC-32 of the bytes · the rows and their shared columns, encoded by ``RowCodec``
///     with ids in that table
///
/// A large file is written in several sections as it is read (so a partition task never holds
/// a whole file's rows), each adding the strings the file's table gained since the file's
/// previous section in the same part file; the sections of one file are in its line order.
///
/// Integers are little-endian. Rows keep the order the file gave them, so that a shard
/// deduplicates with the same (signedDate, file, line) order as a run in one process.
///
/// The partition task's marker records each part file's size and the SHA-256 of all its bytes;
/// the reader checks every length against the bytes left and the digest at the end, before the
/// shard writes anything, so a damaged part file is bad data (65), never different rows.
package enum PartFile {
    package static let magic = Array("WBPART05".utf8)
}

/// Appends sections to one part file; any thread, one section at a time.
// Sections are appended under `lock`.
package final class PartWriter: @unchecked Sendable {
    package let path: String
    private var fd: Int32
    private let lock = NSLock()
    private var rowCount = 0
    private var byteCount = 0
    private var hasher = SHA256()

    package init(path: String) throws {
        self.path = path
        do { fd = try System.createNew(path) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create", path: path)
        }
        try write(PartFile.magic)
    }

    deinit { if fd >= 0 { System.closeQuietly(fd) } }

    package static func append<T: FixedWidthInteger>(_ v: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    private func write(_ bytes: [UInt8]) throws {
        do { try bytes.withUnsafeBytes { try System.writeAll(fd, $0) } } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot write", path: path)
        }
        hasher.update(data: bytes)
        byteCount += bytes.count
    }

    /// Writes the section of input file `file`: its whole string table and `rows`.
    package func append(file: Int, table: StringTable, from first: Int = 0, rows: [Transaction]) throws {
        try append(file: file, table: table, from: first, rows: rows.span)
    }

    /// ``append(file:table:from:rows:)`` of a span of rows.
    package func append(file: Int, table: StringTable, from first: Int = 0, rows: Span<Transaction>) throws {
        try rows.withUnsafeBufferPointer { try append(file: file, table: table, from: first, rows: $0) }
    }

    package func append(file: Int, table: StringTable, from first: Int = 0, rows: UnsafeBufferPointer<Transaction>)
        throws
    {
        try append(file: file, table: table, from: first, count: rows.count) { rows[$0] }
    }

    /// ``append(file:table:from:rows:)`` of `count` rows, row i being `row(i)` (called twice
    /// for each): rows kept compact elsewhere are made into transactions only as they are encoded.
    package func append(file: Int, table: StringTable, from first: Int = 0, count: Int, row: (Int) -> Transaction)
        throws
    {
        try append(file: file, table: table, from: first, count: count) {
            RowCodec.encode(count: count, row: row, into: &$0)
        }
    }

    /// ``append(file:table:from:rows:)`` of `count` compact rows, row i being `row(i)` (called
    /// twice for each), their terms and tokens places in `columns` (the file's): the same bytes
    /// as the rows made into transactions, without making them.
    package func append(
        file: Int, table: StringTable, from first: Int = 0, count: Int, columns: RowColumns,
        compact row: (Int) -> CompactRow
    ) throws {
        try append(file: file, table: table, from: first, count: count) {
            RowCodec.encode(count: count, compact: row, columns: columns, into: &$0)
        }
    }

    /// A section of `count` rows, which `encode` appends.
    private func append(
        file: Int, table: StringTable, from first: Int, count: Int, encode: (inout [UInt8]) -> Void
    ) throws {
        var out: [UInt8] = []
        out.reserveCapacity(64 + count * 40)
        PartWriter.append(UInt32(file), to: &out)
        PartWriter.append(UInt32(first), to: &out)
        PartWriter.append(UInt32(table.count - first), to: &out)
        for id in Int32(first)..<Int32(table.count) {
            table.withBytes(id) { b in
                PartWriter.append(UInt32(b.count), to: &out)
                out.append(contentsOf: b)
            }
        }
        PartWriter.append(UInt64(count), to: &out)
        let sizeAt = out.count
        PartWriter.append(UInt64(0), to: &out)
        PartWriter.append(UInt32(0), to: &out)
        let start = out.count
        encode(&out)
        let n = out.count - start
        let crc = out.withUnsafeBytes { RowCodec.crc(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        withUnsafeBytes(of: UInt64(n).littleEndian) { for (i, b) in $0.enumerated() { out[sizeAt + i] = b } }
        withUnsafeBytes(of: crc.littleEndian) { for (i, b) in $0.enumerated() { out[sizeAt + 8 + i] = b } }
        lock.lock()
        defer { lock.unlock() }
        try write(out)
        rowCount += count
    }

    /// Rows written so far.
    package var rows: Int { lock.withLock { rowCount } }

    /// Bytes of the file written so far.
    package var compressedBytes: Int { lock.withLock { byteCount } }

    /// Hex SHA-256 of every byte written; call once, after the last section.
    package var sha256: String { lock.withLock { Hex.string(hasher.finalize()) } }

    /// Syncs (unless `sync` is false) and closes the file.
    package func close(sync: Bool = true) throws {
        lock.lock()
        defer { lock.unlock() }
        let fd = self.fd
        self.fd = -1
        if sync, case let rc = System.fsync(fd), rc != 0 {
            System.closeQuietly(fd)
            throw SystemError("fsync", errno: rc).winBack(.cannotCreateOutput, "cannot sync", path: path)
        }
        do { try System.close(fd) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot close", path: path)
        }
    }
}

/// Reads the sections of one part file in order, checking it as it goes: every length against
/// the bytes left (so no hostile length allocates or loops beyond the file), every id by
/// ``RowCodec``, and, at the end, the size and SHA-256 its partition task recorded.
package final class PartReader {
    package let path: String
    private let source: PlainFileSource
    private let expected: (bytes: Int, sha256: String)
    private var scratch = [UInt8](repeating: 0, count: 1 << 16)
    /// Bytes read from the file ahead of the reader (one read(2) for many small fields).
    private let ahead = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 18, alignment: 16)
    private var aheadStart = 0
    private var aheadEnd = 0
    /// Bytes of the file the reader has taken.
    private var position = 0

    /// Opens the part file at `path` that its task recorded as `bytes` long with digest `sha256`.
    package init(path: String, bytes: Int, sha256: String) throws {
        self.path = path
        expected = (bytes, sha256)
        do { source = try PlainFileSource(path: path, followLinks: false) } catch let e as WinBackError {
            throw WinBackError(.badData, "part file cannot be read (\(e.message))", path: path)
        }
        guard source.size == bytes else {
            throw WinBackError(
                .badData, "part file damaged: \(source.size) bytes where its task wrote \(bytes)", path: path)
        }
        var header = [UInt8](repeating: 0, count: PartFile.magic.count)
        guard (try? fill(&header, allowEnd: false)) == true, header == PartFile.magic else {
            throw WinBackError(.badData, "not a winback part file (or of another version)", path: path)
        }
    }

    deinit { ahead.deallocate() }

    private func damaged(_ what: String) -> WinBackError {
        WinBackError(.badData, "part file damaged: \(what)", path: path)
    }

    /// Bytes of the file not read yet.
    private var left: Int { expected.bytes - position }

    /// Reads exactly `buffer.count` bytes; false at a clean end of the file (nothing read).
    private func fill(_ buffer: UnsafeMutableRawBufferPointer, allowEnd: Bool) throws -> Bool {
        guard buffer.count <= left else {
            if left == 0 && allowEnd { return false }
            throw damaged("a length points past the end of the file")
        }
        var off = 0
        while off < buffer.count {
            if aheadStart == aheadEnd {
                let n = try source.read(into: ahead)
                if n == 0 { throw damaged("the file ends early (truncated)") }
                (aheadStart, aheadEnd) = (0, n)
            }
            let k = min(buffer.count - off, aheadEnd - aheadStart)
            (buffer.baseAddress! + off).copyMemory(from: ahead.baseAddress! + aheadStart, byteCount: k)
            aheadStart += k
            off += k
        }
        position += buffer.count
        return true
    }

    /// Goes on reading at `offset`.
    private func seek(to offset: Int) throws {
        try source.seek(to: offset)
        (aheadStart, aheadEnd) = (0, 0)
        position = offset
    }

    private func fill(_ bytes: inout [UInt8], allowEnd: Bool) throws -> Bool {
        try bytes.withUnsafeMutableBytes { try fill($0, allowEnd: allowEnd) }
    }

    private func integer<T: FixedWidthInteger>(_: T.Type, allowEnd: Bool = false) throws -> T? {
        var v = T.zero
        let ok = try withUnsafeMutableBytes(of: &v) { try fill($0, allowEnd: allowEnd) }
        return ok ? T(littleEndian: v) : nil
    }

    /// A length or count: at most `limit` (the bytes left, or what they can hold).
    private func count<T: FixedWidthInteger>(_: T.Type, atMost limit: Int, _ what: String) throws -> Int {
        let v = try integer(T.self)!
        guard let n = Int(exactly: v), n <= limit else { throw damaged("\(what) of an impossible size") }
        return n
    }

    /// The next section: the index of its input file, and its rows added to the rows `rows`
    /// gives for that file (the same for every section of one file, its table holding the
    /// strings of the file's earlier sections); nil at the end of the part file, once its size
    /// and SHA-256 are checked.
    package func next(into rows: (_ file: Int) -> FileRows) throws -> (file: Int, rows: FileRows)? {
        var out: FileRows?
        let begin = { (file: Int, _: Int) -> StringTable? in
            out = rows(file)
            return out!.table
        }
        guard let (file, _) = try section(begin, columns: { out!.enter(section: $0) }, { try out!.add(sectionRow: $0) })
        else { return nil }
        out!.rows.settle()
        return (file, out!)
    }

    /// The next section's rows appended to `rows` (a piece of an incremental state, whose
    /// sections share one table); returns the index of the section's file, nil at the end of
    /// the part file, once its size and SHA-256 are checked.
    package func next(into rows: inout StateRows) throws -> Int? {
        defer { rows.rows.settle() }
        return try section(
            { _, _ in rows.table }, columns: { rows.rows.enter(section: $0) }, { try rows.rows.append(sectionRow: $0) }
        )?.file
    }

    /// Calls `body` with every row of the file and the table of its file, keeping none.
    package func scan(_ body: (Transaction, StringTable) -> Void) throws {
        var tables: [Int: StringTable] = [:]
        var table = StringTable()
        let begin = { (file: Int, _: Int) -> StringTable? in
            table = tables[file] ?? StringTable()
            tables[file] = table
            return table
        }
        var columns = RowColumns()
        while try section(begin, columns: { columns = $0 }, { body(columns.transaction($0), table) }) != nil {}
    }

    /// Where each section of the file starts, by input file in ascending order, each file's
    /// sections in their order: the file read whole and checked (every length and CRC-32, each
    /// section following its file's previous one, the size and SHA-256) without keeping a row.
    package func sectionsByFile() throws -> [(file: Int, offsets: [Int])] {
        var byFile: [Int: (strings: Int, offsets: [Int])] = [:]
        while true {
            let offset = position
            var first = 0
            guard
                let (file, strings) = try section(
                    { file, f in
                        first = f
                        return nil
                    }, columns: { _ in }, { _ in })
            else { break }
            guard first == byFile[file]?.strings ?? 0 else {
                throw damaged("a section does not follow its file's previous one")
            }
            byFile[file, default: (0, [])].strings = strings
            byFile[file, default: (0, [])].offsets.append(offset)
        }
        return byFile.sorted { $0.key < $1.key }.map { ($0.key, $0.value.offsets) }
    }

    /// Reads the one section at `offset` (from ``sectionsByFile()`` of the same file): its
    /// strings into `table` (which holds those of the file's earlier sections), its rows to
    /// `row`; returns its file index.
    package func section(at offset: Int, into table: StringTable, _ row: (Transaction) throws -> Void) throws -> Int {
        var columns = RowColumns()
        return try section(
            at: offset, into: table, columns: { columns = $0 }, { try row(columns.transaction($0)) })
    }

    /// ``section(at:into:_:)`` of compact rows: the section's shared columns to `columns`,
    /// then its rows, each naming its terms and token by their places there.
    package func section(
        at offset: Int, into table: StringTable, columns: (RowColumns) throws -> Void,
        _ row: (CompactRow) throws -> Void
    ) throws -> Int {
        try seek(to: offset)
        guard let (file, _) = try section({ _, _ in table }, columns: columns, row) else {
            throw damaged("no section where one was")
        }
        return file
    }

    /// Reads the next section: its strings into the table `begin` gives for its file index and
    /// first string id (nil: strings and rows are checked and skipped), its shared columns to
    /// `columns`, then its rows to `row`, each naming its terms and token by their places there.
    /// Returns the file index and the strings of its table so far; nil at the end of the file,
    /// once its size and SHA-256 are checked.
    private func section(
        _ begin: (_ file: Int, _ first: Int) -> StringTable?, columns: (RowColumns) throws -> Void,
        _ row: (CompactRow) throws -> Void
    ) throws -> (file: Int, strings: Int)? {
        guard let file = try integer(UInt32.self, allowEnd: true) else {
            guard source.fileSHA256() == expected.sha256 else {
                throw damaged("its SHA-256 differs from what its partition task wrote")
            }
            return nil
        }
        let first = try count(UInt32.self, atMost: Int(Int32.max), "a string table")
        let table = begin(Int(file), first)
        if let table, first != table.count { throw damaged("a section does not follow its file's previous one") }
        // Every string takes at least its 4-byte length.
        let strings = first + (try count(UInt32.self, atMost: left / 4, "a string table"))
        for expected in first..<strings {
            let n = try count(UInt32.self, atMost: min(left, 1 << 20), "a string")
            if scratch.count < n { scratch = [UInt8](repeating: 0, count: n) }
            let id = try scratch.withUnsafeMutableBytes { b -> Int32 in
                let s = UnsafeMutableRawBufferPointer(rebasing: b[0..<n])
                _ = try fill(s, allowEnd: false)
                return table?.intern(UnsafeRawBufferPointer(s)) ?? Int32(expected)
            }
            guard id == Int32(expected) else { throw damaged("a string repeats in its table") }
        }
        let rows = try count(UInt64.self, atMost: left, "a section")
        let bytes = try count(UInt64.self, atMost: left, "a section")
        let crc = try integer(UInt32.self)!
        // Each row takes at least six bytes: its presence byte, five varints and its terms' place.
        guard rows <= bytes / 6, bytes <= left else { throw damaged("a section of an impossible size") }
        if scratch.count < bytes { scratch = [UInt8](repeating: 0, count: bytes) }
        try scratch.withUnsafeMutableBytes { b in
            let s = UnsafeMutableRawBufferPointer(rebasing: b[0..<bytes])
            _ = try fill(s, allowEnd: false)
            guard RowCodec.crc(UnsafeRawBufferPointer(s)) == crc else { throw damaged("CRC-32 mismatch") }
            guard table != nil else { return }
            do {
                try RowCodec.decode(UnsafeRawBufferPointer(s), count: rows, strings: strings, columns: columns, row)
            } catch is RowCodec.Malformed {
                throw damaged("a section does not decode")
            }
        }
        return (Int(file), strings)
    }
}
