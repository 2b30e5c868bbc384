import Foundation
import WinBackModel
import WinBackSupport

/// Turns one NDJSON line into a ``Transaction``, applying docs/rules.md §2.1's order of handling:
/// invalid JSON → rejected; a type other than auto-renewable → skipped; a missing or mistyped
/// field, a bad identifier, expiresDate before purchaseDate → rejected.
package final class TransactionDecoder {
    package enum Outcome {
        case row(Transaction)
        case nonSubscription
        case rejected(String)
    }

    /// The §2.1 fields, in the order of ``values``.
    enum Key: Int, CaseIterable {
        case transactionId, originalTransactionId, subscriptionGroupIdentifier, productId
        case purchaseDate, expiresDate, type, environment, inAppOwnershipType, offerType
        case offerIdentifier, offerDiscountType, revocationDate, revocationReason, isUpgraded
        case storefront, appAccountToken, signedDate
        case price, currency, revocationType, revocationPercentage

        var name: String {
            switch self {
            case .transactionId: return "transactionId"
            case .originalTransactionId: return "originalTransactionId"
            case .subscriptionGroupIdentifier: return "subscriptionGroupIdentifier"
            case .productId: return "productId"
            case .purchaseDate: return "purchaseDate"
            case .expiresDate: return "expiresDate"
            case .type: return "type"
            case .environment: return "environment"
            case .inAppOwnershipType: return "inAppOwnershipType"
            case .offerType: return "offerType"
            case .offerIdentifier: return "offerIdentifier"
            case .offerDiscountType: return "offerDiscountType"
            case .revocationDate: return "revocationDate"
            case .revocationReason: return "revocationReason"
            case .isUpgraded: return "isUpgraded"
            case .storefront: return "storefront"
            case .appAccountToken: return "appAccountToken"
            case .signedDate: return "signedDate"
            case .price: return "price"
            case .currency: return "currency"
            case .revocationType: return "revocationType"
            case .revocationPercentage: return "revocationPercentage"
            }
        }
    }

    private let scanner = JSONLineScanner(keys: Key.allCases.map(\.name))
    /// The values of the row being built, indexed by ``Key``; valid during ``build(_:)``.
    @exclusivity(unchecked) private var values = UnsafeBufferPointer<ScannedValue>(start: nil, count: 0)
    let table: StringTable

    package init(table: StringTable) { self.table = table }

    /// The environment whose rows count, the pipeline's (docs/rules.md §2.7); a row of another
    /// one (or without one, outside Production) is marked as not in it.
    var environment = "Production" { didSet { countsProduction = environment == "Production" } }
    private var countsProduction = true

    private struct Rejection: Error { let reason: String }

    @inline(__always) private func value(_ k: Key) -> ScannedValue { values[k.rawValue] }

    /// Field `k` as `take` reads it: nil when absent or null (a rejection when `required`), a
    /// rejection naming `expected` when it holds another kind of value.
    @inline(__always)
    private func field<T>(_ k: Key, required: Bool, expected: String, _ take: (ScannedValue) -> T?) throws -> T? {
        let v = value(k)
        switch v {
        case .absent, .null:
            if required { throw Rejection(reason: "missing required field \(k.name)") }
            return nil
        default:
            if let t = take(v) { return t }
            throw Rejection(reason: "field \(k.name): expected \(expected), found \(v.typeName)")
        }
    }

    @inline(__always)
    private func string(_ k: Key, required: Bool = false) throws -> UnsafeRawBufferPointer? {
        try field(k, required: required, expected: "a string") { if case .string(let s) = $0 { s } else { nil } }
    }

    @inline(__always)
    private func int(_ k: Key, required: Bool = false) throws -> Int64? {
        try field(k, required: required, expected: "an integer") { if case .int(let i) = $0 { i } else { nil } }
    }

    /// `offerType`: its number, 0 when absent. A number outside 0…Int32.max is kept as a
    /// named type, its decimal text interned: a row holds 32 bits of it, and its label
    /// (`unknown:N`) is the same.
    @inline(__always)
    private func offerType() throws -> Int64 {
        guard let v = try int(.offerType) else { return 0 }
        if v >= 0 && v <= Int64(Int32.max) { return v }
        return named(offerType: v)
    }

    /// An offerType outside 0…Int32.max, interned as its decimal text (``offerType()``).
    private func named(offerType v: Int64) -> Int64 {
        var text = String(v)
        return text.withUTF8 { -(Int64(table.intern(UnsafeRawBufferPointer($0))) + 1) }
    }

    /// The bytes of an identifier field (docs/rules.md §2.1's pattern), nil when absent.
    private func identifier(_ k: Key, required: Bool = false) throws -> UnsafeRawBufferPointer? {
        guard let s = try string(k, required: required) else { return nil }
        guard Identifier.isValid(s.bytes) else {
            throw Rejection(reason: "field \(k.name): '\(excerpt(s))' is not a valid identifier")
        }
        return s
    }

    /// By string id: whether the string is known to match the identifier pattern. Groups,
    /// products and offers repeat on every row; each is checked once, when first seen.
    @exclusivity(unchecked) private var validIdentifiers: [Bool] = []

    private func id(_ k: Key, required: Bool = false) throws -> Int32 {
        guard let s = try string(k, required: required) else { return Transaction.none }
        if let i = remembered(s, checked: true) { return i }
        if let i = table.find(s), Int(i) < validIdentifiers.count, validIdentifiers[Int(i)] {
            remember(s, i, checked: true)
            return i
        }
        let i = table.intern(try identifier(k, required: required)!)
        if validIdentifiers.count <= Int(i) {
            validIdentifiers += repeatElement(false, count: Int(i) + 1 - validIdentifiers.count)
        }
        validIdentifiers[Int(i)] = true
        remember(s, i, checked: true)
        return i
    }

    /// The id of a discount type (any string: no pattern to check).
    private func discountType(_ s: UnsafeRawBufferPointer) -> Int32 {
        if let i = remembered(s, checked: false) { return i }
        let i = table.intern(s)
        remember(s, i, checked: false)
        return i
    }

    /// Ids remembered by their bytes, for the strings of eight bytes or more that repeat on
    /// nearly every row (groups, products, offers, discount types): their length and first and
    /// last eight bytes, then the bytes between against the table, match for less than a hash
    /// of the whole string. One entry a slot; a newcomer takes the slot over.
    private struct Memo {
        var length: Int = -1
        var first: UInt64 = 0
        var last: UInt64 = 0
        var id: Int32 = -1
        /// Whether the string matched the identifier pattern.
        var checked = false
    }
    @exclusivity(unchecked) private var memo = [Memo](repeating: Memo(), count: 64)

    @inline(__always)
    private static func memoKey(_ s: UnsafeRawBufferPointer) -> (slot: Int, first: UInt64, last: UInt64) {
        let first = s.loadUnaligned(as: UInt64.self)
        let last = s.loadUnaligned(fromByteOffset: s.count - 8, as: UInt64.self)
        let h = (first ^ (last &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(s.count)) &* 0xBF58_476D_1CE4_E5B9
        return (Int(truncatingIfNeeded: h >> 58), first, last)
    }

    /// The id of `s` if remembered (and, with `checked`, known to match the identifier pattern).
    @inline(__always)
    private func remembered(_ s: UnsafeRawBufferPointer, checked: Bool) -> Int32? {
        guard s.count >= 8 else { return nil }
        let key = TransactionDecoder.memoKey(s)
        let e = memo[key.slot]
        // Up to sixteen bytes, the first and last words are the whole string.
        guard e.length == s.count, e.first == key.first, e.last == key.last, e.checked || !checked,
            s.count <= 16 || table.equals(e.id, s)
        else { return nil }
        return e.id
    }

    private func remember(_ s: UnsafeRawBufferPointer, _ id: Int32, checked: Bool) {
        guard s.count >= 8 else { return }
        let key = TransactionDecoder.memoKey(s)
        let e = memo[key.slot]
        memo[key.slot] = Memo(
            length: s.count, first: key.first, last: key.last, id: id, checked: checked || (e.id == id && e.checked))
    }

    /// Interned storefronts (and currencies) by their three capital letters (26³ slots, -1
    /// until first seen): every row names one, and a lookup here costs less than hashing it.
    @exclusivity(unchecked) private var storefronts = [Int32](repeating: -1, count: 26 * 26 * 26)

    /// The id of `code`, three capital letters.
    @inline(__always)
    private func storefront(_ code: UnsafeRawBufferPointer) -> Int32 {
        let slot = (Int(code[0]) - 65) * 676 + (Int(code[1]) - 65) * 26 + (Int(code[2]) - 65)
        if storefronts[slot] < 0 { storefronts[slot] = table.intern(code) }
        return storefronts[slot]
    }

    /// A required decimal-style id (transactionId, originalTransactionId). A canonical decimal
    /// is a valid identifier as it stands; only other ids are checked against the pattern.
    @inline(__always)
    private func transactionKey(_ k: Key) throws -> TransactionKey {
        let s = try string(k, required: true)!
        if let v = TransactionKey.decimal(s) { return TransactionKey(raw: v) }
        return TransactionKey(try identifier(k, required: true)!, table: table)
    }

    /// A value quoted in a reason: its first 40 characters, controls escaped (docs/rules.md §6).
    private func excerpt(_ s: UnsafeRawBufferPointer) -> String {
        ControlEscape.escaped(String(decoding: s, as: UTF8.self).prefix(40))
    }

    @inline(__always) private static func equals(_ s: UnsafeRawBufferPointer, _ lit: StaticString) -> Bool {
        s.count == lit.utf8CodeUnitCount && memcmp(s.baseAddress!, lit.utf8Start, s.count) == 0
    }

    /// `price`, `currency`, `revocationType` and `revocationPercentage` (docs/rules.md §13.1):
    /// a price is a non-negative integer, a currency three capital letters, a percentage 0–100 000.
    @inline(__always)
    private func amount(_ t: inout Transaction) throws {
        if let p = try int(.price) {
            guard p >= 0 else { throw Rejection(reason: "field price: \(p) is negative") }
            t.price = p
        }
        if let c = try string(.currency) {
            guard Identifier.isStorefront(c.bytes) else {
                throw Rejection(reason: "field currency: '\(excerpt(c))' is not three capital letters")
            }
            t.currency = storefront(c)
        }
        if let r = try string(.revocationType) {
            t.revocationType =
                TransactionDecoder.equals(r, "REFUND_FULL")
                ? .refundFull
                : TransactionDecoder.equals(r, "REFUND_PRORATED")
                    ? .refundProrated : TransactionDecoder.equals(r, "FAMILY_REVOKE") ? .familyRevoke : .unknown
        }
        if let p = try int(.revocationPercentage) {
            guard p >= 0 && p <= 100_000 else {
                throw Rejection(reason: "field revocationPercentage: \(p) is not 0–100000")
            }
            t.revocationPercentage = Int32(p)
        }
    }

    package func decode(_ line: UnsafeRawBufferPointer) -> Outcome {
        guard scanner.scan(line) else { return .rejected("invalid JSON: \(scanner.error)") }
        return scanner.withValues { build($0) }
    }

    func build(_ fields: [ScannedValue]) -> Outcome {
        fields.withUnsafeBufferPointer { build($0) }
    }

    /// Validates the §2.1 fields of one row (indexed by ``Key``) and builds the transaction;
    /// every export format ends here, so they all reject alike.
    func build(_ fields: UnsafeBufferPointer<ScannedValue>) -> Outcome {
        assert(fields.count == Key.allCases.count)
        values = fields
        defer { values = UnsafeBufferPointer(start: nil, count: 0) }
        do {
            if let type = try string(.type), !TransactionDecoder.equals(type, "Auto-Renewable Subscription") {
                return .nonSubscription
            }
            let tx = try transactionKey(.transactionId)
            let orig = try transactionKey(.originalTransactionId)
            let group = try id(.subscriptionGroupIdentifier, required: true)
            let product = try id(.productId, required: true)
            let purchase = try int(.purchaseDate, required: true)!
            let expires = try int(.expiresDate, required: true)!
            if expires < purchase { throw Rejection(reason: "expiresDate before purchaseDate") }
            var t = Transaction(
                transactionId: tx, originalTransactionId: orig, subscriptionGroupId: group, productId: product,
                purchaseDate: purchase, expiresDate: expires)
            if let env = try string(.environment) {
                t.production =
                    countsProduction
                    ? TransactionDecoder.equals(env, "Production") : env.elementsEqual(environment.utf8)
            } else if !countsProduction {
                t.production = false
            }
            if let own = try string(.inAppOwnershipType) {
                t.ownership =
                    TransactionDecoder.equals(own, "PURCHASED")
                    ? .purchased : TransactionDecoder.equals(own, "FAMILY_SHARED") ? .familyShared : .unknown
            }
            t.offerType = try offerType()
            t.offerIdentifier = try id(.offerIdentifier)
            if let d = try string(.offerDiscountType) {
                t.offerDiscountType = discountType(d)
                t.isFreeTrial = TransactionDecoder.equals(d, "FREE_TRIAL")
            }
            t.revocationDate = try int(.revocationDate) ?? Transaction.never
            _ = try int(.revocationReason)
            switch value(.isUpgraded) {
            case .absent, .null: break
            case .bool(let b): t.isUpgraded = b
            case let v: throw Rejection(reason: "field isUpgraded: expected a boolean, found \(v.typeName)")
            }
            if let sf = try string(.storefront) {
                guard Identifier.isStorefront(sf.bytes) else {
                    throw Rejection(reason: "field storefront: '\(excerpt(sf))' is not three capital letters")
                }
                t.storefront = storefront(sf)
            }
            if let token = try string(.appAccountToken) {
                guard Identifier.isUUID(token.bytes) else {
                    throw Rejection(reason: "field appAccountToken: '\(excerpt(token))' is not a UUID")
                }
                t.appAccountToken = AppAccountToken(uuid: token, table: table)
            }
            t.signedDate = try int(.signedDate) ?? Transaction.unsigned
            try amount(&t)
            return .row(t)
        } catch let r as Rejection {
            return .rejected(r.reason)
        } catch {
            return .rejected("\(error)")
        }
    }
}
