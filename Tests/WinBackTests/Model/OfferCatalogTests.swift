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

@Suite("Offer catalog (docs/rules.md §2.4)")
struct OfferCatalogTests {
    static let apple = """
        {"offerId": "wb.basic.1m.free", "referenceName": "Basic: one month free", "subscriptionGroupId": "21482345",
         "productId": "com.example.streamingpass.basic.monthly", "appleId": "10778326500",
         "duration": "ONE_MONTH", "offerMode": "FREE_TRIAL", "periodCount": 1,
         "customerEligibilityPaidSubscriptionDurationInMonths": 3,
         "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 2, "maximum": 24},
         "customerEligibilityWaitBetweenOffersInMonths": 6,
         "startDate": "2024-07-01", "endDate": null, "priority": "HIGH", "territories": ["USA", "CAN"]}
        """

    func parse(_ offers: String) -> (OfferCatalog, [String]) {
        OfferCatalog.parse(Data("{\"offers\": [\(offers)]}".utf8))
    }

    /// Apple's example with one field replaced (or removed, with `nil`).
    func variant(_ field: String, _ json: String?) -> String {
        var obj = try! JSONSerialization.jsonObject(with: Data(Self.apple.utf8)) as! [String: Any]
        if let json {
            obj[field] =
                try! JSONSerialization.jsonObject(with: Data("[\(json)]".utf8), options: .fragmentsAllowed) as! [Any]
            obj[field] = (obj[field] as! [Any])[0]
        } else {
            obj.removeValue(forKey: field)
        }
        return String(decoding: try! JSONSerialization.data(withJSONObject: obj), as: UTF8.self)
    }

    @Test("Apple's example offer parses with every field")
    func appleExample() throws {
        let (catalog, problems) = parse(Self.apple)
        #expect(problems == [])
        let o = try #require(catalog.offers.first)
        #expect(o.offerId == "wb.basic.1m.free")
        #expect(o.paidMonths == 3 && o.minMonthsSince == 2 && o.maxMonthsSince == 24 && o.waitMonths == 6)
        #expect(o.priority == .high)
        #expect(o.territories == ["USA", "CAN"])
        #expect(o.startDay == Timestamp.parseDate("2024-07-01"))
        #expect(o.endDay == nil)
        #expect(o.offerURL == "https://apps.apple.com/win-back/10778326500")
    }

    @Test("optional fields default: live since always, NORMAL priority, all territories, no wait")
    func defaults() throws {
        let minimal = """
            {"offerId": "x", "subscriptionGroupId": "1", "productId": "p",
             "customerEligibilityPaidSubscriptionDurationInMonths": 1,
             "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 1}}
            """
        let (catalog, problems) = parse(minimal)
        #expect(problems == [])
        let o = try #require(catalog.offers.first)
        #expect(o.priority == .normal && o.territories.isEmpty && o.waitMonths == nil && o.startDay == nil)
        #expect(o.offerURL == "")
    }

    @Test(
        "each invalid field is a problem naming the offer and the field",
        arguments: [
            ("offerId", "\"has space\""), ("offerId", "\"a-b\""), ("offerId", nil), ("offerId", "12"),
            ("subscriptionGroupId", nil), ("productId", "\"-p\""),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "0"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "25"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "35"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "3.5"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", nil),
            ("customerEligibilityTimeSinceLastSubscribedInMonths", "{\"minimum\": 0, \"maximum\": 3}"),
            ("customerEligibilityTimeSinceLastSubscribedInMonths", "{\"minimum\": 4, \"maximum\": 3}"),
            ("customerEligibilityTimeSinceLastSubscribedInMonths", "{\"minimum\": 2}"),
            ("customerEligibilityTimeSinceLastSubscribedInMonths", "3"),
            ("customerEligibilityWaitBetweenOffersInMonths", "1"),
            ("customerEligibilityWaitBetweenOffersInMonths", "25"),
            ("duration", "\"TEN_DAYS\""), ("offerMode", "\"FREE\""), ("priority", "\"LOW\""),
            ("startDate", "\"2024-13-01\""), ("endDate", "\"2024-06-30\""), ("endDate", "\"2024/12/31\""),
            ("territories", "[\"US\"]"), ("territories", "[\"XYZ\"]"), ("territories", "\"USA\""),
            ("periodCount", "0"),
        ] as [(String, String?)])
    func invalidField(field: String, json: String?) {
        let (catalog, problems) = parse(variant(field, json))
        #expect(catalog.offers.isEmpty)
        #expect(problems.count >= 1)
        #expect(problems.contains { $0.contains("'\(field)") }, "\(problems)")
    }

    @Test(
        "boundary values are accepted",
        arguments: [
            ("customerEligibilityPaidSubscriptionDurationInMonths", "1"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "24"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "36"),
            ("customerEligibilityPaidSubscriptionDurationInMonths", "60"),
            ("customerEligibilityTimeSinceLastSubscribedInMonths", "{\"minimum\": 1, \"maximum\": 1}"),
            ("customerEligibilityWaitBetweenOffersInMonths", "2"),
            ("customerEligibilityWaitBetweenOffersInMonths", "24"),
            ("customerEligibilityWaitBetweenOffersInMonths", "null"),
            ("endDate", "\"2024-07-01\""), ("territories", "[]"), ("offerId", "\"_a.b_1\""),
        ] as [(String, String)])
    func boundaryAccepted(field: String, json: String) {
        let (catalog, problems) = parse(variant(field, json))
        #expect(problems == [])
        #expect(catalog.offers.count == 1)
    }

    @Test("a duplicated offerId and a bad offer are both reported; load fails with exit 78 listing all")
    func duplicatesAndAllProblems() throws {
        let text = "{\"offers\": [\(Self.apple), \(Self.apple), \(variant("priority", "\"LOW\""))]}"
        let dir = Paths.temporary()
        try text.write(toFile: dir + "/offers.json", atomically: true, encoding: .utf8)
        do {
            _ = try OfferCatalog.load(path: dir + "/offers.json")
            Issue.record("expected a configuration error")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 78)
            #expect(e.details.count == 2)
            #expect(e.details.contains { $0.contains("duplicate offerId 'wb.basic.1m.free'") })
            #expect(e.details.contains { $0.contains("'priority'") && $0.contains("LOW") })
        }
    }

    @Test("offers can come from a saved App Store Connect winBackOffers response, territories from its prices")
    func appStoreConnectResponse() throws {
        let dir = Paths.temporary()
        let response = """
            {"data": [
              {"type": "winBackOffers", "id": "10778326500",
               "attributes": {"referenceName": "Basic: one month free", "offerId": "wb.basic.1m.free",
                 "duration": "ONE_MONTH", "offerMode": "FREE_TRIAL", "periodCount": 1,
                 "customerEligibilityPaidSubscriptionDurationInMonths": 3,
                 "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 2, "maximum": 24},
                 "customerEligibilityWaitBetweenOffersInMonths": 6, "startDate": "2024-07-01", "endDate": null,
                 "priority": "HIGH", "promotionIntent": "NOT_PROMOTED"},
               "relationships": {"prices": {"data": [{"type": "winBackOfferPrices", "id": "p-can"},
                                                      {"type": "winBackOfferPrices", "id": "p-usa"}]}}},
              {"type": "winBackOffers", "id": "10778326501",
               "attributes": {"offerId": "wb.basic.everywhere",
                 "customerEligibilityPaidSubscriptionDurationInMonths": 1,
                 "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 12}}}
            ],
             "included": [
              {"type": "winBackOfferPrices", "id": "p-can", "relationships": {"territory": {"data": {"type": "territories", "id": "CAN"}}}},
              {"type": "winBackOfferPrices", "id": "p-usa", "relationships": {"territory": {"data": {"type": "territories", "id": "USA"}}}}
             ],
             "links": {"self": "https://api.appstoreconnect.apple.com/v1/subscriptions/6444/winBackOffers"}}
            """
        try response.write(toFile: dir + "/basic-winback.json", atomically: true, encoding: .utf8)
        let catalog = """
            {"offers": [\(variant("offerId", "\"wb.inline\""))],
             "appStoreConnect": [{"subscriptionGroupId": "21482345",
               "productId": "com.example.streamingpass.basic.monthly", "response": "basic-winback.json"}]}
            """
        try catalog.write(toFile: dir + "/offers.json", atomically: true, encoding: .utf8)
        let c = try OfferCatalog.load(path: dir + "/offers.json")
        #expect(c.offers.map(\.offerId) == ["wb.inline", "wb.basic.1m.free", "wb.basic.everywhere"])
        let asc = c.offers[1]
        #expect(asc.subscriptionGroupId == "21482345")
        #expect(asc.productId == "com.example.streamingpass.basic.monthly")
        #expect(asc.appleId == "10778326500")
        #expect(asc.territories == ["CAN", "USA"])
        #expect(asc.priority == .high && asc.waitMonths == 6 && asc.paidMonths == 3)
        #expect(c.offers[2].territories == [])
    }

    /// Apple's example with `from` renamed `to`.
    func renamed(_ from: String, _ to: String) -> String {
        Self.apple.replacingOccurrences(of: "\"\(from)\":", with: "\"\(to)\":")
    }

    @Test("a misspelt key is a problem naming the offer and the key it is near; the offer is not kept")
    func misspeltKey() {
        let (catalog, problems) = parse(renamed("territories", "territory"))
        #expect(catalog.offers.isEmpty)
        #expect(problems == ["offer 'wb.basic.1m.free' field 'territory': unknown key (did you mean 'territories'?)"])
    }

    @Test("a key near no known key lists the known keys")
    func unknownKeyListsKnownKeys() {
        let (_, problems) = parse(renamed("priority", "colour"))
        #expect(
            problems.contains { $0.hasPrefix("offer 'wb.basic.1m.free' field 'colour': unknown key; known keys: ") })
        #expect(problems.contains { $0.contains("known keys: offerId, referenceName,") && $0.contains("territories") })
    }

    @Test(
        "unknown keys are found at every level of the catalog",
        arguments: [
            (
                "{\"offers\": [\(OfferCatalogTests.apple)], \"offer\": []}",
                "catalog field 'offer': unknown key (did you mean 'offers'?)"
            ),
            (
                "{\"offers\": [\(OfferCatalogTests.apple.replacingOccurrences(of: "\"maximum\"", with: "\"maxium\""))]}",
                "offer 'wb.basic.1m.free' field 'customerEligibilityTimeSinceLastSubscribedInMonths.maxium': "
                    + "unknown key (did you mean 'customerEligibilityTimeSinceLastSubscribedInMonths.maximum'?)"
            ),
            (
                "{\"offers\": [], \"appStoreConnect\": [{\"subscriptionGroupId\": \"1\", \"productId\": \"p\", "
                    + "\"reponse\": \"r.json\"}]}",
                "appStoreConnect[0] field 'reponse': unknown key (did you mean 'response'?)"
            ),
        ])
    func unknownKeysEverywhere(json: String, problem: String) {
        let (_, problems) = OfferCatalog.parse(Data(json.utf8))
        #expect(problems.contains(problem), "\(problems)")
    }

    @Test("the nearest known key is suggested only when it is close")
    func nearestKey() {
        #expect(KnownKeys.nearest("territory", in: KnownKeys.offer) == "territories")
        #expect(KnownKeys.nearest("Priority", in: KnownKeys.offer) == "priority")
        #expect(KnownKeys.nearest("offerID", in: KnownKeys.offer) == "offerId")
        #expect(KnownKeys.nearest("startdat", in: KnownKeys.offer) == "startDate")
        #expect(KnownKeys.nearest("colour", in: KnownKeys.offer) == nil)
        #expect(KnownKeys.nearest("minimal", in: KnownKeys.range) == "minimum")
        #expect(KnownKeys.nearest("count", in: KnownKeys.range) == nil)
    }

    @Test("a date that does not exist says why; one not written YYYY-MM-DD says so")
    func impossibleDates() {
        let (_, problems) = parse(variant("startDate", "\"2026-02-30\""))
        #expect(
            problems == [
                "offer 'wb.basic.1m.free' field 'startDate': '2026-02-30' is not a date (February 2026 has 28 days)"
            ])
        let (_, malformed) = parse(variant("endDate", "\"2026/02/03\""))
        #expect(malformed == ["offer 'wb.basic.1m.free' field 'endDate': '2026/02/03' is not a date YYYY-MM-DD"])
    }

    @Test("a saved App Store Connect response keeps Apple's fields, unknown ones included, at every level")
    func appStoreConnectPassthrough() throws {
        let dir = Paths.temporary()
        let response = """
            {"data": [{"type": "winBackOffers", "id": "1", "futureResourceField": true,
               "attributes": {"offerId": "wb.asc", "promotionIntent": "NOT_PROMOTED", "aFieldAppleAddsLater": {"x": 1},
                 "customerEligibilityPaidSubscriptionDurationInMonths": 1,
                 "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 12, "unit": "M"}}}],
             "meta": {"paging": {"total": 1}}}
            """
        try response.write(toFile: dir + "/asc.json", atomically: true, encoding: .utf8)
        let catalog = """
            {"offers": [], "appStoreConnect": [{"subscriptionGroupId": "1", "productId": "p", "response": "asc.json"}]}
            """
        try catalog.write(toFile: dir + "/offers.json", atomically: true, encoding: .utf8)
        #expect(try OfferCatalog.load(path: dir + "/offers.json").offers.map(\.offerId) == ["wb.asc"])
    }

    @Test("load fails with exit 78 on a misspelt key, naming the offer and the key")
    func loadRefusesUnknownKey() throws {
        let dir = Paths.temporary()
        try "{\"offers\": [\(renamed("territories", "territory"))]}".write(
            toFile: dir + "/offers.json", atomically: true, encoding: .utf8)
        do {
            _ = try OfferCatalog.load(path: dir + "/offers.json")
            Issue.record("expected a configuration error")
        } catch let e as WinBackError {
            #expect(e.code.exitCode == 78)
            #expect(
                e.details == ["offer 'wb.basic.1m.free' field 'territory': unknown key (did you mean 'territories'?)"])
        }
    }
}
