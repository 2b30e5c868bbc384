import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Control characters quoted from input are escaped (docs/rules.md §6)")
struct ControlEscapeTests {
    @Test("every C0 control and DEL becomes \\xHH; other text, backslashes included, is kept")
    func escapes() {
        #expect(ControlEscape.escaped("a\u{0}b\tc\r\n\u{1B}\u{7F}é\\x") == "a\\x00b\\x09c\\x0D\\x0A\\x1B\\x7Fé\\x")
        #expect(ControlEscape.escaped("plain: é, \u{80}") == "plain: é, \u{80}")
        let all = String(String.UnicodeScalarView((0..<0x20).map { Unicode.Scalar(UInt8($0)) } + ["\u{7F}"]))
        let escaped = ControlEscape.escaped(all)
        #expect(!escaped.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(escaped.count == 33 * 4)
        #expect(ControlEscape.escaped(escaped) == escaped)
    }

    @Test("a reject's excerpt and reason are one line, controls escaped, after the cut to 200 scalars")
    func rejectIsOneLine() {
        let line: [UInt8] = Array("{\"id\": \"a".utf8) + [0, 9, 13, 10, 0x7F] + Array("b\"}".utf8)
        let r = line.withUnsafeBytes { Reject(file: "f", line: 1, reason: "bad 'a\u{1}b'", bytes: $0) }
        #expect(r.excerpt == "{\"id\": \"a\\x00\\x09\\x0D\\x0A\\x7Fb\"}")
        #expect(r.reason == "bad 'a\\x01b'")
        let long = [UInt8](repeating: 0, count: 300)
        let cut = long.withUnsafeBytes { Reject(file: "f", line: 1, reason: "x", bytes: $0) }
        #expect(cut.excerpt == String(repeating: "\\x00", count: 200))
        let text = String(decoding: RejectsWriter.bytes(RejectList([r]), relativeTo: "/"), as: UTF8.self)
        #expect(text.split(separator: "\n", omittingEmptySubsequences: false).count == 3)  // header, row, ""
    }

    @Test("an error message escapes what it quotes: its path, its message and each detail stay on their lines")
    func errorMessages() {
        let e = WinBackError(.noInput, "id 'x\ty'", path: "/in/a\nb.gz", details: ["offer '\u{0}'", "second"])
        #expect(e.description == "/in/a\\x0Ab.gz: id 'x\\x09y'\n  - offer '\\x00'\n  - second")
    }

    @Test("CSV readers quote cells with their controls escaped")
    func csvReasons() throws {
        let dir = Paths.temporary()
        let rows = [
            "transactionId,originalTransactionId,subscriptionGroupIdentifier,productId,purchaseDate,expiresDate",
            "t\u{1}1,o1,g,p,2026-01-01T00:00:00Z,2026-02-01T00:00:00Z",
        ]
        try rows.joined(separator: "\n").write(toFile: dir + "/t.csv", atomically: true, encoding: .utf8)
        let set = try TransactionReader.read(inputs: [dir + "/t.csv"].map(InputStores.lookUp), format: .csv, threads: 1)
        #expect(set.rejects.count == 1)
        #expect(set.rejects.first?.reason.contains("'t\\x011' is not a valid identifier") == true, "\(set.rejects)")
        #expect(set.rejects.first?.excerpt.hasPrefix("t\\x011,o1,") == true)
    }

    @Test("a reason quoting a RevenueCat cell escapes its controls")
    func revenueCatReason() throws {
        let header =
            "store,store_transaction_id,original_store_transaction_id,product_identifier,start_time,end_time,"
            + "refunded_at,is_sandbox,ownership_type,country,offer,offer_type,is_trial_period,"
            + "price_in_purchased_currency,is_auto_renewable,updated_at"
        let row =
            "app_store,t1,o1,basic,2026-01-01 00:00:00,2026-02-01 00:00:00,,false,PURCHASED,U\u{7F},,,false,1,true,"
            + "2026-01-01 00:00:00"
        let dir = Paths.temporary()
        try [header, row].joined(separator: "\n").write(toFile: dir + "/rc.csv", atomically: true, encoding: .utf8)
        let set = try TransactionReader.read(
            inputs: [dir + "/rc.csv"].map(InputStores.lookUp), format: .revenuecat, products: ["basic": "g1"],
            threads: 1)
        #expect(set.rejects.map(\.reason) == ["country 'U\\x7F' is not in the ISO 3166 table"])
    }
}
