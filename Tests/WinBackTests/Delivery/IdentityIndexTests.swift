import Foundation
import Testing

@testable import WinBackRead

/// The compact table of identity rows (docs/rules.md §10.1, §6.2).
@Suite("Delivery: the identity index")
struct IdentityIndexTests {
    static func insert(_ index: IdentityIndex, _ key: String, _ values: [String]) {
        var k = key
        k.withUTF8 { kb in
            let copies = values.map { Array($0.utf8) }
            var pointers: [UnsafeRawBufferPointer] = []
            for i in copies.indices {
                copies[i].withUnsafeBytes {
                    pointers.append(UnsafeRawBufferPointer(start: $0.baseAddress, count: $0.count))
                }
            }
            // The copies outlive the pointers: both end with this closure.
            withExtendedLifetime(copies) { index.insert(key: UnsafeRawBufferPointer(kb), values: pointers) }
        }
    }

    @Test("100,000 keys with growth and collisions: every key finds its values, the last row of a key wins")
    func manyKeys() {
        let index = IdentityIndex(columns: 2)
        var expected: [String: [String]] = [:]
        var rng = SystemRandomNumberGenerator()
        for i in 0..<100_000 {
            let key = String(Int.random(in: 0..<60_000, using: &rng))
            let values = ["u-\(i)", i % 7 == 0 ? "" : "user\(i)@example.com"]
            Self.insert(index, key, values)
            expected[key] = values
        }
        #expect(index.count == expected.count)
        #expect(index.replaced == 100_000 - expected.count)
        for (k, v) in expected { #expect(index.find(k).map { index.values($0) } == v, "\(k)") }
        #expect(index.find("60000") == nil)
        #expect(index.find("") == nil)
    }

    @Test("records appended as bytes (as a bounded run reads them back) give the same table as rows inserted")
    func appendedRecords() {
        let rows = (0..<5_000).map { i in ("k\(i % 3_000)", ["x\(i)", String(repeating: "é", count: i % 40)]) }
        let direct = IdentityIndex(columns: 2)
        var bytes: [UInt8] = []
        for (k, v) in rows {
            Self.insert(direct, k, v)
            var kk = k
            kk.withUTF8 { kb in
                let a = Array(v[0].utf8)
                let b = Array(v[1].utf8)
                a.withUnsafeBytes { pa in
                    b.withUnsafeBytes { pb in
                        IdentityIndex.appendRecord(key: UnsafeRawBufferPointer(kb), values: [pa, pb], to: &bytes)
                    }
                }
            }
        }
        let loaded = IdentityIndex(columns: 2, reservingBytes: bytes.count, rows: rows.count)
        // In two runs of whole records, as two buckets of one group load.
        var split = 0
        var at = 0
        for _ in 0..<2_500 {
            let keyLength = Int(bytes[at]) | Int(bytes[at + 1]) << 8
            at += 2 + keyLength
            for _ in 0..<2 { at += 2 + (Int(bytes[at]) | Int(bytes[at + 1]) << 8) }
        }
        split = at
        bytes.withUnsafeBytes {
            loaded.append(records: UnsafeRawBufferPointer(rebasing: $0[..<split]))
            loaded.append(records: UnsafeRawBufferPointer(rebasing: $0[split...]))
        }
        #expect(loaded.count == direct.count)
        #expect(loaded.replaced == direct.replaced)
        for i in 0..<3_000 {
            let k = "k\(i)"
            #expect(loaded.find(k).map { loaded.values($0) } == direct.find(k).map { direct.values($0) })
        }
    }
}
