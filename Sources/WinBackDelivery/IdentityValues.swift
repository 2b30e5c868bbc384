import Crypto
import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The identity values one destination file set holds tonight (docs/rules.md §10.5), as a set
/// of bytes: an ``IdentityIndex`` with no columns, the values its keys. A value costs its bytes
/// and a slot of the table, never a Swift `String` each, also in a memory-bounded run (§6.2).
package struct IdentityValueSet {
    private let index = IdentityIndex(columns: 0)

    /// Adds `value` (at most ``IdentityValues/maxBytes`` bytes: checked when it was read).
    package func insert(_ value: String) {
        var v = value
        v.withUTF8 { index.insert(key: UnsafeRawBufferPointer($0), values: []) }
    }

    /// Adds `value`, when it may be an identity value at all (a longer one is never tonight's).
    package func insert(bytes value: [UInt8]) {
        guard value.count <= IdentityValues.maxBytes else { return }
        value.withUnsafeBytes { index.insert(key: $0, values: []) }
    }

    package func contains(bytes value: [UInt8]) -> Bool {
        value.withUnsafeBytes { index.find($0) != nil }
    }

    /// Adds `value` (at most ``IdentityValues/maxBytes`` bytes: a bucket's record).
    package func insert(raw value: UnsafeRawBufferPointer) { index.insert(key: value, values: []) }

    package func contains(raw value: UnsafeRawBufferPointer) -> Bool { index.find(value) != nil }

    /// Distinct values held.
    package var count: Int { index.count }
}

/// Tonight's identity values of one destination file set (docs/rules.md §10.5): a set in
/// memory, or, in a memory-bounded run, records split on disk by the hash of the value, so that
/// tonight's audience is never held whole (§6.2). The exits are then found bucket by bucket
/// (``exits(_:)``).
package final class TonightValues {
    private enum Storage {
        case memory(IdentityValueSet)
        /// The work folder of the buckets.
        case disk(String)
    }
    private let storage: Storage
    private var writers: [IntermediateWriter] = []
    /// On disk, tonight's buckets once written (the first ``exits(_:)``), kept for the next.
    private var written: [(bytes: Int, sha256: String)]?
    private var record: [UInt8] = []

    /// In memory, or with `folder` (made anew; what a killed run left there goes first) on disk.
    package init(folder: String?) throws {
        guard let folder else {
            storage = .memory(IdentityValueSet())
            return
        }
        storage = .disk(folder)
        writers = try IdentityBuckets.writers(in: folder, named: "tonight", for: "the exits")
    }

    /// Adds one of tonight's values (an identity value: at most ``IdentityValues/maxBytes`` bytes).
    package func insert(_ value: String) throws {
        if case .memory(let memory) = storage { return memory.insert(value) }
        var v = value
        try v.withUTF8 { p in
            let key = UnsafeRawBufferPointer(p)
            record.removeAll(keepingCapacity: true)
            IdentityIndex.appendRecord(key: key, values: [], to: &record)
            try writers[IdentityBuckets.bucket(key)].write(record)
        }
    }

    /// Which of the baseline's values exit, given every one of them in order by `values`
    /// (called once or twice): `exits(i, value)` for the `i`-th, in order. A value exits when
    /// it is not empty, not tonight's, and not seen before in this call (a value held twice
    /// exits once; each call, one baseline file set, is asked anew;
    /// one longer than an identity value can be is never tonight's nor kept, and exits each
    /// time, as in memory). On disk the baseline's values are split like tonight's, each
    /// bucket's pair is loaded in turn and the exiting rows marked in a bitset of the
    /// baseline's rows: the rows then come out in the baseline's order, the same as in memory.
    package func exits(_ values: ((([UInt8]) throws -> Void) throws -> Void)) throws -> (Int, [UInt8]) -> Bool {
        let folder: String
        switch storage {
        case .memory(let memory):
            let seen = IdentityValueSet()
            return { _, value in
                guard !value.isEmpty, !memory.contains(bytes: value), !seen.contains(bytes: value) else { return false }
                seen.insert(bytes: value)
                return true
            }
        case .disk(let f): folder = f
        }
        let tonight = try written ?? writers.map { w in try w.finish() }.map { ($0.bytes, $0.sha256) }
        written = tonight
        writers = []
        let baseline = try (0..<IdentityBuckets.bucketCount).map {
            try IntermediateWriter(path: folder + "/baseline-\($0)")
        }
        var marks: [UInt64] = []
        var n = 0
        func mark(_ i: Int) { marks[i >> 6] |= 1 << UInt64(i & 63) }
        try values { value in
            let i = n
            n += 1
            if i & 63 == 0 { marks.append(0) }
            guard !value.isEmpty else { return }
            guard value.count <= IdentityValues.maxBytes else { return mark(i) }
            var at = UInt64(i).littleEndian
            try value.withUnsafeBytes { v in
                try withUnsafeBytes(of: &at) { index in
                    record.removeAll(keepingCapacity: true)
                    IdentityIndex.appendRecord(key: v, values: [index], to: &record)
                    try baseline[IdentityBuckets.bucket(v)].write(record)
                }
            }
        }
        let written = try baseline.map { try $0.finish() }
        for b in 0..<IdentityBuckets.bucketCount {
            let set = IdentityValueSet()
            try IntermediateReader(
                path: folder + "/tonight-\(b)", bytes: tonight[b].bytes, sha256: tonight[b].sha256
            ).forEachRecord(columns: 0) { key, _ in set.insert(raw: key) }
            try IntermediateReader(
                path: folder + "/baseline-\(b)", bytes: written[b].bytes, sha256: written[b].sha256
            ).forEachRecord(columns: 1) { key, index in
                guard !set.contains(raw: key) else { return }
                set.insert(raw: key)
                guard index[0].count == 8 else { return }
                mark(Int(UInt64(littleEndian: index[0].loadUnaligned(as: UInt64.self))))
            }
            System.unlinkIfPresent(folder + "/baseline-\(b)")
        }
        return { i, _ in i >> 6 < marks.count && marks[i >> 6] & (1 << UInt64(i & 63)) != 0 }
    }

    /// Removes the work folder, when on disk.
    package func discard() {
        if case .disk(let folder) = storage { IdentityBuckets.removeFolder(folder) }
    }
}

/// One row per identity value in a destination file set (docs/rules.md §10.10): of the rows of
/// a segment list holding the same value, the one whose offer ranks first (§3: HIGH priority,
/// then catalog order), then the earlier in the segment. A first pass over the list adds every
/// row (``add(_:rank:position:)``); ``finish()``; a second asks which rows stay
/// (``keeps(_:position:)``). In memory the best row of each value is kept in a table keyed by
/// the value; under a memory limit the rows are split on disk by the hash of the value, each
/// bucket decided in turn into a bitset of the rows that stay (§6.2).
package final class FoldedValues {
    private enum Storage {
        case memory(IdentityIndex)
        case disk(String)
    }
    private let storage: Storage
    private var writers: [IntermediateWriter] = []
    private var marks: [UInt64] = []
    private var record: [UInt8] = []
    /// Rows added, and distinct values among them.
    private var added = 0
    private var distinct = 0
    /// One past the greatest position added: the bitset's size.
    private var positions = 0

    /// In memory, or with `folder` (made anew) on disk.
    package init(folder: String?) throws {
        guard let folder else {
            storage = .memory(IdentityIndex(columns: 1))
            return
        }
        storage = .disk(folder)
        writers = try IdentityBuckets.writers(in: folder, named: "fold", for: "the destinations")
    }

    /// The rows left out because another row of the set holds their value.
    package var folded: Int { added - distinct }

    /// A row's rank and position, as the table keeps them: better is smaller, compared as text.
    /// Twelve digits of rank, `:`, twenty of position, written in place (a row of a destination
    /// list makes one).
    private static func key(rank: Int, position: Int) -> String {
        String(unsafeUninitializedCapacity: 33) { out in
            var r = min(max(rank, 0), 999_999_999_999)
            var p = max(position, 0)
            for i in stride(from: 11, through: 0, by: -1) {
                out[i] = UInt8(ascii: "0") + UInt8(r % 10)
                r /= 10
            }
            out[12] = UInt8(ascii: ":")
            for i in stride(from: 32, through: 13, by: -1) {
                out[i] = UInt8(ascii: "0") + UInt8(p % 10)
                p /= 10
            }
            return 33
        }
    }

    /// The position of a ``key(rank:position:)``: its digits after the `:`; -1 when it has none.
    private static func position(_ key: String) -> Int {
        var key = key
        return key.withUTF8 { bytes in
            guard let colon = bytes.lastIndex(of: UInt8(ascii: ":")), colon + 1 < bytes.count else { return -1 }
            var n = 0
            for b in bytes[(colon + 1)...] {
                guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"), n <= (Int.max - 9) / 10 else { return -1 }
                n = n * 10 + Int(b - UInt8(ascii: "0"))
            }
            return n
        }
    }

    /// Adds row `position` of the list (in order), holding `value`, its offer's rank `rank`.
    package func add(_ value: String, rank: Int, position: Int) throws {
        added += 1
        positions = max(positions, position + 1)
        let entry = Self.key(rank: rank, position: position)
        switch storage {
        case .memory(let index):
            if let r = index.find(value) {
                guard entry < index.value(r, 0) else { return }
            } else {
                distinct += 1
            }
            var v = value
            var e = entry
            v.withUTF8 { key in
                e.withUTF8 { index.insert(key: UnsafeRawBufferPointer(key), values: [UnsafeRawBufferPointer($0)]) }
            }
        case .disk:
            var v = value
            var e = entry
            try v.withUTF8 { key in
                try e.withUTF8 { en in
                    record.removeAll(keepingCapacity: true)
                    let k = UnsafeRawBufferPointer(key)
                    IdentityIndex.appendRecord(key: k, values: [UnsafeRawBufferPointer(en)], to: &record)
                    try writers[IdentityBuckets.bucket(k)].write(record)
                }
            }
        }
    }

    /// After the last row: on disk, each bucket decided into the bitset of the rows that stay.
    package func finish() throws {
        guard case .disk(let folder) = storage else { return }
        let written = try writers.map { try $0.finish() }
        writers = []
        marks = [UInt64](repeating: 0, count: (positions + 63) / 64)
        for b in 0..<IdentityBuckets.bucketCount {
            let path = folder + "/fold-\(b)"
            let best = IdentityIndex(columns: 1)
            try IntermediateReader(path: path, bytes: written[b].bytes, sha256: written[b].sha256).forEachRecord(
                columns: 1
            ) { key, values in
                if let r = best.find(key) {
                    guard String(decoding: values[0], as: UTF8.self) < best.value(r, 0) else { return }
                } else {
                    distinct += 1
                }
                best.insert(key: key, values: values)
            }
            // Every value's best row, marked.
            try IntermediateReader(path: path, bytes: written[b].bytes, sha256: written[b].sha256).forEachRecord(
                columns: 1
            ) { key, values in
                let entry = String(decoding: values[0], as: UTF8.self)
                guard let r = best.find(key), best.value(r, 0) == entry else { return }
                let i = Self.position(entry)
                if i >= 0 && i >> 6 < marks.count { marks[i >> 6] |= 1 << UInt64(i & 63) }
            }
            System.unlinkIfPresent(path)
        }
    }

    /// Whether row `position`, holding `value`, is the one its value keeps.
    package func keeps(_ value: String, position: Int) -> Bool {
        switch storage {
        case .memory(let index):
            guard let r = index.find(value) else { return false }
            return Self.position(index.value(r, 0)) == position
        case .disk:
            return position >> 6 < marks.count && marks[position >> 6] & (1 << UInt64(position & 63)) != 0
        }
    }

    /// Removes the work folder, when on disk.
    package func discard() {
        if case .disk(let folder) = storage { IdentityBuckets.removeFolder(folder) }
    }
}
