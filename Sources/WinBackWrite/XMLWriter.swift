import CLibXML2
import Foundation
import WinBackSupport

/// A streaming XML file writer over libxml2's xmlTextWriter: one element per line, indented
/// by two spaces. All libxml2 writer calls of the project go through this type.
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
    /// Scratch for attribute values built from bytes, reused for every attribute.
    @exclusivity(unchecked) private var value: [UInt8] = []

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

    /// Writes an attribute whose value `body` appends as UTF-8 bytes, with no String made on
    /// the way; an empty value is omitted (docs/rules.md §4.2).
    func attribute(_ name: StaticString, _ body: (inout [UInt8]) -> Void) throws {
        value.removeAll(keepingCapacity: true)
        body(&value)
        if value.isEmpty { return }
        value.append(0)
        // Mutable access reaches the stored array in place; a read would take a reference.
        let writer = self.writer
        let rc = value.withUnsafeMutableBufferPointer {
            xmlTextWriterWriteAttribute(writer, name.utf8Start, $0.baseAddress!)
        }
        try check(rc)
    }

    func end() throws { try check(xmlTextWriterEndElement(writer)) }

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
