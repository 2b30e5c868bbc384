import Foundation
import WinBackTestSupport

@testable import WinBackRules

/// The nights the change tests build by hand: CSV exports of one group (`g1`) and product
/// (`p.monthly`), customers chosen in or out of a holdout, and a catalog of offers on it.
enum HandBuiltNights {
    static let header =
        "transactionId,originalTransactionId,subscriptionGroupIdentifier,productId,purchaseDate,"
        + "expiresDate,offerType,offerIdentifier,storefront"

    /// An originalTransactionId starting with `prefix` that `experiment` holds out or not.
    static func otid(_ prefix: String, heldOut: Bool, in experiment: HoldoutAssignment) -> String {
        for i in 0..<1_000 where experiment.isHeldOut(group: "g1", originalTransactionId: "\(prefix)\(i)") == heldOut {
            return "\(prefix)\(i)"
        }
        fatalError("no id")
    }

    /// A CSV export of `rows` under the header.
    static func write(_ path: String, _ rows: [String]) throws {
        try ([header] + rows).joined(separator: "\n").appending("\n").write(
            toFile: path, atomically: true, encoding: .utf8)
    }

    /// A catalog of one-month free offers on g1's p.monthly from 2026-01-01, one paid month
    /// required, each `(offerId, referenceName, appleId, maximum months since, priority)`.
    static func writeCatalog(
        _ path: String, _ offers: [(id: String, name: String, appleId: String?, maximum: Int, priority: String)]
    )
        throws
    {
        let entries = offers.map { o in
            """
             {"offerId": "\(o.id)", "referenceName": "\(o.name)", "subscriptionGroupId": "g1", "productId": "p.monthly",
              \(o.appleId.map { "\"appleId\": \"\($0)\", " } ?? "")"duration": "ONE_MONTH", "offerMode": "FREE_TRIAL", "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 1,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": \(o.maximum)},
              "startDate": "2026-01-01", "endDate": null, "priority": "\(o.priority)", "territories": []}
            """
        }
        try ("{\"offers\": [\n" + entries.joined(separator: ",\n") + "]}\n").write(
            toFile: path, atomically: true, encoding: .utf8)
    }
}
