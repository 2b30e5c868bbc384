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

/// What the golden world's run relies on, checked without a run: the segment schema and the
/// choice of inflater. The run itself against the golden files is in the slow target.
@Suite("The segment schema and the inflater setting")
struct GoldenWorldTests {
    @Test("the schema rejects a segment that breaks it")
    func schemaRejectsInvalid() throws {
        let dir = Paths.temporary()
        let bad = dir + "/bad.xml"
        try """
        <?xml version="1.0" encoding="UTF-8"?>
        <segment xmlns="urn:winback:segment:1" offerId="x" subscriptionGroupId="1" productId="p" asOf="2026-11-22" customers="1">
          <customer originalTransactionId="1" productId="p" paidMonths="-1" lastSubscribedEnd="x" monthsSinceLastSubscribed="1" offerRank="0" eligibleOfferIds=""/>
        </segment>
        """.write(toFile: bad, atomically: true, encoding: .utf8)
        #expect(!XMLSchemaValidator.validate(xmlPath: bad, xsdPath: Paths.segmentXSD).isEmpty)
    }

    @Test("appleEligible is yes or no, and may be left out", arguments: [("yes", true), ("no", true), ("", false)])
    func schemaAppleEligible(value: String, valid: Bool) throws {
        let dir = Paths.temporary()
        let path = dir + "/s.xml"
        try """
        <?xml version="1.0" encoding="UTF-8"?>
        <segment xmlns="urn:winback:segment:1" offerId="x" subscriptionGroupId="1" productId="p" asOf="2026-11-22T00:00:00.000Z" customers="2">
          <customer originalTransactionId="1" productId="p" paidMonths="3" lastSubscribedEnd="2026-01-01T00:00:00.000Z" monthsSinceLastSubscribed="1" offerRank="1" eligibleOfferIds="x" appleEligible="\(value)"/>
          <customer originalTransactionId="2" productId="p" paidMonths="3" lastSubscribedEnd="2026-01-01T00:00:00.000Z" monthsSinceLastSubscribed="1" offerRank="1" eligibleOfferIds="x"/>
        </segment>
        """.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(XMLSchemaValidator.validate(xmlPath: path, xsdPath: Paths.segmentXSD).isEmpty == valid)
    }

    @Test(
        "isal asked for where it is missing: a configuration error from the file, a usage error from the command line")
    func inflaterMissing() throws {
        let e = #expect(throws: WinBackError.self) {
            try ResolvedPipeline.inflater(asked: nil, file: .isal, path: "p.yaml", isalAvailable: false)
        }
        #expect(e?.code.exitCode == 78)
        #expect(e.map { "\($0)".contains("'inflater'") && "\($0)".contains("libisal-dev") } == true)
        #expect(try ResolvedPipeline.inflater(asked: nil, file: .auto, path: "p.yaml", isalAvailable: false) == .zlib)
        #expect(try ResolvedPipeline.inflater(asked: .zlib, file: .isal, path: "p.yaml", isalAvailable: false) == .zlib)
        let usage = #expect(throws: WinBackError.self) {
            try ResolvedPipeline.inflater(asked: .isal, file: .zlib, path: "p.yaml", isalAvailable: false)
        }
        #expect(usage?.code.exitCode == 64)
        #expect(usage.map { "\($0)".contains("libisal-dev") } == true)
        #expect(try ResolvedPipeline.inflater(asked: .isal, file: .zlib, path: "p.yaml", isalAvailable: true) == .isal)
    }
}
