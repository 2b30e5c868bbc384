import WinBackModel
import WinBackSupport

/// A rejected input row: data, reported in `rejects.csv` and counted, never thrown.
public struct Reject: Sendable, Equatable, Codable {
    /// The file's path as read (a ``FileName``); written escaped (``ControlEscape/name(_:)``).
    public var file: String
    public var line: Int
    public var reason: String
    /// The line decoded as UTF-8 (with replacement characters), cut to 200 scalars, its
    /// control characters then escaped (``ControlEscape``).
    public var excerpt: String

    public init(file: String, line: Int, reason: String, excerpt: String) {
        self.file = file
        self.line = line
        self.reason = reason
        self.excerpt = excerpt
    }

    /// A reject of the line `bytes`. The excerpt and the reason (which may quote the line) have
    /// their control characters escaped, so the reject is one line of `rejects.csv`
    /// (docs/rules.md §6).
    init(file: String, line: Int, reason: String, bytes: some Collection<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        var scalars = String.UnicodeScalarView()
        for (i, s) in text.unicodeScalars.enumerated() {
            if i == 200 { break }
            scalars.append(s)
        }
        self.init(
            file: file, line: line, reason: ControlEscape.escaped(reason),
            excerpt: ControlEscape.escapedText(String(scalars)))
    }
}

/// Bounds on what bad input may cost a run (docs/rules.md §6.1).
public struct ReadLimits: Sendable, Equatable {
    /// A longer line is rejected without being held.
    public var maxLineBytes: Int
    /// rejects.csv lists at most this many rejected rows, then says how many more there were.
    public var maxRejectsListed: Int

    /// The defaults are a pipeline file's when its `limits:` does not set them.
    public init(maxLineBytes: Int = 16 << 20, maxRejectsListed: Int = 100_000) {
        self.maxLineBytes = maxLineBytes
        self.maxRejectsListed = maxRejectsListed
    }

    public static let `default` = ReadLimits()
}

/// Rejected rows as rejects.csv lists them (docs/rules.md §6.1): the first `limit` in (file,
/// line) order, and how many there were in all. Only those that may be listed are held, so
/// memory does not grow with bad input; lists merge by keeping the first `limit` of both.
///
/// As a collection it is the listed rejects, in order once normalized (every list a reader
/// returns is).
public struct RejectList: Sendable, Equatable, Codable, RandomAccessCollection {
    /// Unsorted and possibly longer than `limit` until ``normalize()``.
    private var held: [Reject] = []
    /// Rejected rows in all, listed or not.
    public private(set) var total = 0
    public let limit: Int

    public init(limit: Int = ReadLimits.default.maxRejectsListed) { self.limit = limit }

    /// A list of `rejects`, in any order.
    public init(_ rejects: [Reject], limit: Int = ReadLimits.default.maxRejectsListed) {
        self.limit = limit
        held = rejects
        total = rejects.count
        normalize()
    }

    /// The listed rejects, sorted by file (by the bytes of its name), then line.
    public var listed: [Reject] {
        var copy = self
        copy.normalize()
        return copy.held
    }

    public var startIndex: Int { held.startIndex }
    public var endIndex: Int { held.endIndex }
    public subscript(i: Int) -> Reject { held[i] }

    /// Rejected rows not listed.
    public var omitted: Int { total - Swift.min(total, held.count, limit) }

    /// Adds one reject of a file whose rejects come in line order (`make` runs only when it
    /// can be listed).
    @inline(__always)
    public mutating func add(_ make: @autoclosure () -> Reject) {
        total += 1
        if held.count < limit { held.append(make()) }
    }

    /// Adds every reject of `other`.
    public mutating func merge(_ other: RejectList) {
        total += other.total
        held += other.held
        if held.count > 2 * Swift.max(limit, 4096) { normalize() }
    }

    /// Prefixes the reason of each held reject whose line `names` names with that name
    /// (`id 1042: …`): a table's rows named by their cursor value (docs/rules.md §14.1).
    package mutating func name(_ names: [Int: String]) {
        for i in held.indices {
            if let n = names[held[i].line] { held[i].reason = ControlEscape.escaped(n) + ": " + held[i].reason }
        }
    }

    /// Sorts the held rejects and keeps the first `limit`.
    public mutating func normalize() {
        held = held.enumerated().sorted { a, b in
            a.element.file != b.element.file
                ? FileName.precedes(a.element.file, b.element.file)
                : a.element.line != b.element.line ? a.element.line < b.element.line : a.offset < b.offset
        }.prefix(limit).map(\.element)
    }
}
