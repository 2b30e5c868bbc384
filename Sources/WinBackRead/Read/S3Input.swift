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

    init(uri: String) throws {
        guard let location = S3Location(uri: uri) else {
            throw WinBackError(.configuration, "not an s3://bucket/key URI", path: uri)
        }
        path = uri
        self.location = location
        client = try S3Client.shared()
        let object = try S3Inputs.known(uri) ?? client.head(location)
        size = object.size
        etag = object.etag
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

/// `s3://` inputs (docs/rules.md §11): globs listed with ListObjectsV2, matched one key segment
/// at a time; what a listing found is kept, so sizes are not asked again.
public enum S3Inputs {
    nonisolated(unsafe) private static var objects: [String: S3Object] = [:]
    private static let lock = NSLock()

    static func known(_ uri: String) -> S3Object? {
        lock.lock()
        defer { lock.unlock() }
        return objects[uri]
    }

    static func remember(_ found: [S3Object]) {
        lock.lock()
        for o in found { objects[o.location.uri] = o }
        lock.unlock()
    }

    /// The objects `pattern` names: the object itself, or with `*`, `?` and `[…]`, every key
    /// they match within its `/`-separated segments. None is 66.
    public static func resolve(_ pattern: String) throws -> [String] {
        guard let location = S3Location(uri: pattern) else {
            throw WinBackError(.configuration, "not an s3://bucket/key URI", path: pattern)
        }
        let client = try S3Client.shared()
        let magic = location.key.firstIndex { "*?[".contains($0) }
        let prefix = magic.map { String(location.key[..<$0]) } ?? location.key
        let listed = try client.list(bucket: location.bucket, prefix: prefix)
        let matches = listed.filter { o in
            magic == nil ? o.location.key == location.key : fnmatch(location.key, o.location.key, FNM_PATHNAME) == 0
        }
        if matches.isEmpty { throw WinBackError(.noInput, "matches no object", path: pattern) }
        remember(matches)
        return matches.map(\.location.uri)
    }

    /// The object's ETag as its listing gave it, for the manifest; nil for a local path.
    public static func etag(_ uri: String) -> String? { known(uri)?.etag }

    /// The object's size, from its listing or a HEAD request; 0 when it cannot be had (the read
    /// reports why).
    public static func size(_ uri: String) -> Int {
        if let o = known(uri) { return o.size }
        guard let l = S3Location(uri: uri), let o = try? S3Client.shared().head(l) else { return 0 }
        remember([o])
        return o.size
    }

    /// The whole of a small object (a catalog, a pipeline's side file).
    public static func contents(_ uri: String) throws -> Data {
        guard let l = S3Location(uri: uri) else {
            throw WinBackError(.configuration, "not an s3://bucket/key URI", path: uri)
        }
        let client = try S3Client.shared()
        let o = try known(uri) ?? client.head(l)
        return o.size == 0 ? Data() : try client.read(l, from: 0, count: o.size, etag: o.etag, size: o.size)
    }
}
