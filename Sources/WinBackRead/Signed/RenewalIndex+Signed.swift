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
}
