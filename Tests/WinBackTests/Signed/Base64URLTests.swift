import Foundation
import Testing

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite struct Base64URLTests {
    func decoded(_ s: String) -> [UInt8]? {
        let buffer = DecodeBuffer(capacity: 1)
        return Array(s.utf8).withUnsafeBytes { buffer.decode($0) ? Array(buffer.bytes) : nil }
    }

    @Test func itRoundTripsEveryLengthAndAgreesWithFoundation() {
        var rng = SplitMix64(seed: 7)
        for n in 0..<200 {
            let bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            let standard = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(text == standard)
            #expect(decoded(text) == bytes)
        }
    }

    @Test(arguments: ["A", "AAAAA", "ab+c", "ab/c", "abc=", "ab c", "a\u{e9}bc", "ab.c"])
    func textOutsideTheAlphabetOrOfAnImpossibleLengthIsRefused(text: String) {
        #expect(decoded(text) == nil)
    }

    @Test func theEmptyTextIsEmpty() {
        #expect(decoded("") == [])
    }
}
