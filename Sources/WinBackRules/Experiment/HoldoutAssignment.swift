import Crypto
import Foundation
import WinBackModel

/// Which arm of a holdout experiment a customer is in: a pure function of the experiment's name,
/// the customer's subscription group and originalTransactionId, the same in every run, thread,
/// shard and machine, and reproducible in SQL.
///
/// bucket = the first 8 bytes of SHA-256(name + "\n" + group + "\n" + originalTransactionId)
/// (UTF-8), read as a big-endian unsigned integer, mod 10 000. A customer is held out when the
/// bucket is below the holdout in basis points (10 % = 1 000), else in treatment.
package struct HoldoutAssignment: Sendable, Equatable {
    /// The experiment's name.
    package let name: String
    /// The share held out, in basis points (1–5 000).
    package let basisPoints: Int
    /// What every customer's hashed bytes begin with: the name and a line feed.
    private let prefix: [UInt8]

    package init(name: String, basisPoints: Int) {
        self.name = name
        self.basisPoints = basisPoints
        prefix = Array(name.utf8) + [0x0A]
    }

    /// The customer's bucket, 0..<10 000.
    package func bucket(group: String, originalTransactionId: String) -> Int {
        HoldoutAssignment.bucket(SHA256.hash(data: prefix + Array((group + "\n" + originalTransactionId).utf8)))
    }

    /// Whether the customer is held out (in no audience).
    package func isHeldOut(group: String, originalTransactionId: String) -> Bool {
        bucket(group: group, originalTransactionId: originalTransactionId) < basisPoints
    }

    /// The bucket of customer `k` of `customers`; `scratch` holds the hashed bytes (reused).
    package func bucket(customer k: Int, of customers: CustomerRows, scratch: inout [UInt8]) -> Int {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: prefix)
        customers.strings.withBytes(customers.groups[k]) { scratch.append(contentsOf: $0) }
        scratch.append(0x0A)
        customers.originalTransactionIds[k].withBytes(in: customers.strings) { scratch.append(contentsOf: $0) }
        return HoldoutAssignment.bucket(SHA256.hash(data: scratch))
    }

    /// Whether customer `k` of `customers` is held out.
    package func isHeldOut(customer k: Int, of customers: CustomerRows, scratch: inout [UInt8]) -> Bool {
        bucket(customer: k, of: customers, scratch: &scratch) < basisPoints
    }

    /// The first 8 bytes of a digest, big-endian, mod 10 000.
    static func bucket(_ digest: SHA256.Digest) -> Int {
        let first = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(first % 10_000)
    }
}
