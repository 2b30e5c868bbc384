/// A report row that is a sum over customers: the rows of two disjoint sets of customers (two
/// shards, docs/rules.md §8.1) with the same key add up to the row of both, so reports merge
/// by key, whatever report the rows belong to.
package protocol SummableRow {
    associatedtype Key: Hashable
    /// What tells the row from the others of its report: its fields but the counts.
    var key: Key { get }
    /// The row of both sets of customers; `a` and `b` have the same key.
    static func + (a: Self, b: Self) -> Self
}

/// A summable row whose counts are whole numbers, each in a field of its own: two rows add up
/// count by count, and the fields that are not counts tell the row from the others.
package protocol CountedRow: SummableRow {
    /// The row's counts.
    static var counts: [WritableKeyPath<Self, Int> & Sendable] { get }
}

extension CountedRow {
    package static func + (a: Self, b: Self) -> Self {
        var sum = a
        for c in counts { sum[keyPath: c] += b[keyPath: c] }
        return sum
    }
}

extension CountedRow where Self: Hashable {
    /// Every field but the counts: the row with nothing counted.
    package var key: Self {
        var key = self
        for c in Self.counts { key[keyPath: c] = 0 }
        return key
    }
}

extension Array where Element: SummableRow {
    /// The rows of both reports, those with equal keys summed into one: in the order their
    /// keys first appear. For a report whose rows are whichever keys were met; sort afterwards.
    package func summed(byKey other: [Element]) -> [Element] {
        var rows = self
        var index: [Element.Key: Int]?
        rows.add(byKey: other, index: &index)
        return rows
    }

    /// Adds `other`'s rows to these as ``summed(byKey:)`` does. `index` says where each key's
    /// row is: nil the first time, when these rows are summed by key too and it is made, then
    /// kept for the next call, so that many reports are added up without indexing the sum again
    /// each time (a merge of many shards).
    package mutating func add(byKey other: [Element], index: inout [Element.Key: Int]?) {
        var at: [Element.Key: Int]
        if let index {
            at = index
        } else {
            at = [:]
            let own = self
            removeAll(keepingCapacity: true)
            add(own, at: &at)
        }
        index = nil
        add(other, at: &at)
        index = at
    }

    private mutating func add(_ other: [Element], at index: inout [Element.Key: Int]) {
        for row in other {
            if let i = index[row.key] {
                self[i] = self[i] + row
            } else {
                index[row.key] = count
                append(row)
            }
        }
    }

    /// The rows of two reports of one catalog and window, line by line: nil unless both have
    /// the same keys in the same order.
    package func summed(lineByLine other: [Element]) -> [Element]? {
        guard count == other.count, zip(self, other).allSatisfy({ $0.key == $1.key }) else { return nil }
        return zip(self, other).map(+)
    }
}

extension Dictionary where Value: SummableRow {
    /// Adds another worker's tally of a report (rows by a key of interned ids) to this one:
    /// rows under the same key summed.
    mutating func add(_ other: Self) {
        for (k, r) in other { self[k] = self[k].map { $0 + r } ?? r }
    }

    /// The tally's rows, each given its names by `name` from its key: a tally's rows carry
    /// only the counts.
    func named(_ name: (Key, inout Value) -> Void) -> [Value] {
        map { key, row in
            var row = row
            name(key, &row)
            return row
        }
    }
}
