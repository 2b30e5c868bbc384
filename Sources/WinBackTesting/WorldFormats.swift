import WinBackModel

/// Writes generated transactions as lines of one export format.
protocol WorldFormat: Sendable {
    /// File name for the transactions of one month (`YYYY-MM`).
    func fileName(month: String) -> String
    /// The header line, if the format has one.
    var header: String? { get }
    /// Appends one transaction as a line (with its newline).
    func append(_ t: GeneratedTransaction, variant: Int, to out: inout [UInt8])
}

extension Array where Element == UInt8 {
    @inline(__always) mutating func add(_ s: String) { append(contentsOf: s.utf8) }
}

/// App Store Server API NDJSON: one decoded JWSTransactionDecodedPayload per line.
struct NDJSONWorldFormat: WorldFormat {
    func fileName(month: String) -> String { "transactions-\(month).jsonl.gz" }
    var header: String? { nil }

    func append(_ t: GeneratedTransaction, variant: Int, to out: inout [UInt8]) {
        var fields: [(String, String)] = []
        func s(_ k: String, _ v: String) { fields.append((k, "\"\(v)\"")) }
        func n(_ k: String, _ v: Int64) { fields.append((k, String(v))) }
        s("transactionId", String(t.transactionId))
        s("originalTransactionId", String(t.originalTransactionId))
        s("webOrderLineItemId", String(t.webOrderLineItemId))
        s("bundleId", "com.example.streamingpass")
        s("productId", t.productId)
        if t.autoRenewable { s("subscriptionGroupIdentifier", t.groupId) }
        n("purchaseDate", t.purchaseDate)
        n("originalPurchaseDate", t.purchaseDate)
        if t.autoRenewable { n("expiresDate", t.expiresDate) }
        n("quantity", 1)
        s("type", t.autoRenewable ? "Auto-Renewable Subscription" : "Consumable")
        if let token = t.appAccountToken { s("appAccountToken", token) }
        s("inAppOwnershipType", t.familyShared ? "FAMILY_SHARED" : "PURCHASED")
        n("signedDate", t.signedDate)
        if let o = t.offerType { n("offerType", Int64(o)) }
        if let id = t.offerIdentifier { s("offerIdentifier", id) }
        if let r = t.revocationDate { n("revocationDate", r) }
        if let r = t.revocationReason { n("revocationReason", Int64(r)) }
        if let r = t.revocationType { s("revocationType", r) }
        if let p = t.revocationPercentage { n("revocationPercentage", Int64(p)) }
        if t.isUpgraded { fields.append(("isUpgraded", "true")) }
        s("environment", t.sandbox ? "Sandbox" : "Production")
        s("transactionReason", t.renewal ? "RENEWAL" : "PURCHASE")
        s("storefront", t.storefront)
        s("storefrontId", "143441")
        n("price", Int64(t.price))
        s("currency", t.currency)
        if let d = t.offerDiscountType { s("offerDiscountType", d) }
        if let p = t.offerPeriod { s("offerPeriod", p) }
        s("appTransactionId", "70" + String(t.originalTransactionId))
        // Real exports do not keep one key order.
        if variant % 3 == 1 { fields.reverse() }
        if variant % 3 == 2 { fields.swapAt(0, fields.count - 1) }
        out.add("{")
        for (i, (k, v)) in fields.enumerated() {
            if i > 0 { out.add(variant % 2 == 0 ? "," : ", ") }
            out.add("\"\(k)\":")
            out.add(v)
        }
        out.add("}\n")
    }
}

/// A CSV with the §2.1 field names as its header; dates alternate between forms.
struct CSVWorldFormat: WorldFormat {
    static let columns = [
        "transactionId", "originalTransactionId", "subscriptionGroupIdentifier", "productId", "purchaseDate",
        "expiresDate", "type", "environment", "inAppOwnershipType", "offerType", "offerIdentifier", "offerDiscountType",
        "offerPeriod", "revocationDate", "revocationReason", "isUpgraded", "storefront", "appAccountToken",
        "signedDate", "price", "currency",
    ]

    func fileName(month: String) -> String { "transactions-\(month).csv.gz" }
    var header: String? { Self.columns.joined(separator: ",") + "\n" }

    func append(_ t: GeneratedTransaction, variant: Int, to out: inout [UInt8]) {
        func date(_ v: Int64?) -> String {
            guard let v else { return "" }
            switch variant % 3 {
            case 0: return String(v)
            case 1: return Timestamp.iso(v)
            default:
                let iso = Timestamp.iso(v)
                return String(iso.prefix(10)) + " " + String(iso.dropFirst(11).prefix(12))
            }
        }
        let cells: [String] = [
            String(t.transactionId), String(t.originalTransactionId), t.autoRenewable ? t.groupId : "", t.productId,
            date(t.purchaseDate), t.autoRenewable ? date(t.expiresDate) : "",
            t.autoRenewable ? "Auto-Renewable Subscription" : "Consumable", t.sandbox ? "Sandbox" : "Production",
            t.familyShared ? "FAMILY_SHARED" : "PURCHASED", t.offerType.map(String.init) ?? "", t.offerIdentifier ?? "",
            t.offerDiscountType ?? "", t.offerPeriod ?? "", date(t.revocationDate),
            t.revocationReason.map(String.init) ?? "",
            t.isUpgraded ? "true" : "", t.storefront, t.appAccountToken ?? "", date(t.signedDate), String(t.price),
            t.currency,
        ]
        var r = CSVRecord()
        for c in cells { r.field(c) }
        r.end()
        out.append(contentsOf: r.bytes)
    }
}

/// RevenueCat's Scheduled Data Export (template v5 columns); times in seconds, UTC.
struct RevenueCatWorldFormat: WorldFormat {
    static let columns = [
        "rc_original_app_user_id", "rc_last_seen_app_user_id_alias", "country", "platform", "product_identifier",
        "start_time", "end_time", "store", "is_auto_renewable", "is_trial_period", "is_in_intro_offer_period",
        "is_sandbox", "price_in_usd", "taxes_in_usd", "commission_in_usd", "proceeds_in_usd", "takehome_percentage",
        "store_transaction_id", "original_store_transaction_id", "refunded_at", "unsubscribe_detected_at",
        "billing_issues_detected_at", "purchased_currency", "price_in_purchased_currency", "entitlement_identifiers",
        "renewal_number", "is_trial_conversion", "presented_offering", "reserved_subscriber_attributes",
        "custom_subscriber_attributes", "platform_product_identifier", "ownership_type", "product_plan_identifier",
        "offer", "offer_type", "updated_at",
    ]
    static let offerTypes = [1: "introductory_offer", 2: "promotional_offer", 3: "offer_code", 4: "win_back_offer"]

    func fileName(month: String) -> String { "revenuecat-\(month).csv.gz" }
    var header: String? { Self.columns.joined(separator: ",") + "\n" }

    static func time(_ v: Int64) -> String {
        let iso = Timestamp.iso(v)
        return String(iso.prefix(10)) + " " + String(iso.dropFirst(11).prefix(8))
    }

    func append(_ t: GeneratedTransaction, variant: Int, to out: inout [UInt8]) {
        let free = t.offerDiscountType == "FREE_TRIAL"
        // An upgraded transaction ends when the upgrade starts; a refund is a refund.
        let end = t.isUpgraded ? (t.revocationDate ?? t.expiresDate) : t.expiresDate
        let price = String(format: "%.2f", Double(t.price) / 1000)
        var v: [String: String] = [
            "rc_original_app_user_id": t.userId, "rc_last_seen_app_user_id_alias": t.userId,
            "country": ISO3166.alpha2(t.storefront) ?? "", "platform": "iOS", "product_identifier": t.productId,
            "start_time": Self.time(t.purchaseDate), "end_time": t.autoRenewable ? Self.time(end) : "",
            "store": "app_store", "is_auto_renewable": t.autoRenewable ? "true" : "false",
            "is_trial_period": free && t.offerType == 1 ? "true" : "false", "is_in_intro_offer_period": "false",
            "is_sandbox": t.sandbox ? "true" : "false", "price_in_usd": price, "takehome_percentage": "0.85",
            "store_transaction_id": String(t.transactionId),
            "original_store_transaction_id": String(t.originalTransactionId),
            "refunded_at": !t.isUpgraded ? (t.revocationDate.map(Self.time) ?? "") : "",
            "purchased_currency": t.currency, "price_in_purchased_currency": price,
            "entitlement_identifiers": "[\"pro\"]", "renewal_number": t.renewal ? "2" : "1",
            "ownership_type": t.familyShared ? "FAMILY_SHARED" : "PURCHASED", "offer": t.offerIdentifier ?? "",
            "offer_type": t.offerType.flatMap { $0 == 1 ? nil : Self.offerTypes[$0] } ?? "",
            "updated_at": Self.time(t.signedDate),
        ]
        if t.offerType == 1 && !free { v["offer_type"] = "introductory_offer" }
        var r = CSVRecord()
        for c in Self.columns { r.field(v[c] ?? "") }
        r.end()
        out.append(contentsOf: r.bytes)
    }
}
