/// Renewal information by originalTransactionId, each list ordered by signedDate.
public struct RenewalIndex: Sendable {
    package var byOriginal: [TransactionKey: [RenewalInfo]] = [:]

    public init() {}

    public mutating func add(originalTransactionId: TransactionKey, _ info: RenewalInfo) {
        byOriginal[originalTransactionId, default: []].append(info)
    }

    /// Rewrites interned ids through `map` (after their table was merged into another).
    package mutating func remap(_ map: Span<Int32>) {
        var out: [TransactionKey: [RenewalInfo]] = [:]
        out.reserveCapacity(byOriginal.count)
        for (k, list) in byOriginal {
            var key = k
            key.remap(map)
            out[key] = list
        }
        byOriginal = out
    }

    /// Orders each list by signedDate (stable: for equal dates the later read wins).
    public mutating func finish() {
        for (k, list) in byOriginal where list.count > 1 {
            byOriginal[k] = list.enumerated().sorted {
                $0.element.signedDate != $1.element.signedDate
                    ? $0.element.signedDate < $1.element.signedDate : $0.offset < $1.offset
            }.map(\.element)
        }
    }

    /// The newest renewal info with signedDate ≤ t (docs/rules.md §2.2).
    @inline(__always)
    public func known(at t: Int64, originalTransactionId: TransactionKey) -> RenewalInfo? {
        guard let list = byOriginal[originalTransactionId] else { return nil }
        var found: RenewalInfo?
        for info in list {
            if info.signedDate <= t { found = info } else { break }
        }
        return found
    }

    public var isEmpty: Bool { byOriginal.isEmpty }
}

/// The renewal information that applies at the as-of instant (docs/rules.md §2.2).
/// See https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfodecodedpayload
public struct RenewalInfo: Sendable, Equatable, Codable {
    public var signedDate: Int64 = Transaction.unsigned
    public var isInBillingRetryPeriod: Bool = false
    public var gracePeriodExpiresDate: Int64? = nil
    public var autoRenewStatus: Int64? = nil
    /// Apple's own list, shown beside the computed one by `explain`.
    public var eligibleWinBackOfferIds: [String]? = nil

    public init(
        signedDate: Int64 = Transaction.unsigned, isInBillingRetryPeriod: Bool = false,
        gracePeriodExpiresDate: Int64? = nil
    ) {
        self.signedDate = signedDate
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
    }
}
