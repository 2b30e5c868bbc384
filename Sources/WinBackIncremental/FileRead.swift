import WinBackModel
import WinBackPipeline
import WinBackRead

/// A file a run read, as a partition task's marker and an incremental state's ledger record it:
/// its index and what it counted (the rows it gave, before deduplication, an incremental state
/// keeps), written as one object.
package struct FileRead: Codable {
    /// Index of the file in sorted path order.
    package var file: Int
    package var counts: FileCounts

    package init(file: Int, counts: FileCounts) {
        self.file = file
        self.counts = counts
    }

    private enum CodingKeys: String, CodingKey { case file }

    package init(from decoder: Decoder) throws {
        file = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .file)
        counts = try FileCounts(from: decoder)
    }

    package func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(file, forKey: .file)
        try counts.encode(to: encoder)
    }
}

/// Renewal info found among the transactions (signed files), as a partition task's marker and an
/// incremental state's ledger keep it; every shard reads it and keeps that of its own
/// customers: in file order, then the order read.
package struct FoundRenewal: Codable {
    package var file: Int
    package var originalTransactionId: String
    package var info: RenewalInfo

    package init(file: Int, originalTransactionId: String, info: RenewalInfo) {
        self.file = file
        self.originalTransactionId = originalTransactionId
        self.info = info
    }
}
