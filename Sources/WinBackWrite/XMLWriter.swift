import CLibXML2
import Foundation
import WinBackSupport

/// A streaming XML file writer over libxml2's xmlTextWriter: one element per line, indented
/// by two spaces. All libxml2 writer calls of the project go through this type. The many
/// elements of a segment are formatted by the caller (``appendAttribute(_:escaped:to:_:)``, a
/// value escaped by libxml2 when it needs escaping) and handed over in large writes (``raw(_:)``).
///
/// libxml2 hands its output to an ``OutputFile`` through an I/O callback, so XML files are
/// buffered, hashed as written and synced like every other output.
package final class XMLWriter {
    /// Receives libxml2's output; kept alive as long as the writer.
    private final class Sink {
        let file: OutputFile
        var error: Error?
        init(_ file: OutputFile) { self.file = file }
    }

    private let writer: xmlTextWriterPtr
    private let sink: Sink
    let path: String

    /// libxml2's one-time set-up (docs/rules.md §6), done by the first writer made on any
    /// thread: Swift runs a static's initialiser exactly once (`swift_once`), any other thread
    /// waiting until it has run, so no caller has to before its threads start.
    private static let libxml2: Void = xmlInitParser()

    init(path: String, sync: DiskSync? = nil) throws {
        _ = XMLWriter.libxml2
        self.path = path
        sink = Sink(try OutputFile(path: path, sync: sync))
        let write: xmlOutputWriteCallback = { context, bytes, count in
            let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
            guard sink.error == nil else { return -1 }
            do {
                try sink.file.write(UnsafeRawBufferPointer(start: bytes, count: Int(count)))
                return count
            } catch {
                sink.error = error
                return -1
            }
        }
        guard
            let output = xmlOutputBufferCreateIO(write, nil, Unmanaged.passUnretained(sink).toOpaque(), nil),
            let w = xmlNewTextWriter(output)  // owns `output` from here on
        else {
            throw WinBackError(.cannotCreateOutput, "cannot create XML writer", path: path)
        }
        writer = w
        xmlTextWriterSetIndent(writer, 1)
        xmlTextWriterSetIndentString(writer, "  ")
        try check(xmlTextWriterStartDocument(writer, nil, "UTF-8", nil))
    }

    deinit { xmlFreeTextWriter(writer) }

    private func check(_ rc: Int32) throws {
        if let error = sink.error { throw error }
        if rc < 0 { throw WinBackError(.cannotCreateOutput, "cannot write XML", path: path) }
    }

    // Names are static strings: their NUL-terminated bytes go to libxml2 as they are, with no
    // C string made on every call.
    func start(_ name: StaticString) throws { try check(xmlTextWriterStartElement(writer, name.utf8Start)) }

    /// Writes an attribute; an empty value is omitted (docs/rules.md §4.2).
    func attribute(_ name: StaticString, _ value: String) throws {
        if value.isEmpty { return }
        try check(xmlTextWriterWriteAttribute(writer, name.utf8Start, value))
    }

    func end() throws { try check(xmlTextWriterEndElement(writer)) }

    /// Writes elements formatted by the caller (``appendAttribute(_:escaped:to:_:)``) as they are, inside
    /// the element open last: libxml2 closes its start tag first. One call for many elements:
    /// libxml2 is given the first byte (so that it closes the tag and knows content was
    /// written), then flushed; the rest goes to the file as it is, never copied into
    /// libxml2's buffer.
    func raw(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        try bytes.withUnsafeBufferPointer { b in
            try check(xmlTextWriterWriteRawLen(writer, b.baseAddress!, 1))
            guard b.count > 1 else { return }
            try check(xmlTextWriterFlush(writer))
            do { try sink.file.write(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: b[1...]))) } catch {
                sink.error = error
                throw error
            }
        }
    }

    /// Appends ` name="value"` to an element being formatted, `body` appending the value's
    /// bytes; an empty value is omitted (docs/rules.md §4.2). A value of printable ASCII but
    /// `<`, `>`, `&` and `"` stands as it is; any other is escaped by libxml2 itself, as its
    /// writer escapes an attribute (``escapedAttribute(_:)``), so the bytes are those
    /// ``attribute(_:_:)`` writes. With `escaped`, the value is escaped already
    /// (``escapedAttribute(_:)``).
    ///
    /// Inlined, so that `body` is too: called through a closure, the values it captures (the
    /// string table, the customers' arrays) would be retained and released around every
    /// attribute, by every thread writing at once.
    @inline(__always)
    static func appendAttribute(
        _ name: StaticString, escaped: Bool = false, to out: inout [UInt8], _ body: (inout [UInt8]) -> Void
    ) {
        let start = out.count
        out.append(UInt8(ascii: " "))
        name.withUTF8Buffer { out.append(contentsOf: $0) }
        out.append(UInt8(ascii: "="))
        out.append(UInt8(ascii: "\""))
        let valueStart = out.count
        body(&out)
        endAttribute(start: start, valueStart: valueStart, escaped: escaped, to: &out)
    }

    /// Ends an attribute whose value ``appendAttribute(_:escaped:to:_:)`` appended from
    /// `valueStart` on: removed from `start` on when empty, escaped when it must be.
    private static func endAttribute(start: Int, valueStart: Int, escaped: Bool, to out: inout [UInt8]) {
        if out.count == valueStart {
            out.removeSubrange(start...)
            return
        }
        if !escaped && out[valueStart...].contains(where: { !isPlain($0) }) {
            let value = Array(out[valueStart...])
            out.removeSubrange(valueStart...)
            out.append(contentsOf: escapedAttribute(value))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// A byte an attribute value may hold as it is: printable ASCII but `<`, `>`, `&` and `"`.
    @inline(__always)
    private static func isPlain(_ b: UInt8) -> Bool {
        b >= 0x20 && b < 0x7F && b != UInt8(ascii: "<") && b != UInt8(ascii: ">") && b != UInt8(ascii: "&")
            && b != UInt8(ascii: "\"")
    }

    /// `value` as libxml2's writer escapes an attribute's value in a UTF-8 document: written as
    /// the one attribute of an element by a writer of its own into memory, and taken back from
    /// between its quotes.
    static func escapedAttribute(_ value: [UInt8]) -> [UInt8] {
        _ = XMLWriter.libxml2
        // libxml2 fails here only when it cannot allocate.
        guard let buffer = xmlBufferCreate() else { preconditionFailure("libxml2 cannot make a buffer") }
        defer { xmlBufferFree(buffer) }
        guard let w = xmlNewTextWriterMemory(buffer, 0) else { preconditionFailure("libxml2 cannot make a writer") }
        var terminated = value
        terminated.append(0)
        // A document in UTF-8, as every file's: libxml2 keeps its characters as they are.
        guard xmlTextWriterStartDocument(w, nil, "UTF-8", nil) >= 0, xmlTextWriterFlush(w) >= 0 else {
            preconditionFailure("libxml2 cannot start a document")
        }
        let head = Int(xmlBufferLength(buffer))
        let written = terminated.withUnsafeBufferPointer { v in
            xmlTextWriterStartElement(w, "e") >= 0 && xmlTextWriterWriteAttribute(w, "a", v.baseAddress!) >= 0
                && xmlTextWriterFlush(w) >= 0
        }
        xmlFreeTextWriter(w)
        guard written, let content = xmlBufferContent(buffer) else { preconditionFailure("libxml2 cannot escape") }
        let all = Array(UnsafeBufferPointer(start: content, count: Int(xmlBufferLength(buffer))).dropFirst(head))
        // `<e a="` … `"`
        let prefix = 6
        precondition(
            all.count > prefix && all.last == UInt8(ascii: "\"") && all.starts(with: Array("<e a=\"".utf8)),
            "libxml2 wrote an attribute unlike itself")
        return Array(all[prefix..<(all.count - 1)])
    }

    /// Ends the document, then flushes, syncs and closes the file; returns (bytes, hex SHA-256).
    func finish() throws -> (Int, String) {
        try check(xmlTextWriterEndDocument(writer))
        try check(xmlTextWriterFlush(writer))
        return try sink.file.finish()
    }
}

/// Validates XML files against an XSD with libxml2 (tests and `validate` use it).
public enum XMLSchemaValidator {
    /// Collects libxml2's messages instead of letting it print them.
    final class Messages {
        var lines: [String] = []
    }

    /// Problems found validating `xmlPath` against `xsdPath`; empty when valid.
    public static func validate(xmlPath: String, xsdPath: String) -> [String] {
        xmlInitParser()
        let messages = Messages()
        let context = Unmanaged.passRetained(messages)
        defer { context.release() }
        let collect: xmlStructuredErrorFunc = { ctx, error in
            guard let ctx, let error else { return }
            let box = Unmanaged<Messages>.fromOpaque(ctx).takeUnretainedValue()
            let text = error.pointee.message.map { String(cString: $0) } ?? "error"
            box.lines.append("line \(error.pointee.line): \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        guard let pctx = xmlSchemaNewParserCtxt(xsdPath) else { return ["cannot read schema \(xsdPath)"] }
        defer { xmlSchemaFreeParserCtxt(pctx) }
        xmlSchemaSetParserStructuredErrors(pctx, collect, context.toOpaque())
        guard let schema = xmlSchemaParse(pctx) else {
            return ["invalid schema \(xsdPath)"] + messages.lines
        }
        defer { xmlSchemaFree(schema) }
        guard let vctx = xmlSchemaNewValidCtxt(schema) else { return ["cannot create a validation context"] }
        defer { xmlSchemaFreeValidCtxt(vctx) }
        xmlSchemaSetValidStructuredErrors(vctx, collect, context.toOpaque())
        let rc = xmlSchemaValidateFile(vctx, xmlPath, 0)
        if rc == 0 { return [] }
        return messages.lines.isEmpty
            ? ["\(xmlPath): not valid against \(xsdPath) (code \(rc))"] : messages.lines.map { "\(xmlPath): \($0)" }
    }
}
