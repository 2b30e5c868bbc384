/// Renewal information by originalTransactionId, each list ordered by signedDate.
public struct RenewalIndex: Sendable {
    var byOriginal: [TransactionKey: [RenewalInfo]] = [:]

    public init() {}

    public mutating func add(originalTransactionId: TransactionKey, _ info: RenewalInfo) {
        byOriginal[originalTransactionId, default: []].append(info)
    }

    /// Rewrites interned ids through `map` (after their table was merged into another).
    mutating func remap(_ map: UnsafeBufferPointer<Int32>) {
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
