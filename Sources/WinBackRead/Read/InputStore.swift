import Foundation
import WinBackPostgres
import WinBackS3
import WinBackSupport

/// What says that an input is still the one resolved (docs/rules.md §11, §12): a local file's
/// size and its `stat` identity (device, inode, size, times), or an object's ETag and size.
public enum InputIdentity: Sendable, Hashable {
    case file(size: Int, stat: [Int64]?)
    case object(etag: String, size: Int)
    /// Rows of a PostgreSQL table or query (docs/rules.md §14.1): what they are is in the input's
    /// name (the table, and the cursor range it reads); `size`, the bytes they gave when read,
    /// 0 before.
    case rows(size: Int)

    /// The input's size in bytes.
    public var size: Int {
        switch self {
        case .file(let size, _), .object(_, let size), .rows(let size): size
        }
    }

    /// Whether the input is rows of a table: once absorbed, never read again (§14.1).
    public var isRows: Bool {
        if case .rows = self { return true }
        return false
    }

    /// The object's ETag; nil for a local file.
    public var etag: String? {
        if case .object(let etag, _) = self { return etag }
        return nil
    }

    /// A local file's `stat` identity; nil for an object.
    public var stat: [Int64]? {
        if case .file(_, let stat) = self { return stat }
        return nil
    }
}

/// An input resolved once: its path (or URI, as the globs gave it) and its identity, handed to
/// the readers, the ledger and the manifest, so that each sees the same facts.
public struct Input: Sendable, Hashable {
    public var path: String
    public var identity: InputIdentity

    public init(path: String, identity: InputIdentity) {
        self.path = path
        self.identity = identity
    }
}

/// Where inputs are kept: resolves patterns, tells an input's identity and opens it. A new
/// kind of store is a new type, not a test of a path's prefix at every reader.
protocol InputStore {
    /// The inputs `pattern` names (made absolute against `base`), each with its identity.
    /// None is 66.
    func resolve(_ pattern: String, base: String) throws -> [Input]
    /// The path made absolute against `base` and normalised.
    func absolute(_ path: String, base: String) -> String
    /// The identity of `path` now; nil when it cannot be had (the read reports why).
    func identity(_ path: String) -> InputIdentity?
    /// The raw bytes of `input`, as resolved: an object changed since is an error.
    func open(_ input: Input) throws -> RawInput
    /// The raw bytes of `path`, as it is now.
    func open(_ path: String) throws -> RawInput
    /// The whole of a small input (a catalog, a pipeline's side file); nil when it is missing
    /// or unreadable.
    func contents(_ path: String) throws -> Data?
    /// Whether `path` is there and readable as a file: a local path is examined, an object is
    /// looked up (its absence thrown as 66).
    func isReadableFile(_ path: String) throws -> Bool
}

/// Files on this machine.
struct LocalStore: InputStore {
    func resolve(_ pattern: String, base: String) throws -> [Input] {
        try InputFiles.resolveLocal(pattern, base: base).map { path in
            Input(path: path, identity: .file(size: System.fileSize(path) ?? 0, stat: System.fileIdentity(path)))
        }
    }

    func absolute(_ path: String, base: String) -> String { FilePaths.absolute(path, base: base) }

    func identity(_ path: String) -> InputIdentity? {
        System.fileSize(path).map { .file(size: $0, stat: System.fileIdentity(path)) }
    }

    func open(_ input: Input) throws -> RawInput { try FileHandleFD(path: input.path) }

    func open(_ path: String) throws -> RawInput { try FileHandleFD(path: path) }

    /// A regular file's bytes; nil when it is missing or unreadable (the caller names the file).
    /// Anything else (a folder, a FIFO: never read) is a configuration error naming it.
    func contents(_ path: String) throws -> Data? {
        do { return try System.readRegularFile(path).map { Data($0) } } catch let e as System.NotRegularFile {
            throw WinBackError(.configuration, "is \(e.what), not a regular file", path: path)
        } catch { return nil }
    }

    func isReadableFile(_ path: String) throws -> Bool { System.kind(path) == .file && System.isReadable(path) }
}

/// Objects in S3 (docs/rules.md §11): globs listed with ListObjectsV2 and matched one key
/// segment at a time; an object is read as listed (its ETag), never from a cache.
final class ObjectStore: InputStore {
    private let client: S3Client

    init(client: S3Client) { self.client = client }

    private func location(_ uri: String) throws -> S3Location {
        guard let l = S3Location(uri: uri) else {
            throw WinBackError(.configuration, "not an \(InputStores.objectScheme)bucket/key URI", path: uri)
        }
        return l
    }

    func resolve(_ pattern: String, base: String) throws -> [Input] {
        let location = try location(pattern)
        let magic = location.key.firstIndex { "*?[".contains($0) }
        let prefix = magic.map { String(location.key[..<$0]) } ?? location.key
        // Filtered page by page: only the matches are held (docs/rules.md §6.2).
        let matches = try client.list(bucket: location.bucket, prefix: prefix) { key in
            magic == nil ? key == location.key : fnmatch(location.key, key, FNM_PATHNAME) == 0
        }
        if matches.isEmpty { throw WinBackError(.noInput, "matches no object", path: pattern) }
        return matches.map { Input(path: $0.location.uri, identity: .object(etag: $0.etag, size: $0.size)) }
    }

    func absolute(_ path: String, base: String) -> String { path }

    func identity(_ path: String) -> InputIdentity? {
        guard let l = S3Location(uri: path), let o = try? client.head(l) else { return nil }
        return .object(etag: o.etag, size: o.size)
    }

    func open(_ input: Input) throws -> RawInput {
        guard case .object(let etag, let size) = input.identity else { return try open(input.path) }
        return S3Input(location: try location(input.path), size: size, etag: etag, client: client)
    }

    func open(_ path: String) throws -> RawInput {
        let o = try client.head(try location(path))
        return S3Input(location: o.location, size: o.size, etag: o.etag, client: client)
    }

    func contents(_ path: String) throws -> Data? {
        let l = try location(path)
        let o = try client.head(l)
        return o.size == 0 ? Data() : try client.read(l, from: 0, count: o.size, etag: o.etag, size: o.size)
    }

    func isReadableFile(_ path: String) throws -> Bool {
        _ = try resolve(path, base: "/")
        return true
    }
}

/// The stores inputs are kept in, and the one place a path's scheme is looked at: a local path
/// or `s3://bucket/key` (docs/rules.md §11). Readers, the ledger and the manifest see only
/// ``Input`` values and byte sources.
public enum InputStores {
    /// The scheme of an object's URI.
    package static let objectScheme = "s3://"

    /// The store `path` is kept in.
    static func store(for path: String) throws -> InputStore {
        if path.hasPrefix(TableStore.scheme) { return TableStore() }
        return path.hasPrefix(objectScheme) ? ObjectStore(client: try S3Client.shared()) : LocalStore()
    }

    /// Whether `path` names an object or a table's rows rather than a local file.
    package static func isObject(_ path: String) -> Bool {
        path.hasPrefix(objectScheme) || path.hasPrefix(TableStore.scheme)
    }

    /// Registers a `postgres:` block of the pipeline: inputs named by the label it returns read
    /// it (docs/rules.md §14.1).
    public static func register(_ source: PostgresSource) -> String { TableStore.register(source) }

    /// The ranges of the table source `label` an incremental state absorbed: they are taken from
    /// the state, and only the rows above them are read (docs/rules.md §14.1).
    public static func setAbsorbed(_ ranges: [TableRange], of label: String) {
        TableStore.setAbsorbed(ranges, of: label)
    }

    /// Bounds every wait on a PostgreSQL server (`limits.networkSeconds`).
    public static func limitTables(seconds: Double) { TableStore.limit(seconds: seconds) }

    /// Whether `path` names rows of a PostgreSQL table or query (docs/rules.md §14.1).
    package static func isTable(_ path: String) -> Bool { path.hasPrefix(TableStore.scheme) }

    /// The store of `path` when it needs no client to name (a local path), for what only
    /// normalises or examines a path.
    static func namingStore(for path: String) -> InputStore {
        (try? store(for: path)) ?? LocalStore()
    }

    /// Every input `patterns` name, each once, in sorted path order, with its identity; a
    /// pattern matching nothing fails with exit 66 naming it.
    public static func resolve(_ patterns: [String], base: String) throws -> [Input] {
        var found: [String: Input] = [:]
        for pattern in patterns {
            for input in try store(for: pattern).resolve(pattern, base: base) { found[input.path] = input }
        }
        return found.keys.sorted(by: FileName.precedes).map { found[$0]! }
    }

    /// The identity of `path` now (a `stat`, or a HEAD request); nil when it cannot be had.
    public static func identity(_ path: String) -> InputIdentity? {
        (try? store(for: path))?.identity(path)
    }

    /// `path` as it is now, with its identity (size 0 when it cannot be had: its read says why).
    public static func lookUp(_ path: String) -> Input {
        Input(path: path, identity: identity(path) ?? .file(size: 0, stat: nil))
    }

    /// The whole of a small input (a catalog, a rates file); nil when it is missing or
    /// unreadable. An object that cannot be had throws the store's error.
    public static func contents(_ path: String) throws -> Data? {
        try store(for: path).contents(path)
    }

    /// Whether `path` is there and readable as a file (an object: looked up, its absence
    /// thrown as 66).
    public static func isReadableFile(_ path: String) throws -> Bool {
        try store(for: path).isReadableFile(path)
    }

    /// Whether something is at `path`: an object always (its read says why not), a local path
    /// when anything is there.
    public static func exists(_ path: String) -> Bool {
        isObject(path) || System.exists(path)
    }

    /// Whether `path` may be read as a file: an object always (its read says why not), a local
    /// path when something other than a folder is there.
    public static func existsAsFile(_ path: String) -> Bool {
        isObject(path) || System.existsAsFile(path)
    }
}
