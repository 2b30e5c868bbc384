import WinBackModel
import WinBackRules
import WinBackSupport

/// One row of a segment list (docs/rules.md §4.1) as the steps after the segment files take
/// it — the changes and the destinations — its fields unescaped, as bytes. A source refills one
/// row in place, so reading a list costs no allocation per row.
package struct SegmentRow: Sendable {
    package var group: [UInt8] = []
    package var original: [UInt8] = []
    /// The appAccountToken, empty when the customer has none.
    package var token: [UInt8] = []
    package var storefront: [UInt8] = []
    package var product: [UInt8] = []
    /// paid_months, paid_run_start, last_subscribed_end and months_since_last_subscribed as
    /// the segment CSV writes them (decimal, ISO 8601; an empty start when there is none).
    package var paidMonths: [UInt8] = []
    package var paidRunStart: [UInt8] = []
    package var lastSubscribedEnd: [UInt8] = []
    package var monthsSince: [UInt8] = []
    /// The offer the row is listed under, and its rank among the customer's offers.
    package var offer: [UInt8] = []
    package var rank: [UInt8] = []
    /// The eligible offers' ids, best first, joined by `;`.
    package var eligible: [UInt8] = []
    package var offerURL: [UInt8] = []
    /// apple_eligible: `yes`, `no` or empty.
    package var apple: [UInt8] = []

    /// The row's fields in the order of ``SegmentWriter/columns``.
    package var fields: [[UInt8]] {
        [
            group, original, token, storefront, product, paidMonths, paidRunStart, lastSubscribedEnd, monthsSince,
            offer, rank, eligible, offerURL, apple,
        ]
    }

    package init() {}

    /// The customer order of the segment lists (docs/rules.md §4.1): bytewise by group, then
    /// originalTransactionId. Negative, zero or positive.
    package static func compare(group a: [UInt8], _ ao: [UInt8], group b: [UInt8], _ bo: [UInt8]) -> Int {
        let g = Bytes.compare(a, b)
        return g != 0 ? g : Bytes.compare(ao, bo)
    }

    /// Fills the row from a segment CSV record's fields (``SegmentWriter/columns``, unquoted).
    package mutating func fill(fields f: [[UInt8]]) {
        (group, original, token, storefront, product) = (f[0], f[1], f[2], f[3], f[4])
        (paidMonths, paidRunStart, lastSubscribedEnd, monthsSince) = (f[5], f[6], f[7], f[8])
        (offer, rank, eligible, offerURL, apple) = (f[9], f[10], f[11], f[12], f[13])
    }
}

/// The rows of a run's segment lists, in customer order, handed to the steps after the
/// writers without a file read back: a run in memory gives its evaluation's
/// (``SegmentWriter``), a merge the shards' files merged again.
package protocol SegmentSource: Sendable {
    /// Calls `body` with every row of list `name` (an offer id, `best-offer`, the holdout), in
    /// customer order; a list the run does not write has none. The row is valid during the call.
    /// With `keysOnly`, only its group, originalTransactionId and offer need be filled (the
    /// changes' join): a source may leave the other fields as they were.
    func forEachRow(of name: String, keysOnly: Bool, _ body: (SegmentRow) throws -> Void) throws
}

extension SegmentSource {
    /// Every field of every row of list `name`.
    package func forEachRow(of name: String, _ body: (SegmentRow) throws -> Void) throws {
        try forEachRow(of: name, keysOnly: false, body)
    }
}
