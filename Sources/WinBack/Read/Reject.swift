/// A rejected input row: data, reported in `rejects.csv` and counted, never thrown.
public struct Reject: Sendable, Equatable, Codable {
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
    init(file: String, line: Int, reason: String, bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        var scalars = String.UnicodeScalarView()
        for (i, s) in text.unicodeScalars.enumerated() {
            if i == 200 { break }
            scalars.append(s)
        }
        self.init(
            file: file, line: line, reason: ControlEscape.escaped(reason),
            excerpt: ControlEscape.escaped(String(scalars)))
    }
}
