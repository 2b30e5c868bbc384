import Crypto
import Foundation
import WinBackPostgres
import WinBackSupport

/// Rows kept in PostgreSQL (docs/rules.md §14.1), read as the lines of a file.
///
/// A pipeline's `postgres:` block is registered under its label (``PostgresSource/label``,
/// `postgres:<table>.<column>`), which stands for it where a file's path would. A source with
/// a cursor is read in ranges of that cursor, each an input of its own named by the label, its
/// place in the sequence and its range (`postgres:notifications.payload#000002 (1000,1500]`): an
/// incremental night takes the ranges its state absorbed from the state and reads only the new
/// one above them; names sort in cursor order, the order a whole read goes by.
struct TableStore: InputStore {
    static let scheme = "postgres:"

    /// The registered sources, by label; the ranges an incremental state absorbed, by label.
    private static let lock = NSLock()
    nonisolated(unsafe) private static var sources: [String: PostgresSource] = [:]
    nonisolated(unsafe) private static var absorbed: [String: [TableRange]] = [:]
    nonisolated(unsafe) private static var seconds: Double = 600

    /// Registers `source`: inputs named by its label read it. Returns the label.
    @discardableResult
    static func register(_ source: PostgresSource) -> String {
        lock.lock()
        defer { lock.unlock() }
        sources[source.label] = source
        return source.label
    }

    /// The ranges of `label` an incremental state absorbed (from its ledger): they stay inputs
    /// (taken from the state, not read), and only rows above the last are read.
    static func setAbsorbed(_ ranges: [TableRange], of label: String) {
        lock.lock()
        defer { lock.unlock() }
        absorbed[label] = ranges
    }

    /// Every wait on the server is bounded by this many seconds (`limits.networkSeconds`).
    static func limit(seconds s: Double) {
        lock.lock()
        defer { lock.unlock() }
        seconds = s
    }

    static func source(_ label: String) throws -> (PostgresSource, Double) {
        lock.lock()
        defer { lock.unlock() }
        guard let s = sources[label] else {
            throw WinBackError(.configuration, "no postgres: block of the pipeline is called this", path: label)
        }
        return (s, seconds)
    }

    private static func absorbedRanges(_ label: String) -> [TableRange] {
        lock.lock()
        defer { lock.unlock() }
        return absorbed[label] ?? []
    }

    func resolve(_ pattern: String, base: String) throws -> [Input] {
        let (source, seconds) = try Self.source(pattern)
        guard source.cursor != nil else { return [Input(path: pattern, identity: .rows(size: 0))] }
        let c = try PostgresConnection(source.connection, field: source.field + ".connection", seconds: seconds)
        var ranges = Self.absorbedRanges(pattern)
        let last = ranges.last?.through
        let (greatest, ends) = try source.plan(c, after: last)
        if ranges.isEmpty || greatest != nil {
            // The new rows, in ranges of at most rangeRows rows: each read by a thread of its own.
            var after = last
            for end in ends + [greatest] {
                ranges.append(TableRange(sequence: ranges.count + 1, after: after, through: end, bytes: 0))
                after = end
            }
        }
        return ranges.map { Input(path: $0.name(pattern), identity: .rows(size: $0.bytes)) }
    }

    func absolute(_ path: String, base: String) -> String { path }

    func identity(_ path: String) -> InputIdentity? { .rows(size: 0) }

    func open(_ input: Input) throws -> RawInput { try open(input.path) }

    func open(_ path: String) throws -> RawInput {
        let (label, range) = TableRange.parse(path)
        let (source, seconds) = try Self.source(label)
        return try TableInput(
            path: path,
            stream: PostgresRowStream(source, after: range?.after, through: range?.through, seconds: seconds))
    }

    /// Never held whole: a table is no small file.
    func contents(_ path: String) throws -> Data? {
        throw WinBackError(.configuration, "a postgres: source cannot stand for a small file here", path: path)
    }

    func isReadableFile(_ path: String) throws -> Bool {
        let (source, seconds) = try Self.source(TableRange.parse(path).label)
        try source.check(seconds: seconds)
        return true
    }
}

/// A range of a table's cursor read as one input (docs/rules.md §14.1): rows with the cursor
/// above `after` (all, when nil) up to `through` (all, when nil).
public struct TableRange: Sendable, Equatable {
    public var sequence: Int
    public var after: String?
    public var through: String?
    /// What the range gave when it was read (0 before).
    public var bytes: Int

    public init(sequence: Int, after: String?, through: String?, bytes: Int) {
        self.sequence = sequence
        self.after = after
        self.through = through
        self.bytes = bytes
    }

    /// The input's name: `<label>#<sequence, six digits> (<after>,<through>]`, the values with
    /// `%`, `,`, `#`, `(`, `]` and control characters %-escaped (a text cursor may hold them).
    public func name(_ label: String) -> String {
        let n = String(sequence)
        return label + "#" + String(repeating: "0", count: max(0, 6 - n.count)) + n + " ("
            + Self.escape(after ?? "") + "," + Self.escape(through ?? "") + "]"
    }

    static func escape(_ value: String) -> String {
        var out: [UInt8] = []
        for b in value.utf8 {
            if b < 0x20 || b == 0x7F || "%,#(]".utf8.contains(b) {
                out += Array(("%" + String(b, radix: 16, uppercase: true).leftPadded(2)).utf8)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func unescape(_ text: Substring) -> String {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let b = bytes.first {
            bytes = bytes.dropFirst()
            if b == UInt8(ascii: "%"), bytes.count >= 2,
                let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
            {
                out.append(v)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The label and range of an input's name (no range: the whole table).
    public static func parse(_ path: String) -> (label: String, range: TableRange?) {
        guard let hash = path.lastIndex(of: "#"), path.hasSuffix("]") else { return (path, nil) }
        let label = String(path[..<hash])
        let rest = path[path.index(after: hash)...]
        guard let open = rest.firstIndex(of: " "), let seq = Int(rest[..<open]),
            rest[rest.index(after: open)...].hasPrefix("("), let comma = rest.firstIndex(of: ",")
        else { return (path, nil) }
        let after = unescape(rest[rest.index(open, offsetBy: 2)..<comma])
        let through = unescape(rest[rest.index(after: comma)..<rest.index(before: rest.endIndex)])
        return (
            label,
            TableRange(
                sequence: seq, after: after.isEmpty ? nil : after, through: through.isEmpty ? nil : through, bytes: 0)
        )
    }
}

/// The rows of one range of a table, as a raw input.
final class TableInput: RawInput {
    let path: String
    private let stream: PostgresRowStream
    private var hasher = SHA256Hasher()

    init(path: String, stream: PostgresRowStream) {
        self.path = path
        self.stream = stream
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let typed = buffer.assumingMemoryBound(to: UInt8.self)
        var span = typed.mutableSpan
        let n = try stream.read(into: &span)
        hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        return n
    }

    func sha256() -> String { hasher.hex() }

    /// The cursor values of rows `numbers` (docs/rules.md §14.1).
    func lineNames(_ numbers: [Int]) -> [Int: String] { stream.cursorValues(of: numbers) }
}

extension String {
    fileprivate func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// SHA-256 of bytes as they come.
struct SHA256Hasher {
    private var h = Crypto.SHA256()
    mutating func update(_ bytes: UnsafeRawBufferPointer) { h.update(bufferPointer: bytes) }
    func hex() -> String { Hex.string(h.finalize()) }
}
