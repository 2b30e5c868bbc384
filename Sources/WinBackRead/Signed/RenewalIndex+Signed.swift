import WinBackModel

extension RenewalIndex {
    /// The renewal info found in transaction files, each file's keys mapped to the run's ids
    /// through its map.
    init(_ files: [(renewals: [(key: TransactionKey, info: RenewalInfo)], map: [Int32])]) {
        self.init()
        for (list, map) in files where !list.isEmpty {
            for (k, info) in list {
                var key = k
                key.remap(map.span)
                add(originalTransactionId: key, info)
            }
        }
        finish()
    }

    /// Adds `other`'s renewal info after this one's: for equal signedDates, `other`'s wins.
    package mutating func merge(_ other: RenewalIndex) {
        guard !other.byOriginal.isEmpty else { return }
        // Decoded inputs hold no renewal info among their transactions: nothing to merge.
        guard !byOriginal.isEmpty else {
            self = other
            return
        }
        for (k, list) in other.byOriginal { byOriginal[k, default: []] += list }
        finish()
    }
}
