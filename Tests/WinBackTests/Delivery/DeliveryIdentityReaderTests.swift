import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackSupport

#if canImport(CZlib)
    import CZlib
#endif

/// The identities file (docs/rules.md §10.1): a CSV with a header, gzip allowed, keyed by
/// original_transaction_id or app_account_token.
@Suite("Delivery: identities file")
struct DeliveryIdentityReaderTests {
    static let header = "original_transaction_id,app_account_token,external_id,email\n"

    /// Writes `text` into a fresh folder as `name`; returns its path.
    static func file(_ text: String, name: String = "identities.csv") throws -> String {
        let path = Paths.temporary() + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Compresses `path` with zlib's own gzip writer (not the package's) into `path.gz`.
    static func gzipped(_ path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let gz = try #require(gzopen(path + ".gz", "wb9"))
        let written = data.withUnsafeBytes { gzwrite(gz, $0.baseAddress, UInt32($0.count)) }
        #expect(gzclose(gz) == Z_OK)
        #expect(Int(written) == data.count)
        return path + ".gz"
    }

    static func exitCode(_ body: () throws -> Void) -> (Int32, String)? {
        do {
            try body()
            return nil
        } catch let e as WinBackError {
            return (e.code.exitCode, "\(e)")
        } catch {
            return (-1, "\(error)")
        }
    }

    @Test("a plain file and its gzip copy give the same table: header, keys, every column")
    func plainAndGzip() throws {
        let text =
            Self.header
            + "1000000001,,u-1,one@example.com\n"
            + "1000000002,5C2B8B34-1D7E-4C43-9D36-0F2A5E0B7C11,u-2,\n"
            + "1000000003,,\"u,3\",\"three \"\"quoted\"\"@example.com\"\n"
            + "1000000004,,u-4,four@example.com"  // the last row without a line end
        let plain = try Self.file(text)
        let gz = try Self.gzipped(plain)
        // The .gz really is compressed: its first bytes are gzip's magic.
        let head = try #require(FileManager.default.contents(atPath: gz)).prefix(2)
        #expect(Array(head) == [0x1f, 0x8b])
        for path in [plain, gz] {
            let t = try IdentityReader.read(path: path, key: .originalTransactionId)
            #expect(t.columns == ["original_transaction_id", "app_account_token", "external_id", "email"], "\(path)")
            #expect(t.keyColumn == 0)
            #expect(t.lines == 4)
            #expect(t.duplicates == 0)
            #expect(t.rejects.total == 0)
            #expect(t.count == 4)
            #expect(t.index(of: "external_id") == 2)
            #expect(t.index(of: "email") == 3)
            #expect(t.index(of: "phone") == nil)
            #expect(t.fields(for: "1000000001", token: false) == ["1000000001", "", "u-1", "one@example.com"])
            #expect(t.fields(for: "1000000003", token: false)?[2] == "u,3")
            #expect(t.fields(for: "1000000003", token: false)?[3] == "three \"quoted\"@example.com")
            #expect(t.fields(for: "1000000004", token: false)?[3] == "four@example.com")
            #expect(t.fields(for: "9999999999", token: false) == nil)
        }
    }

    @Test("a header behind a UTF-8 byte-order mark and rows ending in CRLF are read as plain CSV")
    func byteOrderMarkAndCRLF() throws {
        let text = "\u{FEFF}original_transaction_id,external_id\r\n1,a\r\n2,b\r\n"
        let t = try IdentityReader.read(path: try Self.file(text), key: .originalTransactionId)
        #expect(t.columns == ["original_transaction_id", "external_id"])
        #expect(t.fields(for: "2", token: false) == ["2", "b"])
        #expect(t.rejects.total == 0)
    }

    @Test("a key that appears twice: the last row wins and the duplicate is counted")
    func lastRowWins() throws {
        let text =
            Self.header
            + "1,,first,first@example.com\n"
            + "2,,two,two@example.com\n"
            + "1,,second,second@example.com\n"
            + "3,,three,\n"
            + "1,,third,\n"
            + "3,,three-again,three@example.com\n"
        let t = try IdentityReader.read(path: try Self.file(text), key: .originalTransactionId)
        #expect(t.lines == 6)
        #expect(t.duplicates == 3)
        #expect(t.count == 3)
        #expect(t.rejects.total == 0)
        // The last row wins whole: its empty email replaces the earlier one.
        #expect(t.fields(for: "1", token: false) == ["1", "", "third", ""])
        #expect(t.fields(for: "3", token: false) == ["3", "", "three-again", "three@example.com"])
    }

    @Test("a header without the key column fails with 65, naming the column")
    func headerWithoutKey() throws {
        let path = try Self.file("customer,external_id,email\n1,a,a@example.com\n")
        let failure = Self.exitCode { _ = try IdentityReader.read(path: path, key: .originalTransactionId) }
        #expect(failure?.0 == 65)
        #expect(failure?.1.contains("original_transaction_id") == true, "\(failure?.1 ?? "")")
        #expect(failure?.1.contains(path) == true)
        // Keyed by token, the same file names the token column.
        let token = Self.exitCode { _ = try IdentityReader.read(path: path, key: .appAccountToken) }
        #expect(token?.0 == 65)
        #expect(token?.1.contains("app_account_token") == true, "\(token?.1 ?? "")")
    }

    @Test("an empty file (no header at all) fails with 65")
    func emptyFile() throws {
        let path = try Self.file("")
        #expect(Self.exitCode { _ = try IdentityReader.read(path: path, key: .originalTransactionId) }?.0 == 65)
    }

    @Test("rows with too few or too many fields, a malformed quote and an empty key are rejected; the rest kept")
    func badRowsRejected() throws {
        let text =
            Self.header  // line 1
            + "1,,u-1,one@example.com\n"  // 2: kept
            + "2,,u-2\n"  // 3: too few fields
            + "3,,u-3,three@example.com,extra\n"  // 4: too many
            + "4,,\"u-4\"x,four@example.com\n"  // 5: text after a closing quote
            + ",,u-5,five@example.com\n"  // 6: empty key
            + "6,,u-6,six@example.com\n"  // 7: kept
            + "8,,\"u,8\",eight@example.com\n"  // 8: kept, a quoted comma
            + "9,,u-9,nine@example.com\n"  // 9: kept
        let path = try Self.file(text)
        let t = try IdentityReader.read(path: path, key: .originalTransactionId)
        #expect(t.count == 4)
        for k in ["1", "6", "8", "9"] { #expect(t.fields(for: k, token: false) != nil, "\(k)") }
        for k in ["2", "3", "4", "5"] { #expect(t.fields(for: k, token: false) == nil, "\(k)") }
        #expect(t.fields(for: "8", token: false)?[2] == "u,8")
        #expect(t.lines == 8)
        #expect(t.rejects.total == 4)
        let listed = t.rejects.listed
        #expect(listed.map(\.line) == [3, 4, 5, 6])
        #expect(listed.allSatisfy { $0.file == path })
        let reasons = listed.map(\.reason)
        guard reasons.count == 4 else { return }
        #expect(reasons[0].contains("expected 4 fields, found 3"), "\(reasons[0])")
        #expect(reasons[1].contains("expected 4 fields, found 5"), "\(reasons[1])")
        #expect(reasons[2].contains("quote"), "\(reasons[2])")
        #expect(reasons[3].contains("empty original_transaction_id"), "\(reasons[3])")
        #expect(listed[0].excerpt == "2,,u-2")
    }

    @Test("a stray quote inside an unquoted field costs that row only, not the rows after it")
    func strayQuote() throws {
        // An email such as o"brien@example.com written without quoting, then 500 good rows
        // with no quote in them.
        var text = Self.header + "1,,u-1,one@example.com\n" + "2,,u-2,o\"brien@example.com\n"
        for k in 3...502 { text += "\(k),,u-\(k),c\(k)@example.com\n" }
        let path = try Self.file(text)
        let t = try IdentityReader.read(path: path, key: .originalTransactionId)
        #expect(t.lines == 502, "every line is a row of its own")
        #expect(t.rejects.total <= 1)
        let missing = (3...502).filter { t.fields(for: "\($0)", token: false) == nil }
        #expect(missing.count == 0, "\(missing.count) good rows after the stray quote are lost")
        #expect(t.fields(for: "1", token: false) != nil)
        // Whether the row itself is taken literally or rejected, a reject names line 3.
        if t.rejects.total == 1 { #expect(t.rejects.listed.first?.line == 3) }
    }

    @Test("an empty key is rejected whichever column is the key")
    func emptyTokenKey() throws {
        let text =
            Self.header
            + "1,,u-1,one@example.com\n"
            + "2,0a6f1c2e-7b1d-4f7e-9a55-5d7d0c3e8b21,u-2,two@example.com\n"
        let t = try IdentityReader.read(path: try Self.file(text), key: .appAccountToken)
        #expect(t.keyColumn == 1)
        #expect(t.count == 1)
        #expect(t.rejects.total == 1)
        #expect(t.rejects.listed.first?.line == 2)
        #expect(t.rejects.listed.first?.reason.contains("empty app_account_token") == true)
    }

    @Test("app_account_token keys match in any case; keys that differ only in case are one customer")
    func tokensIgnoreCase() throws {
        let upper = "5C2B8B34-1D7E-4C43-9D36-0F2A5E0B7C11"
        let other = "0a6f1c2e-7b1d-4f7e-9a55-5d7d0c3e8b21"
        let text =
            Self.header
            + "1,\(upper),u-1,one@example.com\n"
            + "2,\(other),u-2,two@example.com\n"
            + "3,\(other.uppercased()),u-3,three@example.com\n"
        let t = try IdentityReader.read(path: try Self.file(text), key: .appAccountToken)
        #expect(t.count == 2)
        #expect(t.duplicates == 1)
        for form in [upper, upper.lowercased(), "5c2b8b34-1D7E-4c43-9d36-0F2A5E0B7C11"] {
            #expect(t.fields(for: form, token: true)?[2] == "u-1", "\(form)")
        }
        #expect(t.fields(for: other.uppercased(), token: true)?[2] == "u-3")
        #expect(t.fields(for: other, token: true)?[2] == "u-3")
        // Keyed by originalTransactionId, the case of a key still matters (they are digits).
        let byOriginal = try IdentityReader.read(path: try Self.file(text), key: .originalTransactionId)
        #expect(byOriginal.count == 3)
        #expect(byOriginal.duplicates == 0)
    }

    @Test("a missing identities file fails with 66, naming it")
    func missingFile() throws {
        let path = Paths.temporary() + "/absent/identities.csv.gz"
        let failure = Self.exitCode { _ = try IdentityReader.read(path: path, key: .originalTransactionId) }
        #expect(failure?.0 == 66)
        #expect(failure?.1.contains(path) == true, "\(failure?.1 ?? "")")
    }

    @Test(
        "values with a control byte, a formula start or over 512 bytes are bad rows; phone numbers and the rest stay as written"
    )
    func valuesRefusedNotRewritten() throws {
        let long = String(repeating: "x", count: 513)
        let longest = String(repeating: "y", count: 512)
        let rows: [(String, Bool)] = [
            ("1,,u-1,+14155550100", true),  // a phone number: a value, unchanged
            ("2,,u-2,-1 (415) 555-0100", true),
            ("3,,u-3,=HYPERLINK(\"http://x\")", false),
            ("4,,u-4,@SUM(A1)", false),
            ("5,,u-5,+cmd|' /C calc'!A0", false),
            ("6,,-u-6,six@example.com", false),  // '-' then a letter
            ("7,,u-7,\"a\u{01}b\"", false),  // SOH
            ("8,,u-8,\"a\u{1B}[31mred\"", false),  // ESC
            ("9,,u-9,\"a\u{08}\"", false),  // BS
            ("10,,u-10,\"a\u{7F}\"", false),  // DEL
            ("11,,u-11,\"two\nlines\"", false),  // LF inside quotes
            ("12,,u-12,\"tab\there\"", false),
            ("13,,\(long),x@example.com", false),
            ("14,,\(longest),y@example.com", true),  // exactly 512 bytes
            ("15,,u-15,ünïcødé@example.com", true),
            ("16,,u-16,a=b@example.com", true),  // '=' not first
            ("17,,u-17,+", true),
            ("18,,u-18,", true),
        ]
        var bytes = Array((Self.header + rows.map { $0.0 + "\n" }.joined()).utf8)
        // A Latin-1 e-acute (0xE9) is not UTF-8: refused, never turned into U+FFFD.
        bytes += Array("\(rows.count + 1),,u-x,jos".utf8) + [0xE9] + Array("@example.com\n".utf8)
        let path = Paths.temporary() + "/identities.csv"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let t = try IdentityReader.read(path: path, key: .originalTransactionId)
        #expect(t.lines == rows.count + 1)
        #expect(t.rejects.total == rows.filter { !$0.1 }.count + 1)
        #expect(t.fields(for: String(rows.count + 1), token: false) == nil)
        for (i, (row, kept)) in rows.enumerated() {
            let key = String(i + 1)
            #expect((t.fields(for: key, token: false) != nil) == kept, "\(row)")
        }
        #expect(t.fields(for: "1", token: false)?[3] == "+14155550100")
        #expect(t.fields(for: "2", token: false)?[3] == "-1 (415) 555-0100")
        #expect(t.fields(for: "14", token: false)?[2] == longest)
        #expect(t.fields(for: "15", token: false)?[3] == "ünïcødé@example.com")
        // Each reject is one line of rejects.csv: its excerpt and reason hold no raw control.
        for r in t.rejects.listed {
            #expect(!r.excerpt.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(r)")
            #expect(!r.reason.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(r)")
        }
        let reasons = t.rejects.listed.map(\.reason)
        #expect(reasons.contains { $0.contains("formula") })
        #expect(reasons.contains { $0.contains("control byte \\x1B") })
        #expect(reasons.contains { $0.contains("longer than 512 bytes") })
        #expect(reasons.contains { $0.contains("is not UTF-8") })
    }

    @Test("only the columns asked for are kept, in the order asked; a column the file lacks is named as missing")
    func columnsAsked() throws {
        let text = Self.header + "1,,u-1,one@example.com\n2,,u-2,two@example.com\n"
        let t = try IdentityReader.read(
            path: try Self.file(text), key: .originalTransactionId, columns: ["email", "phone", "external_id"])
        #expect(t.columns == ["email", "external_id"])
        #expect(t.missing == ["phone"])
        #expect(t.fields(for: "2", token: false) == ["two@example.com", "u-2"])
        #expect(t.index(of: "external_id") == 1)
    }

    @Test("a header of 1,024 columns is read keeping only the columns asked; one more column is 65")
    func wideRows() throws {
        for width in [1024, 1025] {
            var text = "original_transaction_id" + String(repeating: ",c", count: width - 2) + ",email\n"
            for k in 1...5 { text += "\(k)" + String(repeating: ",", count: width - 2) + ",e\(k)@example.com\n" }
            // A row of far more fields than the header is rejected without being split whole.
            text += "6" + String(repeating: ",", count: 100_000) + "\n"
            let path = try Self.file(text)
            if width == 1025 {
                let failure = Self.exitCode { _ = try IdentityReader.read(path: path, key: .originalTransactionId) }
                #expect(failure?.0 == 65)
                #expect(failure?.1.contains("more than 1024 columns") == true, "\(failure?.1 ?? "")")
                continue
            }
            let t = try IdentityReader.read(path: path, key: .originalTransactionId, columns: ["email"])
            #expect(t.count == 5)
            #expect(t.fields(for: "3", token: false) == ["e3@example.com"])
            #expect(t.rejects.total == 1)
            #expect(t.rejects.listed.first?.reason == "more than 1040 fields", "\(t.rejects.listed)")
        }
    }
}
