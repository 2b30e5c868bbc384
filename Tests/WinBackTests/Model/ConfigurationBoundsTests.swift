import Foundation
import Testing
import WinBackTestSupport

@testable import WinBackModel
@testable import WinBackRules
@testable import WinBackSupport

/// What docs/rules.md §6.3 asks of configuration files, in this process: a JSON key given twice
/// found, rates read line by line, system errors said in words.
@Suite("Configuration files under attack (docs/rules.md §6.3)")
struct ConfigurationBoundsTests {
    @Test("a key given twice is found in any object, with its path, line and column; distinct keys are not")
    func duplicateKeys() throws {
        let text = """
            {"offers": [
              {"offerId": "a", "territories": ["USA"]},
              {"offerId": "b", "territories": [], "x": {"k": 1},
               "territories": ["USA", "CAN"]}
            ]}
            """
        let found = try #require(JSONDuplicateKey.first(in: Data(text.utf8)))
        #expect(found.key == "territories")
        #expect(found.path == [.key("offers"), .index(1)])
        #expect(found.line == 4 && found.column == 4)
        // Keys alike in different objects, strings holding quotes, escapes and colons: no duplicate.
        let fine = #"{"a": {"k": "x\"y:,{"}, "b": {"k": [1, {"k": 2}]}, "k": "\\"}"#
        #expect(JSONDuplicateKey.first(in: Data(fine.utf8)) == nil)
        // An escape spells the same key.
        let escaped = Data(#"{"territories": [], "territorie\u0073": ["USA"]}"#.utf8)
        #expect(JSONDuplicateKey.first(in: escaped)?.key == "territories")
        // Nested in an array of arrays.
        let deep = Data(#"[[{"a": 1}], [{"b": 1, "b": 2}]]"#.utf8)
        #expect(JSONDuplicateKey.first(in: deep)?.path == [.index(1), .index(0)])
        // Many keys: one pass, no quadratic copying.
        let many = "{" + (0..<200_000).map { "\"k\($0)\": 1" }.joined(separator: ", ") + ", \"k7\": 2}"
        #expect(JSONDuplicateKey.first(in: Data(many.utf8))?.key == "k7")
    }

    @Test("the catalog names the offer whose key is given twice")
    func catalogDuplicate() {
        let catalog = """
            {"offers": [{"offerId": "wb.a", "territories": [], "territories": ["USA"], "subscriptionGroupId": "1",
              "productId": "p", "duration": "ONE_MONTH", "offerMode": "FREE_TRIAL", "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 1,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 2},
              "customerEligibilityWaitBetweenOffersInMonths": 1, "startDate": "2026-01-01", "priority": "HIGH"}]}
            """
        let (_, problems) = OfferCatalog.parse(Data(catalog.utf8))
        #expect(
            problems.first?.contains("offer 'wb.a' (offers[0]): key 'territories' is given twice") == true,
            "\(problems)")
    }

    @Test("rates: a byte-order mark and CRLF read as in every CSV; a long line or too many rates refused at once")
    func rates() throws {
        let plain = try Rates.parse(Array("currency,rate\nEUR,1.1\n".utf8), currency: "USD", path: "r")
        let marked = try Rates.parse(
            [0xEF, 0xBB, 0xBF] + Array("currency,rate\r\nEUR,1.1\r\n\r\n".utf8), currency: "USD", path: "r")
        #expect(plain == marked)
        #expect(plain.rate("EUR", month: 0) == 1_100_000_000)
        // A mark elsewhere than the start is not skipped.
        #expect(throws: WinBackError.self) {
            try Rates.parse(
                Array("currency,rate\n".utf8) + [0xEF, 0xBB, 0xBF] + Array("EUR,1.1\n".utf8), currency: "USD", path: "r"
            )
        }
        var reader = Rates.Reader(currency: "USD", path: "r")
        try reader.take(Array("currency,rate".utf8))
        #expect {
            try reader.take([UInt8](repeating: 0, count: Rates.maxLineBytes + 1))
        } throws: { e in "\(e)".contains("line 2:") }
        // An empty line inside the file is a line without fields; the header alone is a file of no rates.
        #expect(throws: WinBackError.self) {
            try Rates.parse(Array("currency,rate\n\nEUR,1.1\n".utf8), currency: "USD", path: "r")
        }
        #expect(try Rates.parse(Array("currency,rate\n".utf8), currency: "USD", path: "r").undated.isEmpty)
        var count = Rates.Reader(currency: "USD", path: "r")
        try count.take(Array("month,currency,rate".utf8))
        let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        var refused: WinBackError?
        for i in 0...Rates.maxRates {
            let c = i % 17_576
            let line =
                Array("2020-0\(1 + i / 17_576),".utf8) + [letters[c / 676], letters[c / 26 % 26], letters[c % 26]]
                + Array(",1.5".utf8)
            do { try count.take(line) } catch let e as WinBackError {
                refused = e
                break
            }
        }
        #expect(
            refused?.description.contains("more than \(Rates.maxRates) rates") == true, "\(String(describing: refused))"
        )
    }

    @Test("Foundation's errors are said in the C library's words, never as an error domain and a code")
    func errorWords() {
        let denied = CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: "/x"])
        #expect(SystemError.words(denied) == String(cString: strerror(EACCES)))
        #expect(!SystemError.words(denied).contains("Domain"))
        let posix = NSError(domain: NSPOSIXErrorDomain, code: Int(ENOSPC))
        #expect(SystemError.words(posix) == String(cString: strerror(ENOSPC)))
        let wrapped = NSError(
            domain: NSCocoaErrorDomain, code: 512,
            userInfo: [NSUnderlyingErrorKey: NSError(domain: NSPOSIXErrorDomain, code: Int(EROFS))])
        #expect(SystemError.words(wrapped) == String(cString: strerror(EROFS)))
        #expect(SystemError.words(SystemError("open", errno: ENOENT)) == String(cString: strerror(ENOENT)))
    }

    @Test("output.group: a group that does not exist is named")
    func groups() {
        #expect(System.groupProblem("no-such-group-\(getpid())")?.contains("there is no group") == true)
        // The user's own effective group is always one it may give.
        if let name = getgrgid(getegid()).map({ String(cString: $0.pointee.gr_name) }) {
            #expect(System.groupProblem(name) == nil)
        }
    }
}
