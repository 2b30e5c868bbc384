import Foundation

/// Splits a byte source into lines without copying them, except the few that straddle chunks.
///
/// Each line is handed to the caller as a buffer valid only during the call, with a trailing
/// CR removed and its 1-based line number. A UTF-8 byte order mark at the start of the file is
/// skipped.
final class LineReader {
    @exclusivity(unchecked) private var buffer: UnsafeMutableRawBufferPointer
    private let source: ByteSource

    init(source: ByteSource, chunkSize: Int = 1 << 20) {
        self.source = source
        buffer = .allocate(byteCount: chunkSize, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Calls `body` for every line; `afterChunk` after each chunk (for progress).
    func forEachLine(
        _ body: (UnsafeRawBufferPointer, Int) throws -> Void, afterChunk: () -> Void = {}
    ) throws {
        var filled = 0
        var line = 0
        var bomChecked = false
        while true {
            if filled == buffer.count {
                // One line longer than the buffer: grow it.
                let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 16)
                bigger.copyMemory(from: UnsafeRawBufferPointer(buffer))
                buffer.deallocate()
                buffer = bigger
            }
            let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            if n == 0 {
                if filled > 0 {
                    line += 1
                    try body(LineReader.trim(UnsafeRawBufferPointer(rebasing: buffer[0..<filled])), line)
                }
                afterChunk()
                return
            }
            var scanFrom = filled
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
                line += 1
                try body(LineReader.trim(UnsafeRawBufferPointer(start: base + start, count: end - start)), line)
                start = end + 1
                p = start
            }
            if start > 0 {
                let rest = filled - start
                if rest > 0 { buffer.baseAddress!.copyMemory(from: base + start, byteCount: rest) }
                filled = rest
            }
            afterChunk()
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
