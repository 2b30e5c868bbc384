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
    /// The compact forms the read stage keeps millions of rows in: transaction keys, the
    /// Int64 map that deduplicates them, the chunked row store and the string scanner's
    /// eight-byte step.
    @Suite struct CompactStorageTests {
        @Test func canonicalDecimalsAreTheirValueAndEverythingElseIsInterned() {
            let table = StringTable()
            #expect(TransactionKey("2000000003036000", table: table).raw == 2_000_000_003_036_000)
            #expect(TransactionKey("0", table: table).raw == 0)
            #expect(TransactionKey("999999999999999999", table: table).raw == 999_999_999_999_999_999)
            #expect(table.count == 0)
            // A leading zero, 19 digits, letters: strings, so "007" and "7" stay different ids.
            for s in ["007", "00", "1234567890123456789", "t1", "12a", "-5"] {
                let k = TransactionKey(s, table: table)
                #expect(k.raw < 0, "\(s)")
                #expect(table.string(k) == s)
                #expect(TransactionKey(s, table: table) == k)
                #expect(TransactionKey.lookup(s, in: table) == k)
            }
            #expect(TransactionKey("007", table: table) != TransactionKey("7", table: table))
            #expect(TransactionKey.lookup("not-seen", in: table) == nil)
            #expect(TransactionKey.lookup("42", in: table)?.raw == 42)
        }

        @Test func tokensOfOneCaseAreTheirValueAndMixedCaseIsInterned() throws {
            let table = StringTable()
            let lower = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
            let upper = "7E3FB20B-4CDB-47CC-936D-99D65F608138"
            let digits = "00000000-0000-0000-0000-000000000001"
            let mixed = "7e3fB20b-4cdb-47cc-936d-99d65f608138"
            let last = "ffffffff-ffff-ffff-ffff-ffffffffffff"
            for s in [lower, upper, digits, last] {
                let t = try #require(AppAccountToken.parse(s, table: table))
                #expect(t.kind != .interned, "\(s)")
                #expect(t.string(in: table) == s)
            }
            #expect(table.count == 0)
            // The cases may mix anywhere, also at the same place of two eight-digit words.
            for s in [mixed, "a0000000-0000-0000-0000-0000A0000000", "00000000-0000-0000-000f-00000000000F"] {
                let t = try #require(AppAccountToken.parse(s, table: table))
                #expect(t.kind == .interned, "\(s)")
                #expect(t.string(in: table) == s)
            }
            #expect(table.count == 3)
            let m = try #require(AppAccountToken.parse(mixed, table: table))
            // Equal exactly when the strings are: the same digits in another case differ.
            #expect(AppAccountToken.parse(lower, table: table) == AppAccountToken.parse(lower, table: table))
            #expect(AppAccountToken.parse(lower, table: table) != AppAccountToken.parse(upper, table: table))
            #expect(AppAccountToken.parse(mixed, table: table) == m)
            #expect(AppAccountToken.parse(mixed, table: table) != AppAccountToken.parse(lower, table: table))
            #expect(AppAccountToken.parse("not-a-uuid", table: table) == nil)
            #expect(AppAccountToken.none.string(in: table) == nil)
            // Bytes of each digit land in their place: high and low halves.
            let t = try #require(AppAccountToken.parse("01234567-89ab-cdef-0123-456789abcdef", table: table))
            #expect(t.high == 0x0123_4567_89AB_CDEF)
            #expect(t.low == 0x0123_4567_89AB_CDEF)
        }

        @Test func tokensAreWrittenBackDigitForDigit() {
            // Every digit value at every place, in both cases, against a formatter of its own.
            var g = SystemRandomNumberGenerator()
            let table = StringTable()
            let samples: [(UInt64, UInt64)] =
                [(0, 0), (.max, .max), (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)]
                + (0..<2_000).map { _ in (g.next(), g.next()) }
            for (high, low) in samples {
                for kind in [AppAccountToken.Kind.lowercase, .uppercase] {
                    let hex = [high, low].map { w in
                        let s = String(w, radix: 16, uppercase: kind == .uppercase)
                        return String(repeating: "0", count: 16 - s.count) + s
                    }.joined()
                    let d = Array(hex)
                    let expected =
                        String(d[0..<8]) + "-" + String(d[8..<12]) + "-" + String(d[12..<16]) + "-"
                        + String(d[16..<20]) + "-" + String(d[20..<32])
                    let t = AppAccountToken(high: high, low: low, kind: kind)
                    #expect(t.string(in: table) == expected)
                    // Read back, the same string (digits alone read as lowercase: no letter says).
                    #expect(AppAccountToken.parse(expected, table: table)?.string(in: table) == expected)
                }
            }
        }

        /// A random transaction: every field drawn, at its extremes too, with string ids below 8.
        private func randomTransaction(_ rng: inout SplitMix64) -> Transaction {
            func id() -> Int32 { Int32(rng.below(8)) }
            func maybe() -> Int32 { rng.below(3) == 0 ? Transaction.none : id() }
            func key() -> TransactionKey {
                TransactionKey(raw: rng.below(4) == 0 ? -Int64(rng.below(8)) - 1 : Int64(rng.below(1 << 40)))
            }
            func date() -> Int64 { [Int64.min, .max, 0, -1, Int64(rng.below(1 << 42))][rng.below(5)] }
            var t = Transaction(
                transactionId: key(), originalTransactionId: key(), subscriptionGroupId: id(), productId: id(),
                purchaseDate: date(), expiresDate: date())
            t.revocationDate = date()
            t.signedDate = date()
            t.price = [Transaction.unpriced, 0, Int64.max, Int64(rng.below(100_000))][rng.below(4)]
            t.offerIdentifier = maybe()
            t.offerDiscountType = maybe()
            t.storefront = maybe()
            t.currency = maybe()
            t.offerType = [0, 4, Int64(Int32.max), -Int64(rng.below(8)) - 1][rng.below(4)]
            t.revocationPercentage = [Transaction.noPercentage, 0, 100_000][rng.below(3)]
            t.revocationType = [.none, .refundFull, .unknown][rng.below(3)]
            t.ownership = [.purchased, .familyShared, .unknown][rng.below(3)]
            t.rawFlags = UInt8(rng.below(8))
            t.appAccountToken =
                [
                    .none, AppAccountToken(high: rng.next(), low: UInt64(rng.below(3)), kind: .lowercase),
                    AppAccountToken(high: .max, low: .max, kind: .uppercase),
                    AppAccountToken(high: 0, low: UInt64(rng.below(8)), kind: .interned),
                ][rng.below(4)]
            return t
        }

        /// A kept row is 56 bytes and gives back the transaction it was made of, field for field:
        /// its shared columns once each; merged into another table through a string map and
        /// renumbered, it gives the transaction with its ids rewritten the same way.
        @Test func aCompactRowTakesFiftySixBytesAndGivesItsTransactionBack() {
            #expect(MemoryLayout<CompactRow>.stride == 56)
            var rng = SplitMix64(seed: 3)
            var columns = RowColumns()
            let all = (0..<5_000).map { _ in randomTransaction(&rng) }
            let rows = all.map { columns.compact($0) }
            #expect(rows.map { columns.transaction($0) } == all)
            // Shared columns once each: rows that differ from one already kept only in their
            // instants and ids add no terms and no token.
            #expect(Set(columns.terms.values).count == columns.terms.count)
            let (terms0, tokens0) = (columns.terms.count, columns.tokens.count)
            for i in 0..<1_000 {
                var t = all[i % 10]
                t.purchaseDate = Int64(i)
                t.signedDate = Int64(i)
                t.transactionId = TransactionKey(raw: Int64(i))
                #expect(columns.transaction(columns.compact(t)) == t)
            }
            #expect(columns.terms.count == terms0 && columns.tokens.count == tokens0)
            // Into a run's table (which already holds other rows' columns) through a string map,
            // then the run's ids renumbered.
            var run = RowColumns()
            _ = run.compact(randomTransaction(&rng))
            let toRun: [Int32] = [5, 3, 7, 1, 0, 2, 6, 4]
            let (terms, tokens) = run.merge(columns, strings: toRun.span)
            let renumber: [Int32] = [7, 6, 5, 4, 3, 2, 1, 0]
            run.renumber(renumber)
            for (t, r) in zip(all, rows) {
                var moved = r
                moved.terms = terms[Int(r.terms)]
                if r.token >= 0 { moved.token = tokens[Int(r.token)] }
                moved.remap(strings: toRun.span)
                moved.remap(strings: renumber.span)
                var expected = t
                expected.remap(toRun)
                expected.remap(renumber)
                #expect(run.transaction(moved) == expected)
            }
        }

        /// A table finds every value again whatever the bits of its hash: values whose hashes are
        /// all equal (the same slot and the same bits kept in it), equal in their low 32 bits (the
        /// bits a slot keeps) but not above, or all different, entered in random order with repeats, past
        /// several growths; each keeps the number of its first appearance.
        @Test(arguments: [0, 1, 2])
        func aColumnTableFindsValuesWhoseHashBitsAgree(spread: Int) {
            struct Value: ColumnValue {
                let n: Int
                let spread: Int
                var columnHash: UInt64 {
                    switch spread {
                    case 0: 0x1234_5678_9ABC_DEF0
                    case 1: UInt64(n) << 32 | 0x9ABC_DEF0
                    default: UInt64(n) &* 0x9E37_79B9_7F4A_7C15
                    }
                }
                static func == (a: Value, b: Value) -> Bool { a.n == b.n }
            }
            var rng = SplitMix64(seed: UInt64(spread))
            var table = ColumnTable<Value>()
            var first: [Int: Int32] = [:]
            for _ in 0..<3_000 {
                let v = Value(n: Int(rng.next() % 700), spread: spread)
                let k = table.intern(v)
                if let known = first[v.n] { #expect(k == known) } else { #expect(Int(k) == first.count) }
                first[v.n] = first[v.n] ?? k
            }
            #expect(table.count == first.count)
            for (n, k) in first { #expect(table.intern(Value(n: n, spread: spread)) == k) }
            #expect(table.count == first.count)
        }

        /// A file's tokens are listed row by row, not looked for (nearly all are new to their
        /// file), up to ``RowChunks/listLimit`` of them; past it (a long file), each is kept once
        /// and the rest entered a chunk at a time. Every row reads back its own token, across
        /// chunk boundaries and settles at any row; merged into a run's columns, a repeated token
        /// takes one number there, numbered in order of first appearance.
        @Test(arguments: [
            (TransactionRows.chunkRows * 2 + 1_000, [Int]()),
            (RowChunks.listLimit * 5 / 4 + TransactionRows.chunkRows * 3 + 100, [5, 4_096, 4_097, 170_000]),
        ])
        func aFilesTokensAreListedThenKeptOnceAndFoundOnceInTheRunsTable(rows count: Int, settleAt: [Int]) throws {
            let store = try TransactionRows(reservingForRead: ())
            var chunks = RowChunks(store: store)
            var rng = SplitMix64(seed: 9)
            let all = (0..<count).map { i in
                var t = randomTransaction(&rng)
                // Tokens repeat (a customer's rows), and some rows have none.
                t.appAccountToken =
                    i % 5 == 0 ? .none : AppAccountToken(high: UInt64(i % 700), low: 1, kind: .lowercase)
                return t
            }
            for (i, t) in all.enumerated() {
                if settleAt.contains(i) { chunks.settle() }
                try chunks.append(t)
            }
            chunks.settle()
            #expect((0..<all.count).allSatisfy { chunks[$0] == all[$0] })
            let withToken = all.filter { !$0.appAccountToken.isNone }
            var seen = Set<AppAccountToken>()
            let firstSeen = withToken.map(\.appAccountToken).filter { seen.insert($0).inserted }
            #expect(firstSeen.count == 700 - 700 / 5)
            let long = withToken.count > RowChunks.listLimit
            #expect(chunks.columns.tokens.count == (long ? firstSeen.count : withToken.count))
            let rows = (0..<all.count).map { chunks.stored($0) }
            var run = RowColumns()
            let (_, tokens) = run.merge(chunks.takeColumns(), strings: Array(Int32(0)..<8).span)
            #expect(run.tokens.values == firstSeen)
            #expect(
                zip(all, rows).allSatisfy { t, r in
                    r.token < 0 || run.tokens[tokens[Int(r.token)]] == t.appAccountToken
                })
        }

        @Test func aRowTakesOneHundredFourBytesAndItsFlagsAreIndependent() {
            #expect(MemoryLayout<Transaction>.stride == 104)
            var t = Transaction(
                transactionId: TransactionKey(raw: 1), originalTransactionId: TransactionKey(raw: 2),
                subscriptionGroupId: 0, productId: 0, purchaseDate: 0, expiresDate: 1)
            #expect(t.production && !t.isUpgraded && !t.isFreeTrial)
            #expect(t.revocationPercentage == Transaction.noPercentage && t.revocationType == .none)
            #expect(t.ownership == .purchased && t.appAccountToken == .none)
            t.isUpgraded = true
            #expect(t.production && t.isUpgraded && !t.isFreeTrial)
            t.production = false
            t.isFreeTrial = true
            #expect(!t.production && t.isUpgraded && t.isFreeTrial)
            t.isUpgraded = false
            #expect(!t.production && !t.isUpgraded && t.isFreeTrial)
            t.appAccountToken = AppAccountToken(high: .max, low: .max, kind: .uppercase)
            t.ownership = .unknown
            #expect(!t.production && !t.isUpgraded && t.isFreeTrial)
            #expect(t.appAccountToken == AppAccountToken(high: .max, low: .max, kind: .uppercase))
            // The small fields share one word: each at its widest, then back, leaves the others be.
            t.revocationPercentage = 100_000
            t.revocationType = .unknown
            #expect(t.revocationPercentage == 100_000 && t.revocationType == .unknown && t.ownership == .unknown)
            #expect(t.appAccountToken.kind == .uppercase && !t.production && t.isFreeTrial)
            t.appAccountToken = AppAccountToken(high: 0, low: 7, kind: .interned)
            t.ownership = .familyShared
            #expect(t.revocationPercentage == 100_000 && t.revocationType == .unknown)
            #expect(t.appAccountToken == AppAccountToken(high: 0, low: 7, kind: .interned) && t.isFreeTrial)
            t.revocationPercentage = 0
            t.revocationType = .none
            t.rawFlags = 7
            #expect(t.revocationPercentage == 0 && t.revocationType == .none && t.ownership == .familyShared)
            #expect(t.production && t.isUpgraded && t.isFreeTrial && t.appAccountToken.kind == .interned)
            t.offerType = Int64(Int32.max)
            #expect(t.offerType == Int64(Int32.max))
            t.offerType = -5
            // Interned ids (the token's, a named offer type's) follow a table merge.
            t.remap([10, 11, 12, 13, 14, 15, 16, 17])
            #expect(t.offerType == -15 && t.appAccountToken.low == 17 && t.productId == 10)
        }

        @Test func eightDigitsAtOnceMatchDigitByDigit() {
            func word(_ s: String) -> UInt64 {
                Array(s.utf8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            }
            #expect(Digits.eight(word("00000000")) == 0)
            #expect(Digits.eight(word("99999999")) == 99_999_999)
            #expect(Digits.eight(word("12345678")) == 12_345_678)
            #expect(Digits.eight(word("00000001")) == 1)
            #expect(Digits.eight(word("10000000")) == 10_000_000)
            // The bytes just outside 0–9, anywhere in the word.
            for bad in ["/", ":", " ", "a", "\u{7F}", "\u{B0}"] {
                for at in 0..<8 {
                    var s = Array("12345678".utf8)
                    s.replaceSubrange(at..<(at + 1), with: Array(bad.utf8.prefix(1)))
                    let w = s.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    #expect(Digits.eight(w) == nil, "\(bad) at \(at)")
                }
            }
            var rng = SplitMix64(seed: 3)
            for _ in 0..<5000 {
                let v = rng.next() % 100_000_000
                let s = String(repeating: "0", count: 8 - String(v).count) + String(v)
                #expect(Digits.eight(word(s)) == v, "\(s)")
            }
        }

        @Test func leadingDigitsOfAWordMatchDigitByDigit() {
            func word(_ s: String) -> UInt64 {
                var b = Array(s.utf8)
                b += [UInt8](repeating: UInt8(ascii: ","), count: max(0, 8 - b.count))
                return b.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            }
            #expect(Digits.leading(word("12345678")) == (8, 12_345_678))
            #expect(Digits.leading(word("00000000")) == (8, 0))
            #expect(Digits.leading(word("4990,\"cu")) == (4, 4990))
            #expect(Digits.leading(word("1}")) == (1, 1))
            #expect(Digits.leading(word("\"1234567")) == (0, 0))
            #expect(Digits.leading(word("9999999.")) == (7, 9_999_999))
            // Every count, ended by each byte just outside 0–9 and by bytes that carry or
            // borrow (0xFF, 0x00), with any bytes after it.
            var rng = SplitMix64(seed: 5)
            for count in 0...8 {
                for end: UInt8 in [0x2F, 0x3A, 0x20, 0x2C, 0x7D, 0x2E, 0x65, 0x00, 0xFF, 0xFA, 0x80] {
                    for _ in 0..<50 {
                        var b = (0..<8).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                        var value: UInt64 = 0
                        for i in 0..<count {
                            let d = UInt8(rng.next() % 10)
                            b[i] = 0x30 + d
                            value = value * 10 + UInt64(d)
                        }
                        if count < 8 { b[count] = end }
                        let w = b.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                        let got = Digits.leading(w)
                        #expect(got.count == count && got.value == value, "\(b) \(got)")
                    }
                }
            }
            #expect((0...8).map { Digits.power($0) } == (0...8).map { (0..<$0).reduce(1) { v, _ in v * 10 } })
        }

        @Test func decimalKeysRenderBackToTheirString() {
            let table = StringTable()
            for s in ["0", "7", "10", "2000000000000102", "999999999999999999"] {
                #expect(table.string(TransactionKey(s, table: table)) == s)
            }
        }

        @Test func keysOrderBytewiseLikeTheirStrings() {
            let table = StringTable()
            let ids = ["9", "10", "100", "099", "1", "0", "2000000000000102", "200000000000010", "a", "Z", "1a", "19"]
            let keys = ids.map { TransactionKey($0, table: table) }
            for (i, a) in ids.enumerated() {
                for (j, b) in ids.enumerated() {
                    let bytewise = a.utf8.lexicographicallyPrecedes(b.utf8)
                    #expect(table.less(keys[i], keys[j]) == bytewise, "\(a) < \(b)")
                    if a == b { #expect(TransactionKey.compare(keys[i], keys[j], in: table) == 0) }
                }
            }
        }

        @Test func theMapKeepsTheFirstValueUntilUpdatedPastManyGrowths() {
            var map = Int64Map(capacity: 1)
            let keys: [Int64] = (0..<20_000).map { Int64($0) * 7_919 - 50_000 }
            for (i, k) in keys.enumerated() { #expect(map.insert(k, UInt32(i)) == UInt32(i)) }
            #expect(map.count == keys.count)
            for (i, k) in keys.enumerated() {
                #expect(map.insert(k, .max) == UInt32(i))
                #expect(map.find(k) == UInt32(i))
            }
            map.update(keys[5], 99)
            #expect(map.find(keys[5]) == 99)
            #expect(map.find(Int64.max) == nil)
            #expect(map.count == keys.count)
            // Read only, from several threads at once, as the grouping looks its customers up.
            let found = ResultSlots<[UInt32?]>(count: 4)
            let expected = keys.indices.map { $0 == 5 ? UInt32(99) : UInt32($0) }
            map.withLookup { lookup in
                try? parallelFor(count: 4, threads: 4) { p in
                    found[p] = chunks(keys.count, pieces: 4)[p].map { lookup.find(keys[$0]) } + [lookup.find(-1)]
                }
            }
            #expect(found.all.flatMap { $0.dropLast() } == expected.map { $0 })
            #expect(found.all.allSatisfy { $0.last! == nil })
        }

        @Test func reservingRoomKeepsWhatTheMapHolds() {
            var map = Int64Map(capacity: 1)
            for k in 0..<100 { _ = map.insert(Int64(k) * 31, UInt32(k)) }
            map.reserve(50_000)
            map.reserve(10)  // less than held: nothing changes
            #expect(map.count == 100)
            for k in 0..<100 { #expect(map.find(Int64(k) * 31) == UInt32(k)) }
            for k in 100..<50_000 { #expect(map.insert(Int64(k) * 31, UInt32(k)) == UInt32(k)) }
            #expect(map.count == 50_000)
            #expect(map.find(49_999 * 31) == 49_999)
            #expect(map.find(-31) == nil)
        }

        /// Deduplication's index keeps no keys: rows are looked up through `same`, here an array
        /// of the keys by row number, as the merger reads a row's transactionId.
        @Test func theWinnerIndexFindsEachKeysRowPastGrowthsAndReplacesIt() {
            var index = WinnerIndex(capacity: 1)
            let keys: [Int64] = (0..<30_000).map { Int64($0) * 7_919 - 50_000 }
            func h(_ k: Int64) -> UInt32 { WinnerIndex.hash(k) }
            for (i, k) in keys.enumerated() {
                #expect(index.insert(hash: h(k), UInt32(i), same: { keys[Int($0)] == k }) == nil)
            }
            #expect(index.count == keys.count)
            for (i, k) in keys.enumerated() {
                #expect(index.insert(hash: h(k), 0, same: { keys[Int($0)] == k })?.row == UInt32(i))
                #expect(index.find(hash: h(k), same: { keys[Int($0)] == k })?.row == UInt32(i))
            }
            #expect(index.count == keys.count)
            let slot = index.find(hash: h(keys[5]), same: { keys[Int($0)] == keys[5] })!.slot
            index.replace(at: slot, with: 7)
            // Row 7 is now where key 5's winner was: `same` is asked about row 7.
            #expect(index.find(hash: h(keys[5]), same: { $0 == 7 })?.row == 7)
            #expect(index.find(hash: h(-1), same: { keys[Int($0)] == -1 }) == nil)
            #expect(index.find(hash: h(keys[29_999]), same: { keys[Int($0)] == keys[29_999] })?.row == 29_999)
        }

        /// An index of one part of the keys (their hashes' top bits shared) places them by the
        /// bits below: all entered and found again past growths.
        @Test func anIndexOfOnePartPlacesItsKeysByTheBitsBelowThePart() {
            for shift in [1, 3, 8] {
                // Keys of part 1 only: their hashes' top `shift` bits are 0…01.
                let keys = Array(
                    (0..<5_000_000).lazy.map { Int64($0) * 7_919 }.filter {
                        WinnerIndex.hash($0) >> UInt32(32 - shift) == 1
                    }.prefix(5_000))
                #expect(keys.count == 5_000, "shift \(shift)")
                var index = WinnerIndex(capacity: 1, shift: shift)
                for (i, k) in keys.enumerated() {
                    let h = WinnerIndex.hash(k)
                    #expect(index.insert(hash: h, UInt32(i), same: { keys[Int($0)] == k }) == nil)
                }
                #expect(index.count == keys.count)
                for (i, k) in keys.enumerated() {
                    #expect(index.find(hash: WinnerIndex.hash(k), same: { keys[Int($0)] == k })?.row == UInt32(i))
                }
            }
        }

        /// Two keys whose 32 hash bits agree are told apart by their rows' keys: the index holds
        /// both, each found as its own.
        @Test func keysWithTheSameHashBitsAreToldApartByTheirRows() throws {
            // Consecutive ids spread evenly and do not meet this soon: random ids do (about
            // 80,000 draws for two of 2³² hashes to agree).
            var seen: [UInt32: Int64] = [:]
            var pair: (Int64, Int64)?
            var g = SplitMix64(seed: 3, index: 0)
            for _ in 0..<2_000_000 where pair == nil {
                let k = Int64(bitPattern: g.next() >> 1)
                let h = WinnerIndex.hash(k)
                if let other = seen[h], other != k { pair = (other, k) } else { seen[h] = k }
            }
            let (a, b) = try #require(pair)
            #expect(WinnerIndex.hash(a) == WinnerIndex.hash(b) && a != b)
            let keys = [a, b]
            let h = WinnerIndex.hash(a)
            var index = WinnerIndex(capacity: 4)
            #expect(index.insert(hash: h, 0, same: { keys[Int($0)] == a }) == nil)
            #expect(index.insert(hash: h, 1, same: { keys[Int($0)] == b }) == nil)
            #expect(index.find(hash: h, same: { keys[Int($0)] == a })?.row == 0)
            #expect(index.find(hash: h, same: { keys[Int($0)] == b })?.row == 1)
            #expect(index.insert(hash: h, 0, same: { keys[Int($0)] == b })?.row == 1)
            #expect(index.count == 2)
        }

        @Test func rowsSurviveChunkBoundaries() throws {
            var rows = RowChunks(store: try TransactionRows(reservingForRead: ()))
            let n = TransactionRows.chunkRows * 2 + 3
            for i in 0..<n {
                try rows.append(
                    Transaction(
                        transactionId: TransactionKey(raw: Int64(i)),
                        originalTransactionId: TransactionKey(raw: Int64(i % 100)),
                        subscriptionGroupId: 0, productId: 0, purchaseDate: Int64(i), expiresDate: Int64(i) + 1))
            }
            #expect(rows.count == n)
            for i in [
                0, TransactionRows.chunkRows - 1, TransactionRows.chunkRows, 2 * TransactionRows.chunkRows, n - 1,
            ] {
                #expect(rows[i].transactionId.raw == Int64(i))
                #expect(rows[i].expiresDate == Int64(i) + 1)
            }
        }

        /// Three files take chunks of one store in turn, some rows are dropped, some rewritten
        /// and others kept as they are (and a fourth file of 24 chunks after them, so that a part
        /// of the packing holds several chunks on up to three threads): what is kept is packed into the first rows
        /// whatever the threads, a kept row staying where it is when it falls among them and the
        /// free slots there (dropped rows, chunks' unused ends) taking the kept rows above, both
        /// in ascending order. Dropped: every third row; or every row of the first file (its
        /// chunks come first); or none; or a run of the fourth file across five of its chunks
        /// and the parts' bounds.
        @Test(arguments: [1, 2, 3, 8], [0, 1, 2, 3])
        func compactingKeepsExactlyTheKeptRowsFillingTheFreeSlots(threads: Int, rule: Int) throws {
            let store = try TransactionRows(reservingForRead: ())
            var files = (0..<4).map { _ in RowChunks(store: store) }
            let sizes = [
                TransactionRows.chunkRows * 2 + 5, TransactionRows.chunkRows, 17, TransactionRows.chunkRows * 24 + 3,
            ]
            func row(_ file: Int, _ i: Int) -> Transaction {
                Transaction(
                    transactionId: TransactionKey(raw: Int64(file * 1_000_000 + i)),
                    originalTransactionId: TransactionKey(raw: Int64(i % 7)), subscriptionGroupId: Int32(file),
                    productId: 0, purchaseDate: Int64(i), expiresDate: Int64(i) + 1)
            }
            // Interleaved: file 2's chunk lands between chunks of files 0 and 1; file 3's last
            // chunks follow one another.
            var next = [0, 0, 0, 0]
            while next != sizes {
                for f in 0..<4 {
                    let end = min(sizes[f], next[f] + TransactionRows.chunkRows / 2 + 1)
                    for i in next[f]..<end { try files[f].append(row(f, i)) }
                    next[f] = end
                }
            }
            #expect(store.chunkCount == 3 + 1 + 1 + 25)
            var owner: [Int: (file: Int, seq: Int)] = [:]
            for (f, rows) in files.enumerated() {
                for (seq, c) in rows.numbers.enumerated() { owner[c] = (f, seq) }
            }
            let owners = owner
            let fileSizes = sizes
            let run = TransactionRows.chunkRows * 5 - 100..<TransactionRows.chunkRows * 10 + 50
            @Sendable func drops(_ file: Int, _ i: Int) -> Bool {
                switch rule {
                case 0: i % 3 == 0
                case 1: file == 0
                case 2: false
                default: file == 3 && run.contains(i)
                }
            }
            // Keep the rows `rule` does not drop; mark the kept ones.
            let tallies = store.compact(
                threads: threads, tally: (seen: 0, dropped: 0),
                used: { c in
                    min(
                        TransactionRows.chunkRows,
                        fileSizes[owners[c]!.file] - owners[c]!.seq * TransactionRows.chunkRows)
                },
                keep: { t, c, k, r in
                    t.seen += 1
                    let i = owners[c]!.seq * TransactionRows.chunkRows + k
                    guard !drops(owners[c]!.file, i) else {
                        t.dropped += 1
                        return false
                    }
                    // Odd rows rewritten, even ones kept as they are (not written back).
                    if i % 2 == 1 { r.revocationDate = Int64(i) }
                    return true
                })
            #expect(tallies.reduce(0) { $0 + $1.seen } == sizes.reduce(0, +))
            // Every slot of the chunks as written: a kept row's id, or nil (dropped, unused).
            var slots: [Int64?] = []
            for c in 0..<store.chunkCount {
                let (f, seq) = owners[c]!
                let lo = seq * TransactionRows.chunkRows
                for i in lo..<(lo + TransactionRows.chunkRows) {
                    slots.append(i < fileSizes[f] && !drops(f, i) ? Int64(f * 1_000_000 + i) : nil)
                }
            }
            let kept = slots.compactMap { $0 }
            #expect(tallies.reduce(0) { $0 + $1.dropped } == sizes.reduce(0, +) - kept.count)
            var above = slots[kept.count...].compactMap { $0 }.makeIterator()
            let expected = slots[..<kept.count].map { $0 ?? above.next()! }
            #expect(above.next() == nil)
            #expect(store.count == expected.count)
            // Read as kept: each file's rows have the terms of their file's own columns.
            #expect(store.buffer.map(\.transactionId.raw) == expected)
            let untouched = row(0, 0).revocationDate
            #expect(
                store.buffer.allSatisfy {
                    $0.revocationDate == ($0.purchaseDate % 2 == 1 ? $0.purchaseDate : untouched)
                })
        }

        /// The eight-byte step finds exactly the first byte the byte-at-a-time rule stops at,
        /// for every byte value in every position, with ordinary bytes or other special ones
        /// around it (a borrow must never mark an earlier byte).
        @Test func theWordStepStopsAtTheFirstSpecialByte() {
            func special(_ c: UInt8) -> Bool { c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 }
            for fill in [UInt8(ascii: "a"), 0x21, 0x23, 0x5B, 0x5D, 0x7F, 0x20] {
                for c in 0...255 {
                    for at in 0..<8 {
                        var bytes = [UInt8](repeating: fill, count: 8)
                        bytes[at] = UInt8(c)
                        if at < 7 { bytes[7] = 0x00 }  // a later special byte must not matter
                        let w = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                        let m = JSONLineScanner.specialMask(w)
                        let expected = bytes.firstIndex(where: special) ?? 8
                        let found = m == 0 ? 8 : m.trailingZeroBitCount >> 3
                        #expect(found == expected, "byte \(c) at \(at) among \(fill)")
                    }
                }
            }
        }
    }
}
