import Foundation
import Testing
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTesting
import WinBackWrite

/// A test chain with a leaf, and JWSs of transactions, renewal info and notifications.
package struct SignedFixture {
    package static let year2020 = Date(timeIntervalSince1970: 1_577_836_800)
    package static let year2040 = Date(timeIntervalSince1970: 2_208_988_800)

    package let chain: TestChain
    package let signer: JWSSigner

    package init() throws {
        chain = try TestChain(from: Self.year2020, until: Self.year2040)
        signer = try chain.signer(chain.leaf(from: Self.year2020, until: Self.year2040))
    }

    /// Reading settings that trust this chain's root.
    package func settings(verify: Bool = true, bundleId: String? = nil, appAppleId: Int64? = nil) throws
        -> SignedReading
    {
        SignedReading(
            roots: [("test-root.cer", try TestChain.der(chain.root))], verify: verify, bundleId: bundleId,
            appAppleId: appAppleId, now: ms("2026-01-01T00:00:00Z"))
    }

    package static func transaction(
        _ id: String, original: String = "2000000000000001", signed: String = "1735689600000",
        purchase: String = "1735689600000", expires: String = "1738368000000", bundle: String = "com.example.pass",
        environment: String = "Production"
    ) -> String {
        #"{"transactionId":"\#(id)","originalTransactionId":"\#(original)","bundleId":"\#(bundle)","#
            + #""productId":"com.example.pass.monthly","subscriptionGroupIdentifier":"21482345","#
            + #""purchaseDate":\#(purchase),"expiresDate":\#(expires),"type":"Auto-Renewable Subscription","#
            + #""environment":"\#(environment)","storefront":"USA","signedDate":\#(signed),"appTransactionId":"7","#
            + #""offerPeriod":"P1M","advancedCommerceInfo":{"a":[1,2]}}"#
    }

    package static func renewal(_ original: String = "2000000000000001", signed: String = "1735689600000") -> String {
        #"{"originalTransactionId":"\#(original)","autoRenewProductId":"com.example.pass.monthly","#
            + #""autoRenewStatus":0,"isInBillingRetryPeriod":false,"signedDate":\#(signed),"environment":"Production"}"#
    }

    package func sign(_ json: String) throws -> String { try signer.sign(Array(json.utf8)) }

    /// A notification carrying `transaction` and `renewal` JWSs.
    package func notification(
        transaction: String?, renewal: String?, bundle: String = "com.example.pass", appAppleId: Int64 = 1234,
        environment: String = "Production"
    ) throws -> String {
        var data = #"{"bundleId":"\#(bundle)","appAppleId":\#(appAppleId),"environment":"\#(environment)""#
        if let transaction { data += #","signedTransactionInfo":"\#(try sign(transaction))""# }
        if let renewal { data += #","signedRenewalInfo":"\#(try sign(renewal))""# }
        data += "}"
        return try sign(
            #"{"notificationType":"DID_RENEW","notificationUUID":"u","data":\#(data),"version":"2.0","signedDate":1735689600000}"#
        )
    }

    /// Reads `lines` as one appstore-signed file.
    package func read(
        _ lines: [String], settings: SignedReading? = nil, environment: String = "Production", gzip: Bool = false
    ) throws -> TransactionSet {
        let dir = Paths.temporary()
        let text = lines.joined(separator: "\n") + "\n"
        let path = dir + (gzip ? "/signed.jsonl.gz" : "/signed.jsonl")
        try Data(gzip ? ReadSupport.gzip(text) : Array(text.utf8)).write(to: URL(fileURLWithPath: path))
        return try TransactionReader.read(
            inputs: [path].map(InputStores.lookUp), format: .appstoreSigned, threads: 1, environment: environment,
            signed: settings ?? self.settings())
    }
}
