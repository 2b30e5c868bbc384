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

@Suite("ISO 3166 table")
struct ISO3166Tests {
    @Test("the compiled table equals Data/iso3166.csv")
    func sameAsDataFile() throws {
        let text = try String(contentsOfFile: Paths.repo + "/Data/iso3166.csv", encoding: .utf8)
        let pairs = text.split(separator: "\n").dropFirst().map { line -> (String, String) in
            let f = line.split(separator: ",", maxSplits: 2)
            return (String(f[0]), String(f[1]))
        }
        #expect(pairs.count == 249)
        #expect(pairs.map(\.0) == ISO3166.pairs.map(\.0))
        #expect(pairs.map(\.1) == ISO3166.pairs.map(\.1))
        #expect(ISO3166.alpha3("US") == "USA" && ISO3166.alpha2("GBR") == "GB" && ISO3166.alpha2("XXX") == nil)
    }
}
