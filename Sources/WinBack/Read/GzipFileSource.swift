import CZlib

/// Inflates a gzip file (single- or multi-member) in chunks with zlib.
///
/// Owns one `z_stream`, allocated once so it never moves (zlib keeps pointers into it).
/// A corrupt or truncated member fails with the file and the compressed byte offset.
final class GzipFileSource: ByteSource {
    private let file: FileHandleFD
    private let stream: UnsafeMutablePointer<z_stream>
    private let input: UnsafeMutableRawBufferPointer
    /// File offset of `input`'s first byte.
    private var inputFileOffset = 0
    private var inputCount = 0
    private var eof = false
    private var memberEnded = false
    private var sawMember = false
    private(set) var bytesProduced = 0

    static let inputSize = 1 << 18

    init(path: String) throws {
        file = try FileHandleFD(path: path)
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        input = .allocate(byteCount: GzipFileSource.inputSize, alignment: 16)
        // 16 + MAX_WBITS: expect a gzip header and trailer.
        guard winback_inflateInit2(stream, 16 + MAX_WBITS) == Z_OK else {
            stream.deallocate()
            input.deallocate()
            throw WinBackError(.software, "zlib inflateInit2 failed", path: path)
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
        input.deallocate()
    }

    func fileSHA256() -> String { file.sha256() }

    var fileBytesConsumed: Int {
        inputFileOffset + (inputCount - Int(stream.pointee.avail_in))
    }

    private func refill() throws {
        let consumed = inputCount - Int(stream.pointee.avail_in)
        let keep = Int(stream.pointee.avail_in)
        if keep > 0, consumed > 0 {
            input.baseAddress!.copyMemory(from: input.baseAddress! + consumed, byteCount: keep)
        }
        inputFileOffset += consumed
        let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: input[keep...]))
        if n == 0 { eof = true }
        inputCount = keep + n
        stream.pointee.next_in = input.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_in = uInt(inputCount)
    }

    private func fail(_ what: String) -> WinBackError {
        WinBackError(.badData, "\(what) at compressed byte offset \(fileBytesConsumed)", path: file.path)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(buffer.count)
        while true {
            if stream.pointee.avail_in == 0 && !eof { try refill() }
            if memberEnded {
                if stream.pointee.avail_in == 0 && eof { break }
                // Another member follows: start it afresh.
                memberEnded = false
                inflateReset(stream)
            }
            if !sawMember {
                if stream.pointee.avail_in == 0 && eof { throw fail("empty file, not gzip data") }
                let first = stream.pointee.next_in[0]
                if first != 0x1f { throw fail("not gzip data (bad magic byte)") }
                sawMember = true
            }
            let before = stream.pointee.avail_out
            let ret = inflate(stream, Z_NO_FLUSH)
            switch ret {
            case Z_STREAM_END:
                memberEnded = true
                if stream.pointee.avail_in == 0 && !eof { try refill() }
                if stream.pointee.avail_in > 0, stream.pointee.next_in[0] != 0x1f {
                    throw fail("trailing data that is not a gzip member")
                }
            case Z_OK:
                break
            case Z_BUF_ERROR:
                if stream.pointee.avail_in == 0 && eof {
                    throw fail("truncated gzip data (unexpected end of file)")
                }
                if before == stream.pointee.avail_out && stream.pointee.avail_in > 0 && stream.pointee.avail_out > 0 {
                    throw fail("corrupt gzip data (no progress)")
                }
            case Z_DATA_ERROR:
                let msg = stream.pointee.msg.map { String(cString: $0) } ?? "data error"
                throw fail("corrupt gzip data (\(msg))")
            case Z_MEM_ERROR:
                throw WinBackError(.software, "zlib is out of memory", path: file.path)
            default:
                throw fail("corrupt gzip data (zlib error \(ret))")
            }
            if stream.pointee.avail_out == 0 { break }
            if stream.pointee.avail_in == 0 && eof {
                if !memberEnded { throw fail("truncated gzip data (unexpected end of file)") }
                break
            }
        }
        let n = buffer.count - Int(stream.pointee.avail_out)
        bytesProduced += n
        return n
    }
}
