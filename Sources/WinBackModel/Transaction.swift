/// One transaction as the pipeline holds it: integers and interned ids only.
///
/// The readable form of a `JWSTransactionDecodedPayload` lives at the edges (`explain`);
/// this compact record is what millions of rows are kept as.
/// See https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
public struct Transaction: Sendable, Equatable {
    /// Sentinel for an absent id.
    public static let none: Int32 = -1
    /// Sentinel for an absent revocationDate: never revoked.
    public static let never: Int64 = .max
    /// Sentinel for an absent signedDate: older than any.
    public static let unsigned: Int64 = .min
    /// Sentinel for an absent `price` (prices are never negative).
    public static let unpriced: Int64 = -1
    /// Sentinel for an absent `revocationPercentage`.
    public static let noPercentage: Int32 = -1

    public var purchaseDate: Int64
    public var expiresDate: Int64
    public var revocationDate: Int64 = Transaction.never
    public var signedDate: Int64 = Transaction.unsigned
    public var transactionId: TransactionKey
    /// The customer's id within its subscription group, kept like ``transactionId``.
    public var originalTransactionId: TransactionKey
    /// ``appAccountToken``'s two words (its kind is in ``packed``).
    @usableFromInline var tokenHigh: UInt64 = 0
    @usableFromInline var tokenLow: UInt64 = 0
    /// `price`: milliunits of ``currency`` actually charged; ``unpriced`` when absent.
    public var price: Int64 = Transaction.unpriced
    public var subscriptionGroupId: Int32
    public var productId: Int32
    public var offerIdentifier: Int32 = Transaction.none
    /// Interned raw `offerDiscountType`; `none` when absent.
    public var offerDiscountType: Int32 = Transaction.none
    public var storefront: Int32 = Transaction.none
    /// Interned ISO 4217 `currency` of ``price``; `none` when absent (docs/rules.md §13.1).
    public var currency: Int32 = Transaction.none
    @usableFromInline var offerTypeValue: Int32 = 0
    /// The small fields in one word, so that a row takes 104 bytes: from the lowest bit,
    /// revocationPercentage + 1 (17 bits, 0 when absent), revocationType (3), ownership (2),
    /// the flags (3) and the token's kind (2).
    @usableFromInline var packed: UInt32 = 1 << 22

    // Constants as inlinable properties: code of other modules that reads a row inlines them
    // (a stored static is reached through a call).
    @inlinable static var percentageMask: UInt32 { 0x1_FFFF }
    @inlinable static var revocationTypeShift: UInt32 { 17 }
    @inlinable static var ownershipShift: UInt32 { 20 }
    /// Where the flags begin (``packed``'s initial value sets the production flag there).
    @inlinable static var flagsShift: UInt32 { 22 }
    @inlinable static var tokenKindShift: UInt32 { 25 }

    @inlinable @inline(__always) func bits(_ shift: UInt32, _ mask: UInt32) -> UInt32 { packed >> shift & mask }
    @inlinable @inline(__always) mutating func setBits(_ shift: UInt32, _ mask: UInt32, _ value: UInt32) {
        packed = packed & ~(mask << shift) | (value & mask) << shift
    }

    /// Raw `offerType`; 0 when absent. See ``OfferType``. A negative value -(id + 1) stands
    /// for an offer type that came as a name or as a number outside 0…Int32.max, its text
    /// interned (id in the string table). Kept in 32 bits: setting a value outside them stops.
    @inlinable
    public var offerType: Int64 {
        @inline(__always) get { Int64(offerTypeValue) }
        set {
            precondition(newValue >= Int64(Int32.min) && newValue <= Int64(Int32.max), "an offerType of 32 bits")
            offerTypeValue = Int32(newValue)
        }
    }

    @inlinable
    public var appAccountToken: AppAccountToken {
        @inline(__always) get {
            AppAccountToken(
                high: tokenHigh, low: tokenLow,
                kind: AppAccountToken.Kind(rawValue: UInt8(bits(Transaction.tokenKindShift, 3)))!)
        }
        set {
            tokenHigh = newValue.high
            tokenLow = newValue.low
            setBits(Transaction.tokenKindShift, 3, UInt32(newValue.kind.rawValue))
        }
    }

    @inlinable
    public var ownership: Ownership {
        @inline(__always) get { Ownership(rawValue: UInt8(bits(Transaction.ownershipShift, 3)))! }
        set { setBits(Transaction.ownershipShift, 3, UInt32(newValue.rawValue)) }
    }

    /// `revocationType` (docs/rules.md §13.1); `.none` when absent.
    @inlinable
    public var revocationType: RevocationType {
        @inline(__always) get { RevocationType(rawValue: UInt8(bits(Transaction.revocationTypeShift, 7)))! }
        set { setBits(Transaction.revocationTypeShift, 7, UInt32(newValue.rawValue)) }
    }

    /// `revocationPercentage`: milliunits of a percent (0–100 000), ``noPercentage`` when absent.
    /// Setting a value outside them stops (readers reject such rows first).
    @inlinable
    public var revocationPercentage: Int32 {
        @inline(__always) get { Int32(bitPattern: packed & Transaction.percentageMask) - 1 }
        set {
            precondition(newValue >= -1 && newValue <= 100_000, "a revocationPercentage of 0–100000")
            setBits(0, Transaction.percentageMask, UInt32(newValue + 1))
        }
    }

    @inlinable static var productionFlag: UInt8 { 1 }
    @inlinable static var upgradedFlag: UInt8 { 2 }
    @inlinable static var freeTrialFlag: UInt8 { 4 }

    @inlinable @inline(__always) var flags: UInt8 { UInt8(bits(Transaction.flagsShift, 7)) }
    @inlinable @inline(__always) func flag(_ f: UInt8) -> Bool { flags & f != 0 }
    @inlinable @inline(__always) mutating func set(_ f: UInt8, _ on: Bool) {
        setBits(Transaction.flagsShift, 7, UInt32(on ? flags | f : flags & ~f))
    }

    /// The production, upgraded and free-trial flags as one byte (part files store it).
    @inlinable
    package var rawFlags: UInt8 {
        get { flags }
        set { setBits(Transaction.flagsShift, 7, UInt32(newValue)) }
    }

    /// `environment == Production` (or absent).
    @inlinable
    public var production: Bool {
        get { flag(Transaction.productionFlag) }
        set { set(Transaction.productionFlag, newValue) }
    }
    @inlinable
    public var isUpgraded: Bool {
        get { flag(Transaction.upgradedFlag) }
        set { set(Transaction.upgradedFlag, newValue) }
    }
    /// `offerDiscountType == FREE_TRIAL`; kept as a flag so the timeline needs no lookup.
    @inlinable
    public var isFreeTrial: Bool {
        get { flag(Transaction.freeTrialFlag) }
        set { set(Transaction.freeTrialFlag, newValue) }
    }

    @inlinable
    public init(
        transactionId: TransactionKey, originalTransactionId: TransactionKey, subscriptionGroupId: Int32,
        productId: Int32, purchaseDate: Int64, expiresDate: Int64
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.subscriptionGroupId = subscriptionGroupId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
    }

    /// Revoked at `t`: a revocation known at `t` (strictly before it) that is not an upgrade.
    @inlinable @inline(__always)
    public func isRevoked(at t: Int64) -> Bool {
        revocationDate < t && !isUpgraded
    }

    /// Whether the row counts for the customer at `t` (docs/rules.md §3 rules 1–3): PURCHASED
    /// (never family shared) and bought before `t`.
    @inlinable @inline(__always)
    public func isKnownPurchase(at t: Int64) -> Bool {
        ownership == .purchased && purchaseDate < t
    }

    /// Where the row's access period ends at `t` (docs/rules.md §3 rule 3): at expiresDate, or
    /// at the revocation when one known at `t` cut it short. The period is empty when this is
    /// not after purchaseDate.
    @inlinable @inline(__always)
    public func accessEnd(at t: Int64) -> Int64 {
        isRevoked(at: t) ? min(expiresDate, revocationDate) : expiresDate
    }

    /// Whether the row's period is paid at `t` (docs/rules.md §3 rule 3): not a free trial and
    /// not revoked.
    @inlinable @inline(__always)
    public func isPaid(at t: Int64) -> Bool {
        !isFreeTrial && !isRevoked(at: t)
    }

    /// Rewrites every id through `map` (after merging a reader's table into the global one).
    package mutating func remap(_ map: [Int32]) { remap(map.span) }

    /// Rewrites every id through `map`, read in place.
    @inline(__always)
    package mutating func remap(_ map: Span<Int32>) {
        transactionId.remap(map)
        originalTransactionId.remap(map)
        var c = terms
        c.remap(map)
        terms = c
        if bits(Transaction.tokenKindShift, 3) == UInt32(AppAccountToken.Kind.interned.rawValue) {
            tokenLow = UInt64(UInt32(bitPattern: map[Int(tokenLow)]))
        }
    }

    /// The columns many rows share (``RowTerms``): setting them leaves the token's kind.
    @inlinable
    public var terms: RowTerms {
        @inline(__always) get {
            RowTerms(
                subscriptionGroupId: subscriptionGroupId, productId: productId, offerIdentifier: offerIdentifier,
                offerDiscountType: offerDiscountType, storefront: storefront, currency: currency,
                offerTypeValue: offerTypeValue, packed: packed & RowTerms.mask, price: price)
        }
        @inline(__always) set {
            subscriptionGroupId = newValue.subscriptionGroupId
            productId = newValue.productId
            offerIdentifier = newValue.offerIdentifier
            offerDiscountType = newValue.offerDiscountType
            storefront = newValue.storefront
            currency = newValue.currency
            offerTypeValue = newValue.offerTypeValue
            packed = packed & ~RowTerms.mask | newValue.packed
            price = newValue.price
        }
    }
}

/// `revocationType` (docs/rules.md §13.1): how much of a revoked row's price went back.
/// See https://developer.apple.com/documentation/appstoreserverapi/revocationtype
public enum RevocationType: UInt8, Sendable {
    case none
    case refundFull
    case refundProrated
    case familyRevoke
    /// A value this project does not know: refunded in full, like a revocation without a type.
    case unknown
}

/// `inAppOwnershipType`; an unknown raw value matches nothing.
/// See https://developer.apple.com/documentation/appstoreserverapi/inappownershiptype
public enum Ownership: UInt8, Sendable {
    case purchased
    case familyShared
    case unknown
}

/// `offerType` wire values. See https://developer.apple.com/documentation/appstoreserverapi/offertype
public enum OfferType: Int64, Sendable, CaseIterable {
    case introductory = 1
    case promotional = 2
    case offerCode = 3
    case winBack = 4

    /// The report label of a raw offer type: `introductory` … `win_back`, `unknown:N`, or
    /// `unknown:<name>` for a named type this project does not know.
    public static func label(_ raw: Int64, strings: StringTable) -> String {
        raw < 0 ? "unknown:" + strings.string(Int32(-raw - 1)) : label(raw)
    }

    /// The report label of a numeric offer type: `introductory` … `win_back`, or `unknown:N`.
    public static func label(_ raw: Int64) -> String {
        switch OfferType(rawValue: raw) {
        case .introductory: return "introductory"
        case .promotional: return "promotional"
        case .offerCode: return "offer_code"
        case .winBack: return "win_back"
        case nil: return "unknown:\(raw)"
        }
    }
}
