import Foundation

/// A Prometheus text-format file (exposition format 0.0.4) read into its samples, HELP and
/// TYPE lines: what a metrics file shared by several pipelines holds (docs/rules.md §10.3).
///
/// Read strictly, so that what is written back is valid text format whatever the previous
/// file held: a line that does not parse (invalid UTF-8, a bad name, label or value, a second
/// HELP or TYPE of one name, a sample already seen) is dropped and listed in ``dropped``. Written
/// back as families: each family once, its HELP and TYPE first, then all its samples.
package struct MetricsExposition {
    /// One label of a sample; `value` unescaped.
    package struct Label: Equatable {
        package var name: String
        package var value: String

        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// One sample line: `name{labels} value [timestamp]`.
    package struct Sample {
        package var name: String
        package var labels: [Label]
        /// The value as written (a decimal number, `NaN`, `+Inf` or `-Inf`).
        package var value: String
        package var timestamp: String?

        package init(name: String, labels: [Label], value: String, timestamp: String? = nil) {
            self.name = name
            self.labels = labels
            self.value = value
            self.timestamp = timestamp
        }

        /// The series it belongs to: its name and its labels in name order.
        package var series: String {
            name + "{"
                + labels.sorted { $0.name < $1.name }.map { "\($0.name)=\"\(escaped($0.value))\"" }
                .joined(separator: ",") + "}"
        }

        /// The value of its `pipeline` label, if any.
        package var pipeline: String? { labels.first { $0.name == "pipeline" }?.value }

        package var line: String {
            let set =
                labels.isEmpty
                ? "" : "{" + labels.map { "\($0.name)=\"\(escaped($0.value))\"" }.joined(separator: ",") + "}"
            return name + set + " " + value + (timestamp.map { " " + $0 } ?? "")
        }
    }

    package var samples: [Sample] = []
    /// HELP text by metric name, as written (escapes kept).
    package var help: [String: String] = [:]
    /// TYPE by metric name.
    package var type: [String: String] = [:]
    /// Lines that did not parse, by number (from 1), with their text.
    package var dropped: [(line: Int, text: String)] = []

    package init() {}

    package static let types: Set<String> = ["counter", "gauge", "histogram", "summary", "untyped"]

    // MARK: Reading

    /// Reads `bytes`, a whole file.
    package static func parse(_ bytes: [UInt8]) -> MetricsExposition {
        var e = MetricsExposition()
        var seen: Set<String> = []
        for (i, raw) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            guard let text = String(validating: raw, as: UTF8.self) else {
                e.dropped.append((i + 1, String(decoding: raw, as: UTF8.self)))
                continue
            }
            var scanner = Scanner(Array(raw))
            scanner.skipBlanks()
            if scanner.atEnd { continue }
            var ok = false
            if scanner.peek == UInt8(ascii: "#") {
                switch e.comment(&scanner) {
                case .some(true): ok = true
                case .some(false): ok = false
                case .none: continue  // an ordinary comment: not kept, not a fault
                }
            } else if let s = Self.sample(&scanner), seen.insert(s.series).inserted {
                e.samples.append(s)
                ok = true
            }
            if !ok { e.dropped.append((i + 1, text)) }
        }
        return e
    }

    /// A `#` line: true when it is a HELP or TYPE line taken, false when it is one that does
    /// not parse or repeats one, nil for any other comment.
    private mutating func comment(_ s: inout Scanner) -> Bool? {
        s.advance()
        s.skipBlanks()
        let keyword = s.word()
        guard keyword == "HELP" || keyword == "TYPE" else { return nil }
        guard s.skipBlanks() > 0, let name = s.name(metric: true) else { return false }
        if keyword == "HELP" {
            guard help[name] == nil else { return false }
            if s.atEnd {
                help[name] = ""
                return true
            }
            guard s.skipBlanks() > 0 else { return false }
            let text = s.rest()
            // Only `\\` and `\n` are escapes in HELP text.
            var escape = false
            for c in text.utf8 {
                if escape {
                    guard c == UInt8(ascii: "\\") || c == UInt8(ascii: "n") else { return false }
                    escape = false
                } else if c == UInt8(ascii: "\\") {
                    escape = true
                }
            }
            guard !escape else { return false }
            help[name] = text
            return true
        }
        guard type[name] == nil, s.skipBlanks() > 0 else { return false }
        let t = s.word()
        s.skipBlanks()
        guard Self.types.contains(t), s.atEnd else { return false }
        type[name] = t
        return true
    }

    /// A sample line, or nil when it does not parse.
    private static func sample(_ s: inout Scanner) -> Sample? {
        guard let name = s.name(metric: true) else { return nil }
        var labels: [Label] = []
        if s.peek == UInt8(ascii: "{") {
            s.advance()
            while true {
                s.skipBlanks()
                if s.peek == UInt8(ascii: "}") {
                    s.advance()
                    break
                }
                guard let label = s.name(metric: false), !labels.contains(where: { $0.name == label }) else {
                    return nil
                }
                s.skipBlanks()
                guard s.take(UInt8(ascii: "=")) else { return nil }
                s.skipBlanks()
                guard let value = s.quoted() else { return nil }
                labels.append(Label(name: label, value: value))
                s.skipBlanks()
                if s.take(UInt8(ascii: ",")) { continue }
                guard s.take(UInt8(ascii: "}")) else { return nil }
                break
            }
            s.skipBlanks()
        } else if s.skipBlanks() == 0 {
            return nil
        }
        guard let value = Self.value(s.word()) else { return nil }
        var timestamp: String?
        if s.skipBlanks() > 0, !s.atEnd {
            let t = s.word()
            guard Int64(t) != nil else { return nil }
            timestamp = t
            s.skipBlanks()
        }
        guard s.atEnd else { return nil }
        return Sample(name: name, labels: labels, value: value, timestamp: timestamp)
    }

    /// A sample value as the text format allows it, written the one way: a decimal number as
    /// written, `NaN`, `+Inf` or `-Inf`.
    package static func value(_ token: String) -> String? {
        switch token.lowercased() {
        case "nan": return "NaN"
        case "+inf", "inf": return "+Inf"
        case "-inf": return "-Inf"
        default: break
        }
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        var bytes = Array(token.utf8)[...]
        if let f = bytes.first, f == UInt8(ascii: "+") || f == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        let whole = bytes.prefix { digits.contains($0) }
        bytes = bytes.dropFirst(whole.count)
        var fraction = 0
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            fraction = bytes.prefix { digits.contains($0) }.count
            bytes = bytes.dropFirst(fraction)
        }
        guard whole.count + fraction > 0 else { return nil }
        if let e = bytes.first, e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if let f = bytes.first, f == UInt8(ascii: "+") || f == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
            let exponent = bytes.prefix { digits.contains($0) }.count
            guard exponent > 0 else { return nil }
            bytes = bytes.dropFirst(exponent)
        }
        return bytes.isEmpty ? token : nil
    }

    // MARK: Sharing

    /// The value of the sample `name` labelled with `pipeline` alone, when it is a number.
    package func value(of name: String, pipeline: String) -> Double? {
        samples.first { $0.name == name && $0.labels == [Label(name: "pipeline", value: pipeline)] }
            .flatMap { Double($0.value) }
    }

    /// This file with every sample labelled `pipeline="<pipeline>"` replaced by `run`'s
    /// samples; `run`'s HELP and TYPE lines win over the file's for the same names.
    package func replacing(pipeline: String, with run: MetricsExposition) -> MetricsExposition {
        var out = self
        out.samples = samples.filter { $0.pipeline != pipeline } + run.samples
        out.help.merge(run.help) { _, new in new }
        out.type.merge(run.type) { _, new in new }
        return out
    }

    /// The family a sample of metric `name` belongs to: a histogram's or summary's `_bucket`,
    /// `_sum` and `_count` samples belong to the histogram or summary.
    package func family(_ name: String) -> String {
        if type[name] != nil { return name }
        for (suffix, kinds) in [
            ("_bucket", ["histogram"]), ("_sum", ["histogram", "summary"]), ("_count", ["histogram", "summary"]),
        ]
        where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if let t = type[base], kinds.contains(t) { return base }
        }
        return name
    }

    /// The file's text: families in name order, each with its HELP and TYPE lines once, then its
    /// samples, grouped by pipeline in label order (samples without one first) and otherwise in
    /// the order read or made. A family without samples is left out.
    package var text: String {
        var families: [String: [Sample]] = [:]
        for s in samples { families[family(s.name), default: []].append(s) }
        var out = ""
        for name in families.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            if let h = help[name] { out += "# HELP \(name)" + (h.isEmpty ? "" : " " + h) + "\n" }
            if let t = type[name] { out += "# TYPE \(name) \(t)\n" }
            let list = families[name]!.enumerated().sorted { a, b in
                let (x, y) = (a.element.pipeline, b.element.pipeline)
                if x == y { return a.offset < b.offset }
                guard let x else { return true }
                guard let y else { return false }
                return x.utf8.lexicographicallyPrecedes(y.utf8)
            }
            for s in list { out += s.element.line + "\n" }
        }
        return out
    }

    /// A label value in the text format: backslash, quote and line feed escaped
    /// (``LabelEscape``).
    package static func escaped(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            if let letter = LabelEscape.letter(for: b) {
                out += [UInt8(ascii: "\\"), letter]
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The escapes of a label value, which the writer makes and the reader undoes: a backslash
/// followed by a letter that stands for a byte. Each byte is ASCII, so escaping UTF-8 byte by
/// byte leaves every other character whole.
private enum LabelEscape {
    /// The bytes escaped, each with its letter.
    package static let pairs: [(byte: UInt8, letter: UInt8)] = [
        (UInt8(ascii: "\\"), UInt8(ascii: "\\")), (UInt8(ascii: "\""), UInt8(ascii: "\"")), (0x0A, UInt8(ascii: "n")),
    ]

    /// The letter that stands for `byte` after a backslash; nil when it is written as it is.
    package static func letter(for byte: UInt8) -> UInt8? { pairs.first { $0.byte == byte }?.letter }

    /// The byte the escape letter stands for; nil when it is not an escape.
    package static func byte(for letter: UInt8) -> UInt8? { pairs.first { $0.letter == letter }?.byte }
}

/// Reads one line of the text format, byte by byte.
private struct Scanner {
    package let bytes: [UInt8]
    package var i = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var atEnd: Bool { i >= bytes.count }
    package var peek: UInt8? { atEnd ? nil : bytes[i] }
    package mutating func advance() { i += 1 }

    /// Takes `c` when it is next.
    package mutating func take(_ c: UInt8) -> Bool {
        guard peek == c else { return false }
        i += 1
        return true
    }

    /// Skips spaces and tabs; how many.
    @discardableResult
    package mutating func skipBlanks() -> Int {
        let start = i
        while let c = peek, c == 0x20 || c == 0x09 { i += 1 }
        return i - start
    }

    /// Everything up to the next blank.
    package mutating func word() -> String {
        let start = i
        while let c = peek, c != 0x20 && c != 0x09 { i += 1 }
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    /// The rest of the line.
    package mutating func rest() -> String {
        defer { i = bytes.count }
        return String(decoding: bytes[i...], as: UTF8.self)
    }

    /// A metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`) or label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
    package mutating func name(metric: Bool) -> String? {
        let start = i
        while let c = peek {
            let letter = (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z")
            let digit = c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")
            guard letter || c == UInt8(ascii: "_") || (metric && c == UInt8(ascii: ":")) || (digit && i > start)
            else { break }
            i += 1
        }
        return i > start ? String(decoding: bytes[start..<i], as: UTF8.self) : nil
    }

    /// A quoted label value, unescaped (`\\`, `\"` and `\n` are its only escapes).
    package mutating func quoted() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        var out: [UInt8] = []
        while let c = peek {
            i += 1
            switch c {
            case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let e = peek else { return nil }
                i += 1
                guard let b = LabelEscape.byte(for: e) else { return nil }
                out.append(b)
            default: out.append(c)
            }
        }
        return nil
    }
}
