/// Renewal information by originalTransactionId, each list ordered by signedDate.
public struct RenewalIndex: Sendable {
    /// A renewal info and its originalTransactionId's key (``TransactionKey/raw``).
    private struct Entry: Sendable {
        var key: Int64
        var info: RenewalInfo
    }

    /// Every renewal info. Once finished (``finish()``): grouped by key, a key's entries
    /// `entries[starts[g]..<starts[g + 1]]` for its group g in ``groups``, ordered by
    /// signedDate (for equal dates, in the order they were added); before, in that order.
    private var entries: [Entry] = []
    private var starts: [Int32] = [0]
    /// Key → its group: one flat map, no list a customer.
    private var groups = Int64Map(capacity: 0)
    /// Whether ``entries`` is grouped as ``finish()`` leaves it.
    private var finished = true

    public init() {}

    public mutating func add(originalTransactionId: TransactionKey, _ info: RenewalInfo) {
        entries.append(Entry(key: originalTransactionId.raw, info: info))
        finished = false
    }

    /// Rewrites interned ids through `map` (after their table was merged into another).
    package mutating func remap(_ map: Span<Int32>) {
        for i in entries.indices {
            var key = TransactionKey(raw: entries[i].key)
            key.remap(map)
            entries[i].key = key.raw
        }
        finish()
    }

    /// Groups the entries by key, each key's by signedDate (stable: for equal dates the later
    /// added wins), and indexes the groups.
    public mutating func finish() {
        let sorted = entries.enumerated().sorted {
            ($0.element.key, $0.element.info.signedDate, $0.offset) < (
                $1.element.key, $1.element.info.signedDate, $1.offset
            )
        }
        entries = sorted.map(\.element)
        starts = [0]
        var distinct = 0
        for i in entries.indices where i == 0 || entries[i].key != entries[i - 1].key { distinct += 1 }
        groups = Int64Map(capacity: distinct)
        for i in entries.indices where i == 0 || entries[i].key != entries[i - 1].key {
            if i > 0 { starts.append(Int32(i)) }
            _ = groups.insert(entries[i].key, UInt32(groups.count))
        }
        if !entries.isEmpty { starts.append(Int32(entries.count)) }
        finished = true
    }

    /// The newest renewal info with signedDate ≤ t (docs/rules.md §2.2).
    @inline(__always)
    public func known(at t: Int64, originalTransactionId: TransactionKey) -> RenewalInfo? {
        var found: RenewalInfo?
        guard finished else {
            // Not grouped yet: every entry of the key, the newest (the later added of equal dates).
            for e in entries where e.key == originalTransactionId.raw && e.info.signedDate <= t {
                if found.map({ $0.signedDate <= e.info.signedDate }) ?? true { found = e.info }
            }
            return found
        }
        guard let g = groups.find(originalTransactionId.raw) else { return nil }
        for i in Int(starts[Int(g)])..<Int(starts[Int(g) + 1]) {
            if entries[i].info.signedDate <= t { found = entries[i].info } else { break }
        }
        return found
    }

    /// A hint to fetch the slot ``known(at:originalTransactionId:)`` looks `originalTransactionId`
    /// up in first: a loop over customers asks for the next ones' ahead, so that the index,
    /// far larger than the caches, is not waited on for each customer.
    @inline(__always)
    public func prefetch(originalTransactionId: TransactionKey) {
        guard finished, !entries.isEmpty else { return }
        groups.withLookup { $0.prefetch(originalTransactionId.raw) }
    }

    /// The renewal info of `originalTransactionId`, oldest first (for equal dates, in the
    /// order added); call once finished.
    package func infos(of originalTransactionId: TransactionKey) -> [RenewalInfo] {
        precondition(finished, "an index is read once finished")
        guard let g = groups.find(originalTransactionId.raw) else { return [] }
        return entries[Int(starts[Int(g)])..<Int(starts[Int(g) + 1])].map(\.info)
    }

    /// How many originalTransactionIds have renewal info; call once finished.
    package var keys: Int {
        precondition(finished, "an index is read once finished")
        return starts.count - 1
    }

    /// Adds `other`'s renewal info after this one's (for equal signedDates, `other`'s wins)
    /// and finishes.
    package mutating func merge(_ other: RenewalIndex) {
        guard !other.entries.isEmpty else { return }
        guard !entries.isEmpty else {
            self = other
            if !finished { finish() }
            return
        }
        entries += other.entries
        finish()
    }

    public var isEmpty: Bool { entries.isEmpty }
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
