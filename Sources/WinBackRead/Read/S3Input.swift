import Crypto
import Foundation
import WinBackS3
import WinBackSupport

/// An object in S3 read as a stream (docs/rules.md §11): in ranges of ``rangeSize`` bytes, with
/// the next ``readAhead`` ranges already on their way while one is consumed, so the network and
/// the inflater work at once; no object is ever held whole. Its bytes are hashed as they come,
/// and a range that comes back short is an I/O error (74).
final class S3Input: RawInput {
    let path: String
    let location: S3Location
    let size: Int
    /// The object as listed: every range must come from it (If-Match).
    let etag: String
    private let client: S3Client
    @exclusivity(unchecked) private var hasher = SHA256()
    @exclusivity(unchecked) private var chunk = Data()
    @exclusivity(unchecked) private var chunkOffset = 0
    /// Object bytes asked for so far.
    @exclusivity(unchecked) private var requested = 0
    @exclusivity(unchecked) private var inFlight: [Fetch] = []

    static let rangeSize = 2 << 20
    static let readAhead = 3

    /// One range on its way.
    final class Fetch: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var result: Result<Data, Error> = .success(Data())

        /// Fetched on a thread of its own: the pipeline's workers fill Dispatch's pool and wait
        /// for these ranges, and a pool that must grow first would make them wait whole seconds.
        init(_ client: S3Client, _ location: S3Location, from: Int, count: Int, etag: String, size: Int) {
            Thread.detachNewThread {
                self.result = Result {
                    try client.read(location, from: from, count: count, etag: etag, size: size)
                }
                self.done.signal()
            }
        }

        func wait() throws -> Data {
            done.wait()
            return try result.get()
        }
    }

    /// Reads the object at `location` as it was listed or looked up (`size`, `etag`), through
    /// `client`.
    init(location: S3Location, size: Int, etag: String, client: S3Client) {
        path = location.uri
        self.location = location
        self.client = client
        self.size = size
        self.etag = etag
    }

    deinit {
        // Ranges still on their way finish on their own; nothing waits for them.
        inFlight.removeAll()
    }

    private func askAhead() {
        while inFlight.count < S3Input.readAhead && requested < size {
            let count = min(S3Input.rangeSize, size - requested)
            inFlight.append(Fetch(client, location, from: requested, count: count, etag: etag, size: size))
            requested += count
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        if chunkOffset == chunk.count {
            askAhead()
            guard !inFlight.isEmpty else { return 0 }
            chunk = try inFlight.removeFirst().wait()
            chunkOffset = 0
            chunk.withUnsafeBytes { hasher.update(bufferPointer: $0) }
            askAhead()
        }
        let n = min(buffer.count, chunk.count - chunkOffset)
        chunk.withUnsafeBytes { src in
            buffer.baseAddress!.copyMemory(from: src.baseAddress! + chunkOffset, byteCount: n)
        }
        chunkOffset += n
        return n
    }

    func sha256() -> String { Hex.string(hasher.finalize()) }
}
