import Foundation
import Testing

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

extension ReadStageTests {
    /// The interning table each reader fills and the merge into the run's table.
    @Suite struct StringTableTests {
        @Test func theSameBytesGetTheSameIdPastManyGrowths() {
            let table = StringTable(capacity: 1)
            let ids = (0..<5000).map { table.intern("id-\($0)") }
            #expect(Set(ids).count == 5000)
            #expect(table.count == 5000)
            for i in stride(from: 0, to: 5000, by: 7) {
                #expect(table.intern("id-\(i)") == ids[i])
                #expect(table.lookup("id-\(i)") == ids[i])
                #expect(table.string(ids[i]) == "id-\(i)")
            }
            #expect(table.lookup("id-5000") == nil)
            #expect(table.count == 5000)
        }

        /// The bytes live in storage of their own that doubles as it fills: a string far longer
        /// than the room a table starts with, and the strings around it, keep every byte.
        @Test func stringsKeepTheirBytesAsTheStorageGrows() {
            let table = StringTable(capacity: 1)
            let long = String(repeating: "0123456789", count: 1000) + "end"
            let before = table.intern("a")
            let big = table.intern(long)
            let after = (0..<100).map { table.intern("after-\($0)") }
            #expect(table.string(before) == "a")
            #expect(table.string(big) == long)
            #expect(table.lookup(long) == big)
            for (i, id) in after.enumerated() { #expect(table.string(id) == "after-\(i)") }
            var out: [UInt8] = []
            table.append(big, to: &out)
            #expect(out == Array(long.utf8))
            #expect(table.compare(big, before) < 0 && table.less(big, before) && !table.less(before, big))
            let reordered = table.reordered([big] + [before] + after)
            #expect(reordered.string(0) == long && reordered.string(1) == "a")
        }

        /// An id the table does not hold stops the program, as an array index out of range
        /// does, rather than reading past the table's bytes.
        @Test func anIdTheTableDoesNotHoldStopsTheProgram() async {
            await #expect(processExitsWith: .failure) {
                let table = StringTable(capacity: 1)
                _ = table.intern("a")
                _ = table.string(1)
            }
            await #expect(processExitsWith: .failure) {
                let table = StringTable(capacity: 1)
                _ = table.string(-1)
            }
        }

        /// Slots compare stored hashes first: strings whose hashes are equal must still get
        /// their own ids, through growths and a merge.
        @Test func bytesCompareEqualOnlyWhenEveryByteIs() {
            // Lengths around the eight-byte words, a difference at every place.
            for n in 0..<40 {
                let a = (0..<n).map { UInt8(65 + $0 % 26) }
                a.withUnsafeBytes { pa in
                    #expect(StringTable.same(pa.baseAddress!, pa.baseAddress, n), "length \(n)")
                    for at in 0..<n {
                        var b = a
                        b[at] ^= 0x20
                        b.withUnsafeBytes { pb in
                            #expect(!StringTable.same(pa.baseAddress!, pb.baseAddress, n), "length \(n), byte \(at)")
                        }
                    }
                }
            }
        }

        @Test func stringsWithTheSameHashKeepTheirOwnIds() {
            let table = StringTable(capacity: 1)
            func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
            let words = (0..<300).map { "word-\($0)" }
            let ids = words.map { w in bytes(w).withUnsafeBytes { table.intern($0, hash: 0xABCD_EF01) } }
            #expect(Set(ids).count == words.count)
            for (w, id) in zip(words, ids) {
                #expect(bytes(w).withUnsafeBytes { table.intern($0, hash: 0xABCD_EF01) } == id)
                #expect(table.string(id) == w)
            }
            let run = StringTable(capacity: 1)
            _ = run.intern("other")
            let map = run.merge(table)
            #expect(Set(map).count == words.count)
            for (w, id) in zip(words, ids) { #expect(run.string(map[Int(id)]) == w) }
        }

        /// Renumbering a table keeps every string, gives it its place in the order, and the
        /// new table finds and interns as a table filled in that order would.
        @Test func aReorderedTableNumbersStringsByTheOrder() {
            let table = StringTable(capacity: 1)
            let words = (0..<2000).map { "w\($0 * 7919 % 2003)" } + [""]
            let ids = words.map { table.intern($0) }
            var rng = SplitMix64(seed: 5)
            var order = ids
            for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, Int(rng.next() % UInt64(i + 1))) }
            let re = table.reordered(order)
            #expect(re.count == table.count)
            let expected = StringTable(capacity: 1)
            for old in order { _ = expected.intern(table.string(old)) }
            for (k, old) in order.enumerated() {
                #expect(re.string(Int32(k)) == table.string(old))
                #expect(re.lookup(table.string(old)) == Int32(k))
                #expect(re.intern(table.string(old)) == Int32(k))
                #expect(expected.string(Int32(k)) == re.string(Int32(k)))
            }
            #expect(re.count == table.count)
            #expect(re.intern("new") == Int32(table.count))
        }

        @Test func theEmptyStringIsAString() {
            let table = StringTable()
            let e = table.intern("")
            #expect(table.intern("") == e)
            #expect(table.string(e) == "")
            #expect(table.less(e, table.intern("a")))
        }

        static let ordered: [(String, String)] = [
            ("a", "ab"), ("B", "a"), ("Z", "_"), ("_", "a"), ("10", "2"), ("z", "é"), ("/x/a-b/y", "/x/a/z"),
            ("2000000000000001", "2000000000000010"),
        ]

        @Test(arguments: ordered)
        func idsCompareBytewise(smaller: String, larger: String) {
            let table = StringTable()
            let a = table.intern(larger)
            let b = table.intern(smaller)
            #expect(table.less(b, a))
            #expect(!table.less(a, b))
            #expect(!table.less(a, a))
            #expect(table.compare(b, a) < 0)
            #expect(table.compare(a, table.intern(larger)) == 0)
        }

        /// A reader gives the table's bytes, and orders transaction ids as the table does:
        /// decimals of one length by value, of different lengths and interned ids bytewise.
        @Test func aReaderGivesTheTablesBytesAndOrder() {
            let table = StringTable(capacity: 1)
            let ids = ["b", "", "a-long-id-past-sixteen-bytes", "a"].map { table.intern($0) }
            let reader = table.reader
            for id in ids { #expect(Array(reader.bytes(id)) == Array(table.string(id).utf8)) }
            let keys = ["9", "10", "123", "0", "Z-1", "z", "1000000000000000000", "099"].map {
                TransactionKey($0, table: table)
            }
            // Ids interned since the first reader was taken: a reader is valid only while its
            // table adds nothing, so a new one is taken.
            let after = table.reader
            for a in keys {
                for b in keys {
                    #expect(after.less(a, b) == table.less(a, b))
                    let (x, y) = (a.string(in: table).utf8, b.string(in: table).utf8)
                    #expect(after.less(a, b) == x.lexicographicallyPrecedes(y))
                }
            }
        }

        @Test func mergingMapsEveryIdToTheSameString() {
            let run = StringTable()
            _ = run.intern("shared")
            _ = run.intern("run-only")
            let file = StringTable()
            let fileIds = ["x", "shared", "y", ""].map { file.intern($0) }
            let map = run.merge(file)
            #expect(map.count == file.count)
            for id in fileIds {
                #expect(run.string(map[Int(id)]) == file.string(id))
            }
            #expect(map[Int(fileIds[1])] == run.lookup("shared"))
            #expect(run.count == 5)
        }
    }
}
