/// Builds RFC 4180 records (docs/rules.md §4.1): a field is quoted only when it holds a comma, a quote,
/// CR or LF; every record ends with `\n`; a cell that could start a spreadsheet formula is
/// prefixed with `'`.
public struct CSVRecord {
    public private(set) var bytes: [UInt8] = []
    private var first = true

    public init() {}

    /// Starts a new record in the same buffer (keeps capacity).
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        first = true
    }

    @inline(__always)
    private mutating func separator() {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
    }

    /// A text field, escaped as needed.
    public mutating func field<S: StringProtocol>(_ s: S) {
        separator()
        CSVRecord.appendEscaped(Array(s.utf8), to: &bytes)
    }

    /// A text field, escaped as needed: a String's bytes where they are, no copy made.
    public mutating func field(_ s: String) {
        separator()
        CSVRecord.appendEscaped(s.utf8.span, to: &bytes)
    }

    /// A text field given as a view of UTF-8 bytes where they are stored, escaped as needed.
    public mutating func field(bytes b: Span<UInt8>) {
        separator()
        CSVRecord.appendEscaped(b, to: &bytes)
    }

    public mutating func field(_ i: Int64) {
        separator()
        CSVRecord.appendDecimal(i, to: &bytes)
    }

    /// A text field given as UTF-8 bytes, escaped as needed.
    public mutating func field(bytes b: [UInt8]) {
        separator()
        CSVRecord.appendEscaped(b, to: &bytes)
    }

    /// Appends bytes that are already a whole escaped field (see ``escaped(_:)``): viewed where
    /// they are, so that a field shared by every record (a static one) is not retained on each,
    /// which threads writing at once would contend for.
    public mutating func field(escaped b: [UInt8]) { field(escaped: b.span) }

    /// Appends bytes that are already a whole escaped field, viewed where they are stored.
    public mutating func field(escaped b: Span<UInt8>) {
        separator()
        bytes.append(addingCapacity: b.count) { o in
            for i in b.indices { o.append(b[i]) }
        }
    }

    /// `s` as a field's bytes, escaped as needed: for values written on many records.
    public static func escaped<S: StringProtocol>(_ s: S) -> [UInt8] {
        var out: [UInt8] = []
        appendEscaped(Array(s.utf8), to: &out)
        return out
    }

    /// Appends the decimal digits of `i` (with a leading `-` when negative), allocating nothing.
    package static func appendDecimal(_ i: Int64, to out: inout [UInt8]) {
        if i == .min {
            out.append(contentsOf: String(i).utf8)
        } else if i < 0 {
            out.append(UInt8(ascii: "-"))
            Timestamp.pad(-i, 1, &out)
        } else {
            Timestamp.pad(i, 1, &out)
        }
    }

    public mutating func field(_ i: Int) { field(Int64(i)) }

    /// An ISO 8601 UTC timestamp with milliseconds, or empty.
    public mutating func field(timestamp t: Int64?) {
        separator()
        if let t { Timestamp.appendISO(t, to: &bytes) }
    }

    public mutating func empty() { separator() }

    /// One field per value, in order (``CSVFieldValue``): a report's row in one call.
    public mutating func fields(_ values: any CSVFieldValue...) {
        for v in values { v.write(into: &self) }
    }

    public mutating func end() { bytes.append(UInt8(ascii: "\n")) }

    /// A field written as it is, quoted only when CSV needs it: for a value checked before it
    /// came here, such as an identity value (docs/rules.md §6.2), which must reach a tool
    /// exactly as written and never starts a formula.
    public mutating func field<S: StringProtocol>(verbatim s: S) {
        separator()
        CSVRecord.appendEscaped(Array(s.utf8), to: &bytes, guardFormula: false)
    }

    /// Whether a cell of `c` must be quoted: a comma, a quote, CR or LF.
    @inline(__always)
    static func needsQuote(_ c: UInt8) -> Bool { c == 0x2C || c == 0x22 || c == 0x0D || c == 0x0A }

    /// Whether a cell starting with `c0` would be read as a formula by a spreadsheet: `=`, `+`,
    /// `-`, `@`, tab, CR.
    @inline(__always)
    static func startsFormula(_ c0: UInt8) -> Bool {
        c0 == 0x3D || c0 == 0x2B || c0 == 0x2D || c0 == 0x40 || c0 == 0x09 || c0 == 0x0D
    }

    /// ``appendEscaped(_:to:guardFormula:)`` of bytes where they are stored: those that need
    /// neither quotes nor the formula guard (nearly all: ids, dates, numbers) are copied at once.
    static func appendEscaped(_ s: Span<UInt8>, to out: inout [UInt8], guardFormula: Bool = true) {
        guard !s.isEmpty else { return }
        var plain = !(guardFormula && startsFormula(s[0]))
        if plain {
            for i in s.indices where needsQuote(s[i]) {
                plain = false
                break
            }
        }
        guard plain else {
            appendEscaped(s.indices.map { s[$0] }, to: &out, guardFormula: guardFormula)
            return
        }
        out.append(addingCapacity: s.count) { o in
            for i in s.indices { o.append(s[i]) }
        }
    }

    static func appendEscaped<C: Collection>(_ s: C, to out: inout [UInt8], guardFormula: Bool = true)
    where C.Element == UInt8 {
        guard let c0 = s.first else { return }
        let quoted = s.contains(where: needsQuote)
        let formula = guardFormula && startsFormula(c0)
        if quoted { out.append(0x22) }
        if formula { out.append(0x27) }
        if quoted {
            for c in s {
                if c == 0x22 { out.append(0x22) }
                out.append(c)
            }
            out.append(0x22)
        } else {
            out.append(contentsOf: s)
        }
    }

    /// A whole table: the header, then one record per row filled by `fill`.
    public static func table<Row>(_ columns: [String], _ rows: [Row], _ fill: (inout CSVRecord, Row) -> Void) -> [UInt8]
    {
        var out = header(columns)
        var r = CSVRecord()
        for row in rows {
            r.reset()
            fill(&r, row)
            r.end()
            out += r.bytes
        }
        return out
    }

    /// A header record from column names.
    public static func header(_ columns: [String]) -> [UInt8] {
        var r = CSVRecord()
        for c in columns { r.field(c) }
        r.end()
        return r.bytes
    }
}

/// A value a report writes as one CSV field: text, escaped as needed; a whole number; nothing,
/// for nil.
public protocol CSVFieldValue {
    func write(into record: inout CSVRecord)
}

extension String: CSVFieldValue {
    public func write(into record: inout CSVRecord) { record.field(self) }
}

extension Int: CSVFieldValue {
    public func write(into record: inout CSVRecord) { record.field(self) }
}

extension Int64: CSVFieldValue {
    public func write(into record: inout CSVRecord) { record.field(self) }
}

extension Optional: CSVFieldValue where Wrapped: CSVFieldValue {
    public func write(into record: inout CSVRecord) {
        if let v = self { v.write(into: &record) } else { record.empty() }
    }
}
