import Foundation
import WinBackSupport

/// Splits a byte source into lines without copying them, except the few that straddle chunks:
/// the one line splitter of the read stage, the renewal reader, signed files and the merge of
/// shard outputs.
///
/// Pulled a line at a time (`next()`, each line as read, its newline kept: the merge writes
/// them back byte for byte), or pushed to a closure (`forEachLine`, each line with its newline
/// and a trailing CR removed, a UTF-8 byte order mark before the first skipped, and its 1-based
/// number: the readers of input files). A line longer than `maxLineBytes` is never held whole
/// (docs/rules.md §6.1): only its first `excerptBytes` bytes are kept, and the rest is skipped.
package final class LineCursor {
    @exclusivity(unchecked) private var buffer: UnsafeMutableRawBufferPointer
    private let source: ByteSource
    /// The longest line handed to `forEachLine`'s `body`, in bytes (its CR and LF aside).
    package let maxLineBytes: Int
    /// The most bytes of one line held in the buffer: a line of `maxLineBytes`, a byte order
    /// mark before it, its CR and its LF. A line that fills it is skipped unread.
    private let bufferLimit: Int
    /// Bytes of a too-long line kept for its reject's excerpt.
    package static let excerptBytes = 1024

    /// The current line starts at `start`; bytes up to `end` are filled; before `scanFrom`
    /// (from `start`) there is no newline.
    @exclusivity(unchecked) private var start = 0
    @exclusivity(unchecked) private var end = 0
    @exclusivity(unchecked) private var scanFrom = 0
    @exclusivity(unchecked) private var ended = false
    /// The 1-based number of the line `next()` returned last.
    @exclusivity(unchecked) package private(set) var lineNumber = 0
    /// True when the line `next()` returned last was longer than the limit: it is then only its
    /// first `excerptBytes` bytes, and the rest of it was skipped unread.
    @exclusivity(unchecked) package private(set) var cut = false
    /// Called after each read of the source (for progress).
    private var afterRead: (() -> Void)?

    /// - Parameter maxLineBytes: the longest line `forEachLine` hands on; `Int.max` holds
    ///   every line whole, whatever its length (the buffer grows to the longest).
    package init(
        source: ByteSource, chunkSize: Int = 1 << 20, maxLineBytes: Int = ReadLimits.default.maxLineBytes
    ) {
        self.source = source
        self.maxLineBytes = maxLineBytes
        bufferLimit = maxLineBytes > Int.max - 5 ? Int.max : maxLineBytes + 5
        buffer = .allocate(byteCount: max(chunkSize, 1), alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// The next line, with its newline (a last line without one gets none), valid until the
    /// next call; nil at the end. See `cut` for a line longer than the buffer may hold.
    @inline(__always)
    package func next() throws -> UnsafeRawBufferPointer? {
        cut = false
        while true {
            let base = UnsafeRawPointer(buffer.baseAddress!)
            if scanFrom < end, let nl = memchr(base + scanFrom, 0x0A, end - scanFrom) {
                let lineEnd = base.distance(to: UnsafeRawPointer(nl)) + 1
                let line = UnsafeRawBufferPointer(start: base + start, count: lineEnd - start)
                start = lineEnd
                scanFrom = lineEnd
                lineNumber += 1
                return line
            }
            scanFrom = end
            if ended {
                guard start < end else { return nil }
                let line = UnsafeRawBufferPointer(start: base + start, count: end - start)
                start = end
                lineNumber += 1
                return line
            }
            if let excerpt = try refill() { return excerpt }
        }
    }

    /// Reads on: the partial line moved to the front, or the buffer grown for a long one. When a
    /// line fills the buffer at its limit, skips the rest of it and returns its first bytes.
    private func refill() throws -> UnsafeRawBufferPointer? {
        if start > 0 {
            let partial = end - start
            if partial > 0 { memmove(buffer.baseAddress!, buffer.baseAddress! + start, partial) }
            start = 0
            end = partial
            scanFrom = partial
        }
        if end == buffer.count {
            if buffer.count < bufferLimit {
                let larger = UnsafeMutableRawBufferPointer.allocate(
                    byteCount: buffer.count > bufferLimit / 2 ? bufferLimit : buffer.count * 2, alignment: 16)
                larger.copyMemory(from: UnsafeRawBufferPointer(buffer))
                buffer.deallocate()
                buffer = larger
            } else {
                return try skipLongLine()
            }
        }
        let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[end...]))
        afterRead?()
        if n == 0 { ended = true }
        end += n
        return nil
    }

    /// Keeps the first bytes of the line that fills the buffer at the front and reads past the
    /// rest of it into the buffer after them; returns those first bytes.
    private func skipLongLine() throws -> UnsafeRawBufferPointer {
        let kept = min(end, LineCursor.excerptBytes)
        let base = buffer.baseAddress!
        cut = true
        lineNumber += 1
        while true {
            let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[kept...]))
            afterRead?()
            if n == 0 {
                ended = true
                start = kept
                end = kept
                break
            }
            if let nl = memchr(base + kept, 0x0A, n) {
                start = base.distance(to: nl) + 1
                end = kept + n
                break
            }
        }
        scanFrom = start
        return UnsafeRawBufferPointer(start: base, count: kept)
    }

    /// Calls `body` for every line, without its newline and trailing CR (and a UTF-8 byte order
    /// mark before the first, as some editors and exporters write: it is not data), with its
    /// number; `tooLong` with the number and first bytes of every line longer than
    /// `maxLineBytes`; `afterChunk` after each read (for progress).
    package func forEachLine(
        _ body: (UnsafeRawBufferPointer, Int) throws -> Void,
        tooLong: (Int, UnsafeRawBufferPointer) throws -> Void = { _, _ in },
        afterChunk: () -> Void = {}
    ) throws {
        try withoutActuallyEscaping(afterChunk) { afterChunk in
            afterRead = afterChunk
            defer { afterRead = nil }
            while let raw = try next() {
                var line = raw
                if lineNumber == 1 {
                    line = LineCursor.droppingBOM(line)
                    // A file of only the mark has no lines.
                    if line.isEmpty && raw.count == 3 { return }
                }
                if cut {
                    try tooLong(lineNumber, line)
                    continue
                }
                line = LineCursor.trim(line)
                if line.count > maxLineBytes {
                    try tooLong(
                        lineNumber, UnsafeRawBufferPointer(rebasing: line.prefix(LineCursor.excerptBytes)))
                } else {
                    try body(line, lineNumber)
                }
            }
        }
    }

    /// A line without its trailing LF and CR.
    @inline(__always)
    static func trim(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var n = line.count
        if n > 0 && line[n - 1] == 0x0A { n -= 1 }
        if n > 0 && line[n - 1] == 0x0D { n -= 1 }
        return UnsafeRawBufferPointer(rebasing: line[0..<n])
    }

    /// The first line without a UTF-8 byte order mark before it.
    static func droppingBOM(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard line.count >= 3, line[0] == 0xEF, line[1] == 0xBB, line[2] == 0xBF else { return line }
        return UnsafeRawBufferPointer(rebasing: line[3...])
    }
}

extension LineCursor {
    /// Reads a shard output's lines one at a time, each with its `\n` and whatever its length,
    /// through a buffer that grows to the longest line.
    package convenience init(path: String) throws {
        self.init(source: try PlainFileSource(path: path), chunkSize: 1 << 18, maxLineBytes: .max)
    }

    /// Bytewise order of two lines.
    @inline(__always)
    package static func less(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        Bytes.compare(a, b) < 0
    }

    /// Hands `emit` the lines of `readers` in bytewise order until each ends or reaches a line
    /// starting with `stop` (a closing tag: XML rows start with spaces); returns the lines handed.
    package static func merge(
        _ readers: [LineCursor], until stop: UInt8?, _ emit: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        // Each reader's current line, valid until that reader moves on.
        var heads: [UnsafeRawBufferPointer?] = []
        func live(_ line: UnsafeRawBufferPointer?) -> UnsafeRawBufferPointer? {
            guard let line, stop == nil || line.first != stop else { return nil }
            return line
        }
        for r in readers { heads.append(live(try r.next())) }
        var rows = 0
        while true {
            var best = -1
            for i in heads.indices {
                guard let h = heads[i] else { continue }
                if best < 0 || LineCursor.less(h, heads[best]!) { best = i }
            }
            if best < 0 { return rows }
            try emit(heads[best]!)
            rows += 1
            heads[best] = live(try readers[best].next())
        }
    }
}
