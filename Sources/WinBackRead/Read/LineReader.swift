import Foundation

/// Splits a byte source into lines without copying them, except the few that straddle chunks.
///
/// Each line is handed to the caller as a buffer valid only during the call, with a trailing
/// CR removed and its 1-based line number. A UTF-8 byte order mark at the start of the file is
/// skipped.
final class LineReader {
    @exclusivity(unchecked) private var buffer: UnsafeMutableRawBufferPointer
    private let source: ByteSource
    /// The longest line handed to `body`, in bytes (a trailing CR aside); a longer one goes to
    /// `tooLong` instead, and is never held whole (docs/rules.md §6.1).
    let maxLineBytes: Int
    /// Bytes of a too-long line kept for its reject's excerpt.
    static let excerptBytes = 1024

    init(source: ByteSource, chunkSize: Int = 1 << 20, maxLineBytes: Int = ReadLimits.default.maxLineBytes) {
        self.source = source
        self.maxLineBytes = maxLineBytes
        buffer = .allocate(byteCount: chunkSize, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Calls `body` for every line; `tooLong` with the number and first bytes of every line
    /// longer than `maxLineBytes`; `afterChunk` after each chunk (for progress).
    func forEachLine(
        _ body: (UnsafeRawBufferPointer, Int) throws -> Void,
        tooLong: (Int, UnsafeRawBufferPointer) throws -> Void = { _, _ in },
        afterChunk: () -> Void = {}
    ) throws {
        var filled = 0
        var line = 0
        var bomChecked = false
        // Bytes before this offset hold no newline.
        var scanFrom = 0
        // A line of the longest length, its CR and its LF fit in the buffer.
        let limit = maxLineBytes + 2
        @inline(__always) func hand(_ start: Int, _ end: Int) throws {
            line += 1
            let l = LineReader.trim(UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
            if l.count > maxLineBytes {
                try tooLong(line, UnsafeRawBufferPointer(rebasing: l.prefix(LineReader.excerptBytes)))
            } else {
                try body(l, line)
            }
        }
        while true {
            if filled == buffer.count {
                if buffer.count < limit {
                    // One line longer than the buffer: grow it, up to the limit.
                    let bigger = UnsafeMutableRawBufferPointer.allocate(
                        byteCount: min(buffer.count * 2, limit), alignment: 16)
                    bigger.copyMemory(from: UnsafeRawBufferPointer(buffer))
                    buffer.deallocate()
                    buffer = bigger
                } else {
                    // A line longer than the limit: keep its first bytes, skip to its end.
                    line += 1
                    let excerpt = [UInt8](buffer[0..<LineReader.excerptBytes])
                    let ended = try skipToNextLine(&filled, afterChunk: afterChunk)
                    try excerpt.withUnsafeBytes { try tooLong(line, $0) }
                    if !ended { return }
                    scanFrom = 0
                }
            }
            let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            if n == 0 {
                // Lines not scanned yet (those after a skipped line), then the last one.
                var start = 0
                var p = scanFrom
                while p < filled, let nl = memchr(buffer.baseAddress! + p, 0x0A, filled - p) {
                    let end = buffer.baseAddress!.distance(to: nl)
                    try hand(start, end)
                    start = end + 1
                    p = start
                }
                if filled > start { try hand(start, filled) }
                afterChunk()
                return
            }
            filled += n
            let base = UnsafeRawPointer(buffer.baseAddress!)
            if !bomChecked {
                // A UTF-8 byte order mark (as some editors and exporters write) is not data. The
                // first read holds the file's first bytes (sources fill the buffer or end).
                bomChecked = true
                if filled >= 3 && base.load(as: UInt8.self) == 0xEF
                    && base.load(fromByteOffset: 1, as: UInt8.self) == 0xBB
                    && base.load(fromByteOffset: 2, as: UInt8.self) == 0xBF
                {
                    buffer.baseAddress!.copyMemory(from: base + 3, byteCount: filled - 3)
                    filled -= 3
                    scanFrom = 0
                }
            }
            var start = 0
            var p = scanFrom
            while p < filled {
                guard let nl = memchr(base + p, 0x0A, filled - p) else { break }
                let end = base.distance(to: UnsafeRawPointer(nl))
                try hand(start, end)
                start = end + 1
                p = start
            }
            if start > 0 {
                let rest = filled - start
                if rest > 0 { buffer.baseAddress!.copyMemory(from: base + start, byteCount: rest) }
                filled = rest
            }
            scanFrom = filled
            afterChunk()
        }
    }

    /// Reads past the rest of a line that fills the buffer, reusing the buffer; what follows
    /// its newline is moved to the front (`filled` bytes). False when the file ended first.
    private func skipToNextLine(_ filled: inout Int, afterChunk: () -> Void) throws -> Bool {
        while true {
            let n = try source.read(into: buffer)
            afterChunk()
            if n == 0 {
                filled = 0
                return false
            }
            if let nl = memchr(buffer.baseAddress!, 0x0A, n) {
                let after = buffer.baseAddress!.distance(to: nl) + 1
                if after < n { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + after, byteCount: n - after) }
                filled = n - after
                return true
            }
        }
    }

    @inline(__always)
    static func trim(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        if line.count > 0 && line[line.count - 1] == 0x0D {
            return UnsafeRawBufferPointer(rebasing: line[0..<(line.count - 1)])
        }
        return line
    }

    /// A line of only spaces and tabs (or nothing).
    @inline(__always)
    static func isBlank(_ line: UnsafeRawBufferPointer) -> Bool {
        for c in line where c != 0x20 && c != 0x09 && c != 0x0D { return false }
        return true
    }
}
