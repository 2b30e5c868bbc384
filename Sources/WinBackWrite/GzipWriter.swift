import CZlib
import WinBackSupport

/// Deflates bytes into a gzip file in chunks with zlib.
///
/// Owns one `z_stream`, allocated once so it never moves (zlib keeps pointers into it). The
/// gzip header carries no file name and an mtime of 0, so the same bytes in give the same
/// file out: generated worlds stay byte-identical for a seed.
// Each writer is written by one thread at a time.
package final class GzipWriter: @unchecked Sendable {
    let path: String
    @exclusivity(unchecked) private var fd: Int32
    private let stream: UnsafeMutablePointer<z_stream>
    private let header: UnsafeMutablePointer<gz_header>
    private let output: UnsafeMutableRawBufferPointer
    @exclusivity(unchecked) private var finished = false
    /// Bytes handed to `write` so far.
    @exclusivity(unchecked) private(set) var uncompressedBytes = 0
    /// Bytes written to the file so far.
    @exclusivity(unchecked) package private(set) var compressedBytes = 0

    static let outputSize = 1 << 20
    /// zlib counts input in `uInt`; larger writes are fed in slices of this size.
    private static let maxSlice = 1 << 30

    /// Creates (or truncates) `path` and starts a gzip member.
    package init(path: String, level: Int32 = 6) throws {
        self.path = path
        do { fd = try System.createForWriting(path) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot create", path: path)
        }
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        header = .allocate(capacity: 1)
        // Zeroed: mtime 0, no name or comment. OS 255 ("unknown") rather than zlib's
        // platform code, so Linux and macOS write the same header.
        header.initialize(to: gz_header())
        header.pointee.os = 255
        output = .allocate(byteCount: GzipWriter.outputSize, alignment: 16)
        // 16 + MAX_WBITS: write a gzip header and trailer rather than a zlib wrapper.
        guard winback_deflateInit2(stream, level, 16 + MAX_WBITS) == Z_OK else {
            System.closeQuietly(fd)
            stream.deallocate()
            header.deallocate()
            output.deallocate()
            throw WinBackError(.software, "zlib deflateInit2 failed", path: path)
        }
        // zlib reads the header lazily, at the first deflate call; it stays allocated until deinit.
        deflateSetHeader(stream, header)
    }

    deinit {
        deflateEnd(stream)
        if fd >= 0 { System.closeQuietly(fd) }
        stream.deallocate()
        header.deallocate()
        output.deallocate()
    }

    /// Compresses `bytes`; output reaches the file whenever the output buffer fills.
    package func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard !finished else { throw WinBackError(.software, "write after close", path: path) }
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        uncompressedBytes += remaining
        while remaining > 0 {
            let slice = min(remaining, GzipWriter.maxSlice)
            stream.pointee.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = uInt(slice)
            try pump(flush: Z_NO_FLUSH)
            base += slice
            remaining -= slice
        }
    }

    package func write(_ s: String) throws {
        var s = s
        try s.withUTF8 { try write(UnsafeRawBufferPointer($0)) }
    }

    package func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// Finishes the gzip member and closes the file. Calling it again does nothing.
    package func close() throws {
        guard !finished else { return }
        finished = true
        stream.pointee.next_in = nil
        stream.pointee.avail_in = 0
        try pump(flush: Z_FINISH)
        let fd = self.fd
        self.fd = -1
        do { try System.close(fd) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot close", path: path)
        }
    }

    /// Runs deflate until it has consumed all input (or, with Z_FINISH, ended the stream),
    /// writing every full output buffer to the file.
    private func pump(flush: Int32) throws {
        while true {
            stream.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(output.count)
            let ret = deflate(stream, flush)
            guard ret == Z_OK || ret == Z_STREAM_END || ret == Z_BUF_ERROR else {
                throw WinBackError(.software, "zlib deflate failed (error \(ret))", path: path)
            }
            let produced = output.count - Int(stream.pointee.avail_out)
            try writeAll(UnsafeRawBufferPointer(rebasing: output[0..<produced]))
            if flush == Z_FINISH {
                if ret == Z_STREAM_END { return }
            } else if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 {
                // All input taken and zlib had room to spare: nothing more is pending.
                return
            }
        }
    }

    /// Writes every byte to the file.
    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws {
        do { try System.writeAll(fd, bytes) } catch let e as SystemError {
            throw e.winBack(.cannotCreateOutput, "cannot write", path: path)
        }
        compressedBytes += bytes.count
    }
}
