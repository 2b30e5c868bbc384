import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("CSV output (docs/rules.md §4.1, §6)")
struct CSVOutputTests {
    func record(_ fields: [String]) -> String {
        var r = CSVRecord()
        for f in fields { r.field(f) }
        r.end()
        return String(decoding: r.bytes, as: UTF8.self)
    }

    @Test(
        "fields are quoted only when they hold a comma, a quote, CR or LF",
        arguments: [
            ("plain", "plain"), ("a,b", "\"a,b\""), ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("two\nlines", "\"two\nlines\""),
            ("cr\rhere", "\"cr\rhere\""), ("", ""), ("é ü 🙂", "é ü 🙂"),
        ])
    func quoting(field: String, expected: String) {
        #expect(record([field]) == expected + "\n")
        #expect(everyPath(field) == expected + "\n")
    }

    @Test(
        "a cell that could start a spreadsheet formula is prefixed with an apostrophe",
        arguments: [
            ("=SUM(A1)", "'=SUM(A1)"), ("+1", "'+1"), ("-1", "'-1"), ("@cmd", "'@cmd"), ("\tx", "'\tx"),
            ("\rx", "\"'\rx\""), ("=1,2", "\"'=1,2\""), ("a=b", "a=b"),
            ("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"),
        ])
    func formulaGuard(field: String, expected: String) {
        #expect(record([field]) == expected + "\n")
        #expect(everyPath(field) == expected + "\n")
    }

    /// A field as a String (escaped from its bytes in place), a Substring (the generic path),
    /// bytes in memory and an array of bytes: the same cell, one after another.
    func everyPath(_ field: String) -> String {
        var r = CSVRecord()
        r.field(field[...])
        let bytes = Array(field.utf8)
        r.field(bytes: bytes.span)
        r.field(bytes: Array(field.utf8))
        r.end()
        let cells = String(decoding: r.bytes, as: UTF8.self)
        let one = record([field]).dropLast()
        return cells == "\(one),\(one),\(one)\n" ? String(one) + "\n" : cells
    }

    @Test("records join fields with commas; integers and timestamps are unpadded and ISO 8601")
    func record() {
        var r = CSVRecord()
        r.field("a")
        r.field(Int64(7))
        r.field(timestamp: ms("2026-08-14T10:22:31.568Z"))
        r.field(timestamp: nil)
        r.empty()
        r.end()
        #expect(String(decoding: r.bytes, as: UTF8.self) == "a,7,2026-08-14T10:22:31.568Z,,\n")
    }

    @Test("reject excerpts are cut to 200 Unicode scalars, invalid UTF-8 replaced")
    func rejectExcerpt() {
        let long = Array(String(repeating: "é", count: 300).utf8) + [0xFF]
        let r = long.withUnsafeBytes { Reject(file: "f", line: 1, reason: "x", bytes: $0) }
        #expect(r.excerpt.unicodeScalars.count == 200)
        let bad: [UInt8] = [0x7B, 0xFF, 0x7D]
        let b = bad.withUnsafeBytes { Reject(file: "f", line: 1, reason: "x", bytes: $0) }
        #expect(b.excerpt == "{\u{FFFD}}")
    }

    @Test("rejects.csv is sorted by file, then line, with a formula-safe excerpt")
    func rejectsFile() {
        let rejects = [
            Reject(file: "/w/b.jsonl", line: 2, reason: "r2", excerpt: "x"),
            Reject(file: "/w/a.jsonl", line: 10, reason: "r1", excerpt: "=cmd()"),
            Reject(file: "/w/a.jsonl", line: 9, reason: "r0", excerpt: "y"),
        ]
        let text = String(decoding: RejectsWriter.bytes(RejectList(rejects), relativeTo: "/w"), as: UTF8.self)
        #expect(text == "file,line,reason,excerpt\na.jsonl,9,r0,y\na.jsonl,10,r1,'=cmd()\nb.jsonl,2,r2,x\n")
    }

    @Test("a segment's byte lists give each entry's bytes, empty ones and the last included")
    func byteLists() {
        let entries: [[UInt8]] = [Array("wb.a".utf8), [], Array("\"q,\"".utf8), Array("https://x/y".utf8)]
        let list = SegmentWriter.ByteList(entries)
        for (i, e) in entries.enumerated() {
            #expect(list.with(i) { Array($0) } == e)
        }
        var r = CSVRecord()
        list.with(2) { r.field(escaped: Array($0)) }
        list.with(1) { r.field(escaped: Array($0)) }
        r.end()
        #expect(String(decoding: r.bytes, as: UTF8.self) == "\"q,\",\n")
    }
}
