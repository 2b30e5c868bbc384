/// One transaction of a generated world, as plain values, before it is written in any format.
struct GeneratedTransaction {
    var transactionId: UInt64
    var originalTransactionId: UInt64
    var webOrderLineItemId: UInt64
    var productId: String
    var groupId: String
    var purchaseDate: Int64
    var expiresDate: Int64
    var signedDate: Int64
    var autoRenewable = true
    var familyShared = false
    var sandbox = false
    var offerType: Int?
    var offerIdentifier: String?
    var offerDiscountType: String?
    var offerPeriod: String?
    var revocationDate: Int64?
    var revocationReason: Int?
    /// `revocationType` and `revocationPercentage` of a refund (docs/rules.md §13.1).
    var revocationType: String?
    var revocationPercentage: Int?
    var isUpgraded = false
    var storefront: String
    var appAccountToken: String?
    /// Milliunits of `currency`.
    var price: Int
    var currency: String
    var renewal: Bool
    /// RevenueCat's app user id.
    var userId: String
}

/// Renewal info of a generated customer (JWSRenewalInfoDecodedPayload fields).
struct GeneratedRenewal {
    var originalTransactionId: UInt64
    var autoRenewStatus: Int
    var isInBillingRetryPeriod: Bool
    var gracePeriodExpiresDate: Int64?
    var eligibleWinBackOfferIds: [String]?
    var signedDate: Int64
}

/// The products and offers of generated worlds.
enum GeneratedCatalog {
    struct Product {
        var id: String
        var group: String
        var months: Int64
        var priceMilli: Int
    }

    static let streaming = "21482345"
    static let photo = "30591122"
    static let basic = Product(
        id: "com.example.streamingpass.basic.monthly", group: streaming, months: 1, priceMilli: 4990)
    static let premium = Product(
        id: "com.example.streamingpass.premium.monthly", group: streaming, months: 1, priceMilli: 9990)
    static let premiumYearly = Product(
        id: "com.example.streamingpass.premium.yearly", group: streaming, months: 12, priceMilli: 99990)
    static let photoMonthly = Product(id: "com.example.photopro.monthly", group: photo, months: 1, priceMilli: 2990)
    static let photoYearly = Product(id: "com.example.photopro.yearly", group: photo, months: 12, priceMilli: 24990)
    static let products = [basic, premium, premiumYearly, photoMonthly, photoYearly]

    /// Win-back offers a returning customer of `product` may redeem (their ids are in offers.json).
    static func winBackOffers(for product: String) -> [(id: String, free: Bool)] {
        switch product {
        case basic.id: return [("wb.basic.1m.free", true), ("wb.basic.3m.half", false)]
        case premium.id: return [("wb.premium.1m.free", true)]
        case premiumYearly.id: return [("wb.premium.yearly.upfront", false)]
        case photoMonthly.id: return [("wb.photo.1m.free", true)]
        default: return []
        }
    }

    /// offers.json: Apple's own example first, then offers that exercise ranking, territories,
    /// dates and a second group.
    /// Units of USD per unit of the world's other currencies (``CustomerSimulator/currencies``),
    /// undated, with monthly EUR and JPY rates beside them (docs/rules.md §13.1).
    static let rates = """
        month,currency,rate
        ,EUR,1.0825
        ,GBP,1.2710
        ,CAD,0.7315
        ,AUD,0.6580
        ,JPY,0.006650
        ,BRL,0.1790
        ,INR,0.011950
        ,MXN,0.05480
        2026-06,EUR,1.0968
        2026-06,JPY,0.006890

        """

    static let offersJSON = """
        {
          "offers": [
            {
              "offerId": "wb.basic.1m.free",
              "referenceName": "Basic: one month free",
              "subscriptionGroupId": "21482345",
              "productId": "com.example.streamingpass.basic.monthly",
              "appleId": "10778326500",
              "duration": "ONE_MONTH",
              "offerMode": "FREE_TRIAL",
              "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 3,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 2, "maximum": 24},
              "customerEligibilityWaitBetweenOffersInMonths": 6,
              "startDate": "2024-07-01",
              "endDate": null,
              "priority": "HIGH",
              "territories": ["USA", "CAN"]
            },
            {
              "offerId": "wb.basic.3m.half",
              "referenceName": "Basic: half price for three months",
              "subscriptionGroupId": "21482345",
              "productId": "com.example.streamingpass.basic.monthly",
              "appleId": "10778326510",
              "duration": "ONE_MONTH",
              "offerMode": "PAY_AS_YOU_GO",
              "periodCount": 3,
              "customerEligibilityPaidSubscriptionDurationInMonths": 1,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 36},
              "customerEligibilityWaitBetweenOffersInMonths": null,
              "startDate": "2024-01-01",
              "priority": "NORMAL"
            },
            {
              "offerId": "wb.premium.1m.free",
              "referenceName": "Premium: one month free",
              "subscriptionGroupId": "21482345",
              "productId": "com.example.streamingpass.premium.monthly",
              "appleId": "10778326520",
              "duration": "ONE_MONTH",
              "offerMode": "FREE_TRIAL",
              "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 6,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 3, "maximum": 12},
              "customerEligibilityWaitBetweenOffersInMonths": 12,
              "priority": "HIGH"
            },
            {
              "offerId": "wb.premium.yearly.upfront",
              "referenceName": "Premium yearly: first year at a discount",
              "subscriptionGroupId": "21482345",
              "productId": "com.example.streamingpass.premium.yearly",
              "appleId": "10778326540",
              "duration": "ONE_YEAR",
              "offerMode": "PAY_UP_FRONT",
              "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 12,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 2, "maximum": 24},
              "customerEligibilityWaitBetweenOffersInMonths": 24,
              "startDate": "2025-01-01",
              "priority": "HIGH",
              "territories": ["USA", "GBR", "DEU", "FRA", "JPN"]
            },
            {
              "offerId": "wb.basic.summer24",
              "referenceName": "Basic: summer 2024 (ended)",
              "subscriptionGroupId": "21482345",
              "productId": "com.example.streamingpass.basic.monthly",
              "appleId": "10778326550",
              "duration": "TWO_WEEKS",
              "offerMode": "FREE_TRIAL",
              "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 1,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 60},
              "startDate": "2024-06-01",
              "endDate": "2024-09-30",
              "priority": "NORMAL"
            },
            {
              "offerId": "wb.photo.1m.free",
              "referenceName": "Photo Pro: one month free",
              "subscriptionGroupId": "30591122",
              "productId": "com.example.photopro.monthly",
              "appleId": "10778326530",
              "duration": "ONE_MONTH",
              "offerMode": "FREE_TRIAL",
              "periodCount": 1,
              "customerEligibilityPaidSubscriptionDurationInMonths": 2,
              "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 18},
              "customerEligibilityWaitBetweenOffersInMonths": 6,
              "priority": "NORMAL"
            }
          ]
        }

        """
}
