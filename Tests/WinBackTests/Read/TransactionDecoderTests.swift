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

extension ReadStageTests {
    /// One line → row, non-subscription or rejected, in docs/rules.md §2.1's order of handling.
    @Suite struct TransactionDecoderTests {
        @Test func everyUsedFieldIsRead() throws {
            let h = DecodeHarness()
            let line = TxLine(id: "2000000000000002", original: "2000000000000001", signed: 1_700_000_000_123)
                .with("offerType", "4").with("offerIdentifier", #""wb.pass.1m""#)
                .with("offerDiscountType", #""PAY_UP_FRONT""#).with("offerPeriod", #""P1M""#)
                .with("revocationDate", "1701000000000").with("revocationReason", "1").with("isUpgraded", "true")
                .with("storefront", #""CAN""#).with("appAccountToken", #""7E3FB20B-4CDB-47CC-936D-99D65F608138""#)
                .with("price", "9990").with("currency", #""CAD""#).with("inAppOwnershipType", #""FAMILY_SHARED""#)
            let t = try #require(h.row(line.json))
            #expect(h.string(t.transactionId) == "2000000000000002")
            #expect(h.string(t.originalTransactionId) == "2000000000000001")
            #expect(h.string(t.subscriptionGroupId) == "21482345")
            #expect(h.string(t.productId) == "com.example.pass.monthly")
            #expect(t.purchaseDate == 1_700_000_000_000)
            #expect(t.expiresDate == 1_702_592_000_000)
            #expect(t.signedDate == 1_700_000_000_123)
            #expect(t.offerType == 4)
            #expect(h.string(t.offerIdentifier) == "wb.pass.1m")
            #expect(h.string(t.offerDiscountType) == "PAY_UP_FRONT")
            #expect(!t.isFreeTrial)
            #expect(t.revocationDate == 1_701_000_000_000)
            #expect(t.isUpgraded)
            #expect(h.string(t.storefront) == "CAN")
            // Written as read: the case of the token is kept.
            #expect(t.appAccountToken.string(in: h.table) == "7E3FB20B-4CDB-47CC-936D-99D65F608138")
            #expect(t.ownership == .familyShared)
            #expect(t.production)
        }

        @Test func anIdFirstSeenInAFieldWithoutThePatternIsStillCheckedAsAnIdentifier() throws {
            let h = DecodeHarness()
            // "bad id!" is a fine offerDiscountType (any string) but not a productId.
            let first = try #require(h.row(TxLine().with("offerDiscountType", "\"bad id!\"").json))
            #expect(h.string(first.offerDiscountType) == "bad id!")
            let why = try #require(h.rejection(TxLine().with("productId", "\"bad id!\"").json))
            #expect(why == "field productId: 'bad id!' is not a valid identifier")
            // A valid id is checked once, then known, and rejects nothing later.
            let a = try #require(h.row(TxLine().with("productId", "\"p.1\"").json))
            let b = try #require(h.row(TxLine(id: "1000000000000002").with("productId", "\"p.1\"").json))
            #expect(a.productId == b.productId)
            #expect(h.string(b.productId) == "p.1")
            // The same bytes as a group id, checked as such.
            let c = try #require(h.row(TxLine().with("subscriptionGroupIdentifier", "\"p.1\"").json))
            #expect(c.subscriptionGroupId == a.productId)
        }

        /// Ids that repeat are remembered by their length and first and last eight bytes; ids
        /// alike in those but not in between, or in length, must still get ids of their own,
        /// and a string remembered from a field without the identifier pattern is still checked
        /// when it comes in one that has it.
        @Test func rememberedIdsAreTheIdsOfExactlyTheirBytes() throws {
            let h = DecodeHarness()
            let products = [
                "com.example.a.x.monthly", "com.example.b.x.monthly", "com.example.ab.x.monthly", "com.exam.monthly",
                "com.example.monthly", "12345678", "123456789", "1234567812345678", "12345678x12345678",
                "com.example.a.x.monthly", "12345678", "com.example.b.x.monthly",
            ]
            var ids: [String: Int32] = [:]
            for (n, p) in products.enumerated() {
                for group in ["21482345", "21482346"] {
                    let line = TxLine(id: "\(1_000_000_000_000_000 + n)").with("productId", "\"\(p)\"")
                        .with("subscriptionGroupIdentifier", "\"\(group)\"").with("offerIdentifier", "\"\(p).offer\"")
                        .with("offerDiscountType", "\"\(p)-TYPE\"")
                    let t = try #require(h.row(line.json))
                    #expect(h.string(t.productId) == p)
                    #expect(h.string(t.subscriptionGroupId) == group)
                    #expect(h.string(t.offerIdentifier) == p + ".offer")
                    #expect(h.string(t.offerDiscountType) == p + "-TYPE")
                    #expect(ids[p, default: t.productId] == t.productId)
                    ids[p] = t.productId
                }
            }
            #expect(Set(ids.values).count == Set(products).count)
            // Eight bytes or more, first seen as a discount type (no pattern), then as a product.
            let first = try #require(h.row(TxLine().with("offerDiscountType", "\"bad id!!!\"").json))
            #expect(h.string(first.offerDiscountType) == "bad id!!!")
            let why = try #require(h.rejection(TxLine().with("productId", "\"bad id!!!\"").json))
            #expect(why == "field productId: 'bad id!!!' is not a valid identifier")
            let again = try #require(h.row(TxLine().with("offerDiscountType", "\"bad id!!!\"").json))
            #expect(again.offerDiscountType == first.offerDiscountType)
        }

        @Test func absentOptionalFieldsTakeTheirDefaults() throws {
            let h = DecodeHarness()
            let line = TxLine(signed: nil).with("type", nil).with("environment", nil).with("inAppOwnershipType", nil)
                .with("storefront", nil)
            let t = try #require(h.row(line.json))
            #expect(t.production)
            #expect(t.ownership == .purchased)
            #expect(t.signedDate == Transaction.unsigned)
            #expect(t.revocationDate == Transaction.never)
            #expect(t.offerType == 0)
            #expect(t.offerIdentifier == Transaction.none)
            #expect(t.offerDiscountType == Transaction.none)
            #expect(t.storefront == Transaction.none)
            #expect(t.appAccountToken.isNone)
            #expect(!t.isUpgraded)
            #expect(!t.isFreeTrial)
        }

        @Test func nullMeansAbsent() throws {
            let h = DecodeHarness()
            var line = TxLine()
            for key in [
                "type", "environment", "inAppOwnershipType", "offerType", "offerIdentifier", "offerDiscountType",
                "revocationDate", "revocationReason", "isUpgraded", "storefront", "appAccountToken", "signedDate",
            ] {
                line = line.with(key, "null")
            }
            let t = try #require(h.row(line.json))
            #expect(t.production)
            #expect(t.ownership == .purchased)
            #expect(t.signedDate == Transaction.unsigned)
            #expect(t.revocationDate == Transaction.never)
            #expect(t.storefront == Transaction.none)
            #expect(t.offerIdentifier == Transaction.none)
        }

        @Test func fieldOrderDoesNotMatter() throws {
            let h = DecodeHarness()
            let line = TxLine().with("offerType", "1").with("offerDiscountType", #""FREE_TRIAL""#)
            let forward = try #require(h.row(line.json))
            let reversed = TxLine(id: "x", original: "x").with("offerType", "1")
            var r = reversed
            r.fields = line.fields.reversed()
            let backward = try #require(h.row(r.json))
            #expect(forward == backward)
        }

        @Test func nestedValuesOfUnusedFieldsAreSkipped() throws {
            let h = DecodeHarness()
            var line = TxLine()
            line.fields.insert(
                ("meta", #"{"productId":"not.this","list":[1,{"type":"Consumable"},[[]],"]}"],"n":null}"#), at: 0)
            line.fields.insert(("tags", #"[[],{},"a\"b",-1.5e3,true]"#), at: 3)
            line.fields.append(("note", #""Grüße 😀 \u00e9 \ud83d\ude00""#))
            let t = try #require(h.row(line.json))
            #expect(h.string(t.productId) == "com.example.pass.monthly")
        }

        @Test func escapedIdentifiersAreDecodedBeforeTheyAreChecked() throws {
            let h = DecodeHarness()
            let t = try #require(
                h.row(
                    TxLine().with("productId", #""com\u002eexample\u002Epass""#).with("transactionId", #""10\u0030""#)
                        .json))
            #expect(h.string(t.productId) == "com.example.pass")
            #expect(h.string(t.transactionId) == "100")
            // An escaped slash is still a slash, which identifiers do not allow.
            let why = h.rejection(TxLine().with("productId", #""com\/example""#).json)
            #expect(why?.contains("productId") == true)
        }

        @Test func aRepeatedKeyTakesItsLastValue() throws {
            let h = DecodeHarness()
            var line = TxLine()
            line.fields.insert(("productId", #""first.product""#), at: 0)
            line.fields.append(("storefront", #""FRA""#))
            let t = try #require(h.row(line.json))
            #expect(h.string(t.productId) == "com.example.pass.monthly")
            #expect(h.string(t.storefront) == "FRA")
        }

        @Test func aRepeatedKeyEndingInNullIsAbsent() throws {
            let h = DecodeHarness()
            var line = TxLine()
            line.fields.append(("storefront", "null"))
            let t = try #require(h.row(line.json))
            #expect(t.storefront == Transaction.none)

            var required = TxLine()
            required.fields.append(("productId", "null"))
            let why = h.rejection(required.json)
            #expect(why == "missing required field productId")

            // And a bad first value is forgotten when a good one follows.
            var fixed = TxLine()
            fixed.fields.insert(("purchaseDate", #""yesterday""#), at: 0)
            #expect(h.row(fixed.json) != nil)
        }

        // MARK: Type

        static let otherTypes = [
            "Non-Renewing Subscription", "Consumable", "Non-Consumable", "auto-renewable subscription",
            "Auto-Renewable Subscription ", "",
        ]

        @Test(arguments: otherTypes)
        func otherTypesAreNonSubscriptionEvenWithFieldsMissing(type: String) {
            let h = DecodeHarness()
            guard case .nonSubscription = h.decode(#"{"type":"\#(type)"}"#) else {
                Issue.record("\(type) with no other field was not counted as non-subscription")
                return
            }
            let bad =
                #"{"transactionId":"-bad","purchaseDate":"x","expiresDate":1,"storefront":"usa","type":"\#(type)"}"#
            guard case .nonSubscription = h.decode(bad) else {
                Issue.record("\(type) with bad fields was not counted as non-subscription")
                return
            }
        }

        @Test func invalidJSONComesBeforeTheType() {
            let h = DecodeHarness()
            #expect(h.rejection(#"{"type":"Consumable","#)?.hasPrefix("invalid JSON") == true)
        }

        @Test func anAbsentOrNullTypeIsAutoRenewable() {
            let h = DecodeHarness()
            #expect(h.row(TxLine().with("type", nil).json) != nil)
            #expect(h.row(TxLine().with("type", "null").json) != nil)
            #expect(h.row(TxLine().with("type", #""Auto-Renewable Subscription""#).json) != nil)
        }

        @Test func aTypeThatIsNotAStringIsRejected() {
            let h = DecodeHarness()
            #expect(h.rejection(TxLine().with("type", "1").json)?.contains("type") == true)
        }

        // MARK: Required fields and types

        static let required = [
            "transactionId", "originalTransactionId", "subscriptionGroupIdentifier", "productId", "purchaseDate",
            "expiresDate",
        ]

        @Test(arguments: required)
        func aMissingRequiredFieldIsRejectedByName(field: String) {
            let h = DecodeHarness()
            #expect(h.rejection(TxLine().with(field, nil).json) == "missing required field \(field)")
            #expect(h.rejection(TxLine().with(field, "null").json) == "missing required field \(field)")
        }

        static let wrongTypes: [(String, String)] = [
            ("transactionId", "1000000000000001"),
            ("originalTransactionId", "true"),
            ("subscriptionGroupIdentifier", "21482345"),
            ("productId", #"["com.example"]"#),
            ("productId", #"{"id":"com.example"}"#),
            ("purchaseDate", #""1700000000000""#),
            ("purchaseDate", "1700000000000.0"),
            ("purchaseDate", "1.5"),
            ("expiresDate", "1e3"),
            ("expiresDate", "1.7e12"),
            ("expiresDate", "99999999999999999999"),
            ("expiresDate", "true"),
            ("environment", "1"),
            ("inAppOwnershipType", "false"),
            ("offerType", #""4""#),
            ("offerType", "4.0"),
            ("offerType", "-9223372036854775809"),
            ("offerIdentifier", "3"),
            ("offerDiscountType", "1"),
            ("revocationDate", "1.5"),
            ("revocationDate", #""2024-01-01""#),
            ("revocationReason", #""1""#),
            ("isUpgraded", #""true""#),
            ("isUpgraded", "1"),
            ("storefront", "840"),
            ("appAccountToken", "5"),
            ("signedDate", "1e3"),
            ("signedDate", "18446744073709551616"),
        ]

        @Test(arguments: wrongTypes)
        func aWrongTypeIsRejectedNamingTheField(field: String, value: String) {
            let h = DecodeHarness()
            let why = h.rejection(TxLine().with(field, value).json)
            #expect(why?.hasPrefix("field \(field):") == true, "\(why ?? "nil")")
        }

        @Test func integersMayBeNegativeOrZero() throws {
            let h = DecodeHarness()
            let t = try #require(
                h.row(
                    TxLine(signed: -1, purchase: -5, expires: 0).with("revocationReason", "-3").with("offerType", "-1")
                        .json))
            #expect(t.purchaseDate == -5)
            #expect(t.expiresDate == 0)
            #expect(t.signedDate == -1)
            // A negative offerType is no number a row keeps (those are 0…Int32.max): it is
            // kept as its text, with the label of any unknown type.
            #expect(t.offerType < 0)
            #expect(OfferType.label(t.offerType, strings: h.table) == "unknown:-1")
        }

        /// A row keeps 32 bits of offerType: a number outside them is kept as its text, with
        /// the same label, and two rows of one such number have the same type.
        @Test(arguments: [Int64(Int32.max) + 1, 99_999_999_999, Int64.max, -2, Int64(Int32.min)])
        func anOfferTypeOutside32BitsKeepsItsLabel(raw: Int64) throws {
            let h = DecodeHarness()
            let a = try #require(h.row(TxLine().with("offerType", "\(raw)").json))
            let b = try #require(h.row(TxLine().with("offerType", "\(raw)").json))
            #expect(a.offerType < 0 && a.offerType == b.offerType)
            #expect(OfferType.label(a.offerType, strings: h.table) == "unknown:\(raw)")
            let inRange = try #require(h.row(TxLine().with("offerType", "\(Int32.max)").json))
            #expect(inRange.offerType == Int64(Int32.max))
        }

        // MARK: Identifiers

        static let identifierFields = [
            "transactionId", "originalTransactionId", "subscriptionGroupIdentifier", "productId", "offerIdentifier",
        ]

        static let badIdentifiers: [String] = [
            "-abc", ".abc", "_abc", ":abc", "a b", " abc", "abc ", "", String(repeating: "a", count: 129), "é", "abé",
            "a/b", "a\\\\b", "a\\u0000b", "a,b", "a\\\"b", "a;b", "=cmd", "+1", "@x", "a\\tb",
        ]

        @Test(arguments: identifierFields, badIdentifiers)
        func anIdentifierFailingThePatternIsRejected(field: String, value: String) {
            let h = DecodeHarness()
            let why = h.rejection(TxLine().with(field, "\"\(value)\"").json)
            #expect(why?.hasPrefix("field \(field):") == true, "\(why ?? "nil")")
        }

        static let goodIdentifiers: [String] = [
            "a", "0", "A.b_c:d-e", String(repeating: "a", count: 128), "9-", "x..", "com.example.pass.monthly",
        ]

        @Test(arguments: identifierFields, goodIdentifiers)
        func anIdentifierMatchingThePatternIsKept(field: String, value: String) {
            let h = DecodeHarness()
            #expect(h.row(TxLine().with(field, "\"\(value)\"").json) != nil)
        }

        static let badStorefronts = ["usa", "US", "USAA", "U1A", "", "USa", "ÜSA", "U A"]

        @Test(arguments: badStorefronts)
        func aStorefrontThatIsNotThreeCapitalsIsRejected(value: String) {
            let h = DecodeHarness()
            let why = h.rejection(TxLine().with("storefront", "\"\(value)\"").json)
            #expect(why?.hasPrefix("field storefront:") == true, "\(why ?? "nil")")
        }

        static let goodTokens = [
            "7e3fb20b-4cdb-47cc-936d-99d65f608138", "7E3FB20B-4CDB-47CC-936D-99D65F608138",
            "7e3FB20b-4cDb-47Cc-936d-99D65f608138", "00000000-0000-0000-0000-000000000000",
        ]

        @Test(arguments: goodTokens)
        func aUUIDTokenInAnyCaseIsKeptAsWritten(value: String) throws {
            let h = DecodeHarness()
            let t = try #require(h.row(TxLine().with("appAccountToken", "\"\(value)\"").json))
            #expect(t.appAccountToken.string(in: h.table) == value)
        }

        static let badTokens = [
            "7e3fb20b4cdb47cc936d99d65f608138", "7e3fb20b-4cdb-47cc-936d-99d65f60813",
            "7e3fb20b-4cdb-47cc-936d-99d65f6081388",
            "7e3fb20b-4cdb-47cc-936d_99d65f608138", "7e3fb20-b4cdb-47cc-936d-99d65f608138",
            "{7e3fb20b-4cdb-47cc-936d-99d65f608138}",
            "ge3fb20b-4cdb-47cc-936d-99d65f608138", "", "not-a-uuid",
        ]

        @Test(arguments: badTokens)
        func aTokenThatIsNotAUUIDIsRejected(value: String) {
            let h = DecodeHarness()
            let why = h.rejection(TxLine().with("appAccountToken", "\"\(value)\"").json)
            #expect(why?.hasPrefix("field appAccountToken:") == true, "\(why ?? "nil")")
        }

        // MARK: Dates

        @Test func expiresBeforePurchaseIsRejected() {
            let h = DecodeHarness()
            let why = h.rejection(TxLine(purchase: 1_700_000_000_000, expires: 1_699_999_999_999).json)
            #expect(why?.contains("expiresDate") == true)
        }

        @Test func expiresEqualToPurchaseIsAccepted() throws {
            let h = DecodeHarness()
            let t = try #require(h.row(TxLine(purchase: 1_700_000_000_000, expires: 1_700_000_000_000).json))
            #expect(t.expiresDate == t.purchaseDate)
        }

        // MARK: Enums

        @Test(arguments: [0, 5, 9, 1_000_000] as [Int64])
        func anUnknownOfferTypeIsKept(raw: Int64) throws {
            let h = DecodeHarness()
            let t = try #require(h.row(TxLine().with("offerType", "\(raw)").json))
            #expect(t.offerType == raw)
            if raw != 0 { #expect(OfferType.label(t.offerType) == "unknown:\(raw)") }
        }

        @Test(arguments: [
            ("PURCHASED", Ownership.purchased), ("FAMILY_SHARED", .familyShared), ("SHARED_WITH_FRIENDS", .unknown),
            ("purchased", .unknown),
        ])
        func ownershipIsReadAndAnUnknownOneIsKept(raw: String, expected: Ownership) throws {
            let h = DecodeHarness()
            let t = try #require(h.row(TxLine().with("inAppOwnershipType", "\"\(raw)\"").json))
            #expect(t.ownership == expected)
        }

        @Test(arguments: [
            ("Production", true), ("Sandbox", false), ("Xcode", false), ("production", false), ("LocalTesting", false),
        ])
        func onlyProductionIsProduction(raw: String, production: Bool) throws {
            let h = DecodeHarness()
            let t = try #require(h.row(TxLine().with("environment", "\"\(raw)\"").json))
            #expect(t.production == production)
        }

        @Test(arguments: [
            ("FREE_TRIAL", true), ("PAY_AS_YOU_GO", false), ("PAY_UP_FRONT", false), ("free_trial", false),
            ("SOMETHING_NEW", false),
        ])
        func freeTrialIsFlaggedAndTheRawDiscountTypeKept(raw: String, free: Bool) throws {
            let h = DecodeHarness()
            let t = try #require(h.row(TxLine().with("offerDiscountType", "\"\(raw)\"").json))
            #expect(t.isFreeTrial == free)
            #expect(h.string(t.offerDiscountType) == raw)
        }

        @Test func theOrderIsInvalidJSONThenTypeThenFields() {
            let h = DecodeHarness()
            // Every field wrong and the JSON broken: invalid JSON wins.
            #expect(h.rejection(#"{"transactionId":-1,"type":"Consumable""#)?.hasPrefix("invalid JSON") == true)
            // Valid JSON, wrong type and broken fields: non-subscription wins.
            guard
                case .nonSubscription = h.decode(
                    #"{"transactionId":-1,"expiresDate":0,"purchaseDate":9,"type":"Consumable"}"#)
            else {
                Issue.record("expected nonSubscription")
                return
            }
            // A rejected row after a skipped one leaves no state behind.
            #expect(h.row(TxLine().json) != nil)
        }

        @Test func aDecoderIsReusableAcrossLines() throws {
            let h = DecodeHarness()
            let a = try #require(h.row(TxLine(id: "a1").with("storefront", #""FRA""#).json))
            _ = h.decode(#"{"s":"\u0041\u0042","#)
            let b = try #require(h.row(TxLine(id: "b1").with("storefront", nil).json))
            #expect(h.string(a.storefront) == "FRA")
            #expect(b.storefront == Transaction.none)
            #expect(h.string(b.transactionId) == "b1")
            #expect(TransactionKey.lookup("a1", in: h.table) == a.transactionId)
        }
    }
}
