import Foundation

/// Offers taken from a saved App Store Connect API response, as returned by
/// `GET /v1/subscriptions/{id}/winBackOffers?include=prices` (JSON:API: offers in `data`,
/// their prices in `included`, each price related to a territory).
/// See https://developer.apple.com/documentation/appstoreconnectapi/winbackoffersresponse
///
/// The response names neither the subscription group nor the product, so the catalog entry
/// that points at it supplies both:
/// `{"appStoreConnect": [{"subscriptionGroupId": "…", "productId": "…", "response": "file.json"}]}`.
/// An offer's territories are those of its included prices; with no prices included, every
/// territory.
enum AppStoreConnectOffers {
    static func parse(_ root: JSONValue, group: String, product: String, source: String) -> ([Offer], [String]) {
        guard let data = root["data"]?.array else {
            return ([], ["\(source): expected a winBackOffers response with a \"data\" array"])
        }
        // Price id → territory, from `included`.
        var territoryOfPrice: [String: String] = [:]
        for item in root["included"]?.array ?? [] where item["type"]?.string == "winBackOfferPrices" {
            if let id = item["id"]?.string,
                let territory = item["relationships"]?["territory"]?["data"]?["id"]?.string
            {
                territoryOfPrice[id] = territory
            }
        }
        var offers: [Offer] = []
        var problems: [String] = []
        for (i, item) in data.enumerated() {
            guard item["type"]?.string == "winBackOffers", var fields = item["attributes"]?.object else {
                problems.append("\(source): data[\(i)] is not a winBackOffers resource with attributes")
                continue
            }
            fields["subscriptionGroupId"] = .string(group)
            fields["productId"] = .string(product)
            if let id = item["id"]?.string { fields["appleId"] = .string(id) }
            let priceIds = item["relationships"]?["prices"]?["data"]?.array?.compactMap { $0["id"]?.string } ?? []
            let territories = Set(priceIds.compactMap { territoryOfPrice[$0] }).sorted()
            fields["territories"] = .array(territories.map { .string($0) })
            let label = fields["offerId"]?.string.map { "\(source): offer '\($0)'" } ?? "\(source): data[\(i)]"
            var checker = FieldChecker(label: label, fields: fields)
            if let offer = checker.offer() { offers.append(offer) }
            problems += checker.problems
        }
        return (offers, problems)
    }
}
