import Foundation

/// Splits a byte source into RFC 4180 records, from bytes: quoted fields may hold commas,
/// doubled quotes and line breaks; records end with LF or CRLF; a UTF-8 BOM is skipped.
///
/// Each record is handed over as field slices valid only during the call, with the line number
/// it starts on. A record that is not well-formed CSV is handed over with `malformed` set, so the
/// caller can reject it with its line number and go on.
package final class CSVRecordReader {
    @exclusivity(unchecked) private var buffer: UnsafeMutableRawBufferPointer
    @exclusivity(unchecked) private var scratch: UnsafeMutableRawBufferPointer
    private let source: ByteSource
    @exclusivity(unchecked) private(set) var fields: [UnsafeRawBufferPointer] = []

    /// The longest record handed to `body`, in bytes; a longer one goes to `tooLong`, never
    /// held whole (docs/rules.md §6.1). May be lowered between records (once a header says how
    /// long a valid record can be).
    package var maxRecordBytes: Int

    /// The most fields a record is split into: past it, the record is handed over malformed
    /// ("more than N fields") without its fields being listed, so a line of a million commas
    /// costs no list of a million fields. May be changed between records.
    package var maxFields = Int.max

    package init(source: ByteSource, chunkSize: Int = 1 << 20, maxRecordBytes: Int = ReadLimits.default.maxLineBytes) {
        self.source = source
        self.maxRecordBytes = maxRecordBytes
        buffer = .allocate(byteCount: chunkSize, alignment: 16)
        scratch = .allocate(byteCount: chunkSize, alignment: 16)
    }

    deinit {
        buffer.deallocate()
        scratch.deallocate()
    }

    /// Calls `body(fields, line, raw, malformed)` per non-blank record; `tooLong(line, first
    /// bytes)` per record longer than `maxRecordBytes` (skipped to the next line feed);
    /// `afterChunk` after each read.
    package func forEachRecord(
        _ body: ([UnsafeRawBufferPointer], Int, UnsafeRawBufferPointer, String?) throws -> Void,
        tooLong: (Int, UnsafeRawBufferPointer) throws -> Void = { _, _ in },
        afterChunk: () -> Void = {}
    ) throws {
        var filled = 0
        var start = 0
        var line = 1
        var eof = false
        var first = true
        while true {
            // Find the end of the record at `start`: a LF outside quotes.
            // A quote opens a quoted field only at the field's start (or right after a closing
            // quote: a doubled quote); one inside an unquoted field is a character of a malformed
            // row (`split` says so), which must not carry the rows after it along.
            var p = start
            var inQuotes = false
            var atFieldStart = true
            var justClosed = false
            var end = -1
            let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            while p < filled {
                let c = base[p]
                if inQuotes {
                    if c == 0x22 {
                        inQuotes = false
                        justClosed = true
                    }
                } else if c == 0x22 && (atFieldStart || justClosed) {
                    inQuotes = true
                    atFieldStart = false
                    justClosed = false
                } else if c == 0x0A {
                    end = p
                    break
                } else {
                    atFieldStart = c == 0x2C
                    justClosed = false
                }
                p += 1
            }
            if end < 0 && !eof {
                // Need more bytes: keep the partial record, read on.
                if start > 0 {
                    let rest = filled - start
                    if rest > 0 { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: rest) }
                    filled = rest
                    start = 0
                }
                if filled == buffer.count {
                    if buffer.count < maxRecordBytes + 2 {
                        grow(to: min(buffer.count * 2, maxRecordBytes + 2))
                    } else {
                        let number = line
                        let excerpt = [UInt8](buffer[0..<min(filled, LineCursor.excerptBytes)])
                        line += countNewlines(base, filled)
                        filled = 0
                        // Skip to the next line feed, reusing the buffer.
                        while true {
                            let n = try source.read(into: buffer)
                            afterChunk()
                            if n == 0 {
                                eof = true
                                break
                            }
                            if let nl = memchr(buffer.baseAddress!, 0x0A, n) {
                                let after = buffer.baseAddress!.distance(to: nl) + 1
                                if after < n {
                                    buffer.baseAddress!.copyMemory(
                                        from: buffer.baseAddress! + after, byteCount: n - after)
                                }
                                filled = n - after
                                line += 1
                                break
                            }
                        }
                        try excerpt.withUnsafeBytes { try tooLong(number, $0) }
                        first = false
                        continue
                    }
                }
                let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
                if n == 0 { eof = true }
                filled += n
                if first && filled >= 3 {
                    let b = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    if b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF { start = 3 }
                    first = false
                }
                afterChunk()
                continue
            }
            if end < 0 { end = filled }  // last record without a newline (or an open quote)
            if start >= filled && eof { return }
            var recEnd = end
            if recEnd > start && base[recEnd - 1] == 0x0D { recEnd -= 1 }
            let raw = UnsafeRawBufferPointer(start: buffer.baseAddress! + start, count: recEnd - start)
            let breaks = countNewlines(base + start, end - start)
            if !Whitespace.isBlank(raw) {
                let problem =
                    inQuotes && end == filled ? "unbalanced quote: a quoted field is never closed" : split(raw)
                try body(fields, line, raw, problem)
            }
            line += breaks + 1
            start = end + 1
            if start > filled { return }
        }
    }

    private func grow(to size: Int) {
        let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        bigger.copyMemory(from: UnsafeRawBufferPointer(buffer))
        buffer.deallocate()
        buffer = bigger
        scratch.deallocate()
        scratch = .allocate(byteCount: buffer.count, alignment: 16)
    }

    private func countNewlines(_ p: UnsafePointer<UInt8>, _ n: Int) -> Int {
        var k = 0
        for i in 0..<n where p[i] == 0x0A { k += 1 }
        return k
    }

    /// Splits a record into `fields`; returns why it is malformed, or nil.
    private func split(_ r: UnsafeRawBufferPointer) -> String? {
        fields.removeAll(keepingCapacity: true)
        var used = 0
        var i = 0
        let n = r.count
        while true {
            if i < n && r[i] == 0x22 {
                // Quoted: copy out, undoubling quotes.
                let out = scratch.baseAddress! + used
                var len = 0
                i += 1
                var closed = false
                while i < n {
                    let c = r[i]
                    if c == 0x22 {
                        if i + 1 < n && r[i + 1] == 0x22 {
                            out.storeBytes(of: 0x22, toByteOffset: len, as: UInt8.self)
                            len += 1
                            i += 2
                            continue
                        }
                        closed = true
                        i += 1
                        break
                    }
                    out.storeBytes(of: c, toByteOffset: len, as: UInt8.self)
                    len += 1
                    i += 1
                }
                if !closed { return "unbalanced quote: a quoted field is never closed" }
                fields.append(UnsafeRawBufferPointer(start: out, count: len))
                used += len
                if i < n && r[i] != 0x2C { return "malformed quoted field: text after the closing quote" }
            } else {
                let s = i
                while i < n && r[i] != 0x2C {
                    if r[i] == 0x22 { return "malformed field: a quote inside an unquoted field" }
                    i += 1
                }
                fields.append(UnsafeRawBufferPointer(rebasing: r[s..<i]))
            }
            if i >= n { return nil }
            if fields.count >= maxFields { return "more than \(maxFields) fields" }
            i += 1  // the comma
            if i == n {
                fields.append(UnsafeRawBufferPointer(rebasing: r[n..<n]))
                return nil
            }
        }
    }
}
