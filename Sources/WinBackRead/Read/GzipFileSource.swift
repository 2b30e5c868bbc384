import CIsal
import CZlib
import WinBackSupport

/// Which library inflates `.gz` inputs. zlib is always there; ISA-L's igzip (2–3× faster on
/// x86-64) only where libisal is installed, and then only when asked for. Both check each
/// member's CRC-32 and size; the rows read are the same.
public enum Inflater: String, Sendable, CaseIterable {
    case zlib
    case isal

    /// Whether this machine can use it.
    public var isAvailable: Bool {
        switch self {
        case .zlib: return true
        case .isal: return IsalEngine.api != nil
        }
    }

    /// The inflaters this machine can use.
    public static var available: [Inflater] { allCases.filter(\.isAvailable) }

    /// Fails with a clear message when this machine cannot use it.
    public func requireAvailable() throws {
        guard isAvailable else { throw unavailable }
    }

    /// The usage error (exit 64) of asking for this inflater where the machine lacks it.
    package var unavailable: WinBackError {
        WinBackError(
            .usage,
            "inflater \(rawValue) is not available: install ISA-L (Debian: apt-get install libisal-dev) "
                + "and rebuild, or use --inflater zlib")
    }
}

/// How a pipeline picks its inflater: one by name, or `auto`, ISA-L where this machine has it
/// and zlib elsewhere. Both give the same bytes and reject the same files.
public enum InflaterChoice: String, Sendable, CaseIterable {
    case zlib
    case isal
    case auto

    /// The inflater this choice means on a machine where ISA-L is or is not available.
    public func resolved(isalAvailable: Bool = Inflater.isal.isAvailable) -> Inflater {
        switch self {
        case .zlib: return .zlib
        case .isal: return .isal
        case .auto: return isalAvailable ? .isal : .zlib
        }
    }
}

/// What one inflate step gave.
enum InflateStep {
    /// Some input was used or some output made (possibly neither when input ran out).
    case progress
    /// A gzip member ended; its trailer (CRC-32, size) matched.
    case memberEnd
    case corrupt(String)
    case outOfMemory
}

/// One inflater's state for one file.
protocol InflateEngine: AnyObject {
    /// Inflates from `input` into `output`, advancing both past what was used and made.
    func inflate(_ input: inout UnsafeRawBufferPointer, _ output: inout UnsafeMutableRawBufferPointer) -> InflateStep
    /// Gets ready for the next member.
    func nextMember()
}

/// zlib's inflate, expecting gzip headers and trailers.
final class ZlibEngine: InflateEngine {
    /// Allocated once so it never moves (zlib keeps pointers into it).
    private let stream: UnsafeMutablePointer<z_stream>

    init?() {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // 16 + MAX_WBITS: expect a gzip header and trailer.
        guard winback_inflateInit2(stream, 16 + MAX_WBITS) == Z_OK else {
            stream.deallocate()
            return nil
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    func nextMember() { inflateReset(stream) }

    func inflate(_ input: inout UnsafeRawBufferPointer, _ output: inout UnsafeMutableRawBufferPointer) -> InflateStep {
        let s = stream
        s.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        s.pointee.avail_in = uInt(input.count)
        s.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        s.pointee.avail_out = uInt(output.count)
        let ret = CZlib.inflate(s, Z_NO_FLUSH)
        input = UnsafeRawBufferPointer(rebasing: input[(input.count - Int(s.pointee.avail_in))...])
        output = UnsafeMutableRawBufferPointer(rebasing: output[(output.count - Int(s.pointee.avail_out))...])
        switch ret {
        case Z_STREAM_END: return .memberEnd
        case Z_OK, Z_BUF_ERROR: return .progress
        case Z_DATA_ERROR: return .corrupt(s.pointee.msg.map { String(cString: $0) } ?? "data error")
        case Z_MEM_ERROR: return .outOfMemory
        default: return .corrupt("zlib error \(ret)")
        }
    }
}

/// ISA-L's igzip inflate (loaded at run time), with gzip headers and trailers.
final class IsalEngine: InflateEngine {
    /// The library's entry points, when it loads.
    // Written once by the lazy initializer; the table is only read after loading.
    nonisolated(unsafe) static let api: UnsafeMutablePointer<winback_isal_api>? = {
        let api = UnsafeMutablePointer<winback_isal_api>.allocate(capacity: 1)
        api.initialize(to: winback_isal_api())
        if winback_isal_load(api) != 0 { return api }
        api.deallocate()
        return nil
    }()

    private let api: UnsafeMutablePointer<winback_isal_api>
    private let state: UnsafeMutableRawPointer

    init?() {
        guard let api = IsalEngine.api, let state = winback_isal_new(api) else { return nil }
        self.api = api
        self.state = state
    }

    deinit { winback_isal_free(state) }

    func nextMember() { winback_isal_reset(api, state) }

    func inflate(_ input: inout UnsafeRawBufferPointer, _ output: inout UnsafeMutableRawBufferPointer) -> InflateStep {
        // ISA-L counts in 32 bits; the reader's buffers are far smaller.
        var inPtr = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var inCount = UInt32(input.count)
        var outPtr = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var outCount = UInt32(output.count)
        let rc = winback_isal_inflate(api, state, &inPtr, &inCount, &outPtr, &outCount)
        input = UnsafeRawBufferPointer(rebasing: input[(input.count - Int(inCount))...])
        output = UnsafeMutableRawBufferPointer(rebasing: output[(output.count - Int(outCount))...])
        switch Int(rc) {
        case Int(WINBACK_ISAL_OK): return .progress
        case Int(WINBACK_ISAL_MEMBER_END): return .memberEnd
        case Int(WINBACK_ISAL_BAD_BLOCK): return .corrupt("invalid block type")
        case Int(WINBACK_ISAL_BAD_SYMBOL): return .corrupt("invalid code")
        case Int(WINBACK_ISAL_BAD_DISTANCE): return .corrupt("invalid distance too far back")
        case Int(WINBACK_ISAL_BAD_HEADER): return .corrupt("incorrect header")
        case Int(WINBACK_ISAL_BAD_METHOD): return .corrupt("unknown compression method")
        case Int(WINBACK_ISAL_BAD_CHECKSUM): return .corrupt("incorrect data check")
        default: return .corrupt("ISA-L error \(rc)")
        }
    }
}

/// Inflates a gzip file (single- or multi-member) in chunks, with zlib or ISA-L.
///
/// A corrupt or truncated member fails with the file and the compressed byte offset.
final class GzipFileSource: ByteSource {
    private let file: RawInput
    private let engine: InflateEngine
    private let buffer: UnsafeMutableRawBufferPointer
    /// The compressed bytes read but not yet inflated, within `buffer`.
    @exclusivity(unchecked) private var input: UnsafeRawBufferPointer
    /// File offset of `buffer`'s first byte.
    @exclusivity(unchecked) private var bufferFileOffset = 0
    @exclusivity(unchecked) private var eof = false
    @exclusivity(unchecked) private var memberEnded = false
    @exclusivity(unchecked) private var sawMember = false
    @exclusivity(unchecked) private(set) var bytesProduced = 0

    static let inputSize = 1 << 18

    convenience init(path: String, inflater: Inflater = .zlib) throws {
        try inflater.requireAvailable()
        try self.init(input: try FileHandleFD(path: path), inflater: inflater)
    }

    init(input raw: RawInput, inflater: Inflater = .zlib) throws {
        try inflater.requireAvailable()
        file = raw
        guard let engine: InflateEngine = inflater == .isal ? IsalEngine() : ZlibEngine() else {
            throw WinBackError(.software, "cannot start the \(inflater.rawValue) inflater", path: raw.path)
        }
        self.engine = engine
        buffer = .allocate(byteCount: GzipFileSource.inputSize, alignment: 16)
        self.input = UnsafeRawBufferPointer(start: buffer.baseAddress, count: 0)
    }

    deinit { buffer.deallocate() }

    func fileSHA256() -> String { file.sha256() }

    var fileBytesConsumed: Int {
        bufferFileOffset + UnsafeRawPointer(buffer.baseAddress!).distance(to: input.baseAddress!)
    }

    /// Moves the unread input to the front of the buffer and reads more after it.
    private func refill() throws {
        let base = buffer.baseAddress!
        let consumed = UnsafeRawPointer(base).distance(to: input.baseAddress!)
        let keep = input.count
        if keep > 0, consumed > 0 { base.copyMemory(from: input.baseAddress!, byteCount: keep) }
        bufferFileOffset += consumed
        let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[keep...]))
        if n == 0 { eof = true }
        input = UnsafeRawBufferPointer(start: base, count: keep + n)
    }

    private func fail(_ what: String) -> WinBackError {
        WinBackError(.badData, "\(what) at compressed byte offset \(fileBytesConsumed)", path: file.path)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        var output = buffer
        while true {
            if input.isEmpty && !eof { try refill() }
            if memberEnded {
                if input.isEmpty && eof { break }
                // Another member follows: start it afresh.
                memberEnded = false
                engine.nextMember()
            }
            if !sawMember {
                if input.isEmpty && eof { throw fail("empty file, not gzip data") }
                if input[0] != 0x1f { throw fail("not gzip data (bad magic byte)") }
                sawMember = true
            }
            let (inBefore, outBefore) = (input.count, output.count)
            switch engine.inflate(&input, &output) {
            case .memberEnd:
                memberEnded = true
                if input.isEmpty && !eof { try refill() }
                if !input.isEmpty, input[0] != 0x1f { throw fail("trailing data that is not a gzip member") }
            case .progress:
                if inBefore == input.count && outBefore == output.count && !input.isEmpty && !output.isEmpty {
                    throw fail("corrupt gzip data (no progress)")
                }
            case .corrupt(let message):
                throw fail("corrupt gzip data (\(message))")
            case .outOfMemory:
                throw WinBackError(.software, "the inflater is out of memory", path: file.path)
            }
            if output.isEmpty { break }
            if input.isEmpty && eof {
                if !memberEnded { throw fail("truncated gzip data (unexpected end of file)") }
                break
            }
        }
        let n = buffer.count - output.count
        bytesProduced += n
        return n
    }
}
