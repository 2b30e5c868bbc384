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

/// Every line form of a signed file, what a line rejects for, and how its rows are counted.
@Suite struct SignedLineTests {
    let f: SignedFixture
    init() throws { f = try SignedFixture() }

    func tx(_ n: Int) -> String { SignedFixture.transaction("20000000000000\(10 + n)") }

    @Test(arguments: [false, true])
    func everyLineFormIsRead(gzip: Bool) throws {
        let bare = try f.sign(tx(1))
        let lines = [
            bare,
            "\"\(try f.sign(tx(2)))\"",
            #"{"signedPayload":"\#(try f.notification(transaction: tx(3), renewal: SignedFixture.renewal()))"}"#,
            #"{"signedTransactions":["\#(try f.sign(tx(4)))","\#(try f.sign(tx(5)))","\#(try f.sign(tx(6)))"],"revision":"r","hasMore":false,"bundleId":"b","appAppleId":1,"environment":"Production"}"#,
            #"{"environment":"Production","appAppleId":1,"bundleId":"b","data":[{"subscriptionGroupIdentifier":"21482345","lastTransactions":[{"originalTransactionId":"2000000000000001","status":1,"signedTransactionInfo":"\#(try f.sign(tx(7)))","signedRenewalInfo":"\#(try f.sign(SignedFixture.renewal(signed: "1735689600001")))"},{"status":2,"signedTransactionInfo":"\#(try f.sign(tx(8)))"}]},{"subscriptionGroupIdentifier":"9","lastTransactions":[]}]}"#,
            #"{"signedTransactionInfo":"\#(try f.sign(tx(9)))","signedRenewalInfo":"\#(try f.sign(SignedFixture.renewal(signed: "1735689600002")))"}"#,
            "",
            "  \(try f.sign(tx(10)))\r",
        ]
        let set = try f.read(lines, gzip: gzip)
        #expect(set.rejects.isEmpty)
        #expect(set.rows.count == 10)
        #expect(set.inputs[0].rows == 7)  // non-blank lines: what the reject fraction counts in
        #expect(set.counters.lines == 7)
        #expect(set.counters.rowsRead == 10)  // a page of three is three rows
        let key = TransactionKey("2000000000000001", table: set.strings)
        let info = set.renewals.known(at: Int64.max, originalTransactionId: key)
        #expect(info?.signedDate == 1_735_689_600_002)
        #expect(set.renewals.infos(of: key).count == 3)
    }

    @Test func theLineFormsOfAnotherEnvironmentAreCountedNotKept() throws {
        let sandbox = SignedFixture.transaction("2000000000000099", environment: "Sandbox")
        let set = try f.read([try f.sign(tx(1)), try f.sign(sandbox)])
        #expect(set.rows.count == 1)
        #expect(set.counters.otherEnvironment == 1)
        let inSandbox = try f.read([try f.sign(tx(1)), try f.sign(sandbox)], environment: "Sandbox")
        #expect(inSandbox.rows.count == 1)
        #expect(inSandbox.counters.otherEnvironment == 1)
        #expect(inSandbox.rows.first.map { $0.transactionId.raw } == 2_000_000_000_000_099)
    }

    @Test func fractionalMillisecondsAreFloored() throws {
        let json = SignedFixture.transaction(
            "2000000000000001", signed: "1697679936049.7297", purchase: "1697679936049.7297",
            expires: "1.7003e12")
        let set = try f.read([try f.sign(json)])
        #expect(set.rejects.isEmpty)
        let t = try #require(set.rows.first)
        #expect(t.purchaseDate == 1_697_679_936_049)
        #expect(t.signedDate == 1_697_679_936_049)
        #expect(t.expiresDate == 1_700_300_000_000)
        #expect(SignedLine.floorMilliseconds(UnsafeRawBufferPointer(start: nil, count: 0)) == 0)
        let negative = Array("-1.5".utf8)
        #expect(negative.withUnsafeBytes { SignedLine.floorMilliseconds($0) } == -2)
    }

    @Test func theDecodedFormatStillRefusesFractions() throws {
        let dir = Paths.temporary()
        let line = SignedFixture.transaction("2000000000000001", purchase: "1697679936049.7297")
        try Data((line + "\n").utf8).write(to: URL(fileURLWithPath: dir + "/t.jsonl"))
        let set = try TransactionReader.read(inputs: [dir + "/t.jsonl"].map(InputStores.lookUp), threads: 1)
        #expect(set.rejects.count == 1)
    }

    @Test func aBundleIdOfAnotherAppIsRefused() throws {
        let settings = try f.settings(bundleId: "com.example.pass")
        let other = SignedFixture.transaction("2000000000000002", bundle: "com.other.app")
        let set = try f.read(
            [
                try f.sign(tx(1)), try f.sign(other),
                #"{"signedPayload":"\#(try f.notification(transaction: tx(3), renewal: nil, bundle: "com.other.app"))"}"#,
            ], settings: settings)
        #expect(set.rows.count == 1)
        #expect(set.rejects.map(\.line) == [2, 3])
        #expect(set.rejects.allSatisfy { $0.reason.hasPrefix("bundle_id: ") })
    }

    @Test func anAppAppleIdOfAnotherAppIsRefusedInProduction() throws {
        let settings = try f.settings(appAppleId: 1234)
        let set = try f.read(
            [
                #"{"signedPayload":"\#(try f.notification(transaction: tx(1), renewal: nil, appAppleId: 1234))"}"#,
                #"{"signedPayload":"\#(try f.notification(transaction: tx(2), renewal: nil, appAppleId: 99))"}"#,
                #"{"signedPayload":"\#(try f.notification(transaction: tx(3), renewal: nil, appAppleId: 99, environment: "Sandbox"))"}"#,
            ], settings: settings)
        #expect(set.rejects.map(\.line) == [2])
        #expect(set.rejects.first?.reason.hasPrefix("app_apple_id: ") == true)
        #expect(set.rows.count == 2)  // appAppleId is only checked in Production
    }

    @Test func aForgedJWSInAPageRejectsTheLineOnceAndKeepsTheOthers() throws {
        let good = try f.sign(tx(1))
        let parts = good.split(separator: ".").map(String.init)
        let forged = parts[0] + "." + Base64URL.encode(Array(tx(2).utf8)) + "." + parts[2]
        let set = try f.read([#"{"signedTransactions":["\#(good)","\#(forged)","\#(try f.sign(tx(3)))"]}"#])
        #expect(set.rejects.count == 1)
        #expect(set.rejects.first?.reason.hasPrefix("signature: ") == true)
        // The excerpt shows the payload that failed, not the header every line starts with.
        #expect(set.rejects.first?.excerpt.hasPrefix(#"payload: {"transactionId":"2000000000000012""#) == true)
        #expect(set.rows.count == 2)
        #expect(!set.rows.contains { $0.transactionId.raw == 2_000_000_000_000_012 })
    }

    @Test func withoutVerificationAForgedSignatureIsRead() throws {
        let good = try f.sign(tx(1))
        let parts = good.split(separator: ".").map(String.init)
        let forged = parts[0] + "." + Base64URL.encode(Array(tx(2).utf8)) + "." + parts[2]
        let set = try f.read([forged], settings: try f.settings(verify: false))
        #expect(set.rejects.isEmpty)
        #expect(set.rows.count == 1)
    }

    @Test func linesWithoutSignedDataAreRejectedAsMalformed() throws {
        let set = try f.read([
            #"{"hello":"world"}"#, "{not json", #""eyJhbGciOiJFUzI1NiJ9.e30"#, "plain words",
            #"{"signedTransactions":[1]}"#,
            try f.sign(#"{"hello":1}"#),
        ])
        #expect(set.rejects.count == 6)
        #expect(set.rejects.allSatisfy { $0.reason.hasPrefix("jws_format: ") })
    }

    @Test func aTransactionThatFailsTheDecodedRulesIsRejectedWithTheirReason() throws {
        let bad = SignedFixture.transaction("2000000000000001", purchase: "1738368000001", expires: "1738368000000")
        let set = try f.read([try f.sign(bad)])
        #expect(set.rejects.first?.reason == "expiresDate before purchaseDate")
    }

    @Test func aTestNotificationHoldsNothingAndIsNoReject() throws {
        let test = try f.sign(
            #"{"notificationType":"TEST","notificationUUID":"u","data":{"bundleId":"com.example.pass","environment":"Production"},"version":"2.0","signedDate":1735689600000}"#
        )
        let set = try f.read([#"{"signedPayload":"\#(test)"}"#])
        #expect(set.rejects.isEmpty)
        #expect(set.rows.count == 0)
    }

    @Test func renewalFilesMayBeSignedToo() throws {
        let dir = Paths.temporary()
        let lines = [try f.sign(SignedFixture.renewal()), try f.sign(tx(1)), "garbage"]
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: dir + "/r.jsonl"))
        let read = try RenewalReader.read(paths: [dir + "/r.jsonl"], signed: try f.settings())
        #expect(read.rejects.count == 1)
        #expect(read.stats[0].rows == 3)
        let strings = StringTable()
        let index = read.index(in: strings)
        #expect(index.keys == 1)
    }
}

extension SignedLineTests {
    @Test func aRealAppleJWSReadsWithTheDefaultSettingsWithoutAReject() throws {
        let jws = try String(contentsOfFile: Paths.fixtures + "/signed/apple-sandbox-transaction.jws", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // A consumable: read, verified against Apple Root CA - G3 at its signedDate, then counted
        // as not a subscription.
        let set = try f.read(
            [jws, "\"\(jws)\"", #"{"signedTransactions":["\#(jws)"]}"#], settings: SignedReading(),
            environment: "Sandbox")
        #expect(set.rejects.isEmpty)
        #expect(set.counters.nonSubscription == 3)
        let wrongApp = try f.read(
            [jws], settings: SignedReading.resolve(bundleOnly("com.example.pass"), folder: "/", now: 0))
        #expect(wrongApp.rejects.first?.reason.hasPrefix("bundle_id: ") == true)
        let rightApp = try f.read(
            [jws], settings: SignedReading.resolve(bundleOnly("com.goodheartapp"), folder: "/", now: 0))
        #expect(rightApp.rejects.isEmpty)
    }

    func bundleOnly(_ id: String) -> AppleSettings {
        var a = AppleSettings()
        a.bundleId = id
        return a
    }

    @Test func aSandboxPipelineKeepsSandboxRowsOfDecodedFilesToo() throws {
        let dir = Paths.temporary()
        let lines = [
            SignedFixture.transaction("2000000000000001", environment: "Sandbox"),
            SignedFixture.transaction("2000000000000002", environment: "Production"),
            SignedFixture.transaction("2000000000000003").replacingOccurrences(
                of: #""environment":"Production","#, with: ""),
        ]
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: dir + "/t.jsonl"))
        let production = try TransactionReader.read(inputs: [dir + "/t.jsonl"].map(InputStores.lookUp), threads: 1)
        #expect(production.rows.count == 2)
        #expect(production.counters.otherEnvironment == 1)
        let sandbox = try TransactionReader.read(
            inputs: [dir + "/t.jsonl"].map(InputStores.lookUp), threads: 1, environment: "Sandbox")
        #expect(sandbox.rows.count == 1)
        #expect(sandbox.counters.otherEnvironment == 2)
        #expect(sandbox.rows.first?.transactionId.raw == 2_000_000_000_000_001)
    }
}
