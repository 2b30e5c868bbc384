import Foundation
import Testing
import WinBack
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackTestSupport
import WinBackTesting
import WinBackWrite

@Suite("Shard keys, part files and memory sizes")
struct ShardPiecesTests {
    @Test("the shard of a customer is a fixed function of its bytes (the same in every process)")
    func stableHash() {
        // FNV-1a 64 of "g" 0x1F "1" (computed independently): 0x...; any change of the hash
        // moves customers between shards of runs already partitioned.
        #expect(
            ShardKey.shard(group: "g", original: "1", shards: Int(Int32.max)) == Self.fnvMod("g\u{1F}1", Int(Int32.max))
        )
        let a = ShardKey.shard(group: "g", original: "1", shards: 1_000_003)
        #expect(a == ShardKey.shard(group: "g", original: "1", shards: 1_000_003))
        #expect(ShardKey.shard(group: "g", original: "1", shards: 1) == 0)
        var counts = [Int](repeating: 0, count: 4)
        for i in 0..<4000 {
            counts[ShardKey.shard(group: "21482345", original: "\(2_000_000_000_000_000 + i)", shards: 4)] += 1
        }
        #expect(counts.allSatisfy { $0 > 800 })
    }

    /// FNV-1a 64 written out from its definition.
    static func fnvMod(_ s: String, _ n: Int) -> Int {
        var h: UInt64 = 14_695_981_039_346_656_037
        for b in s.utf8 {
            h ^= UInt64(b)
            h = h &* 1_099_511_628_211
        }
        return Int(h % UInt64(n))
    }

    @Test(
        "memory sizes",
        arguments: [
            ("2GB", 2_000_000_000), ("96MB", 96_000_000), ("96MiB", 100_663_296), ("1G", 1_073_741_824),
            ("512 mb", 512_000_000), ("64000000", 64_000_000),
        ])
    func sizes(text: String, bytes: Int) {
        #expect(MemorySize.parse(text) == bytes)
    }

    @Test("sizes that are not sizes, or too small to run in", arguments: ["", "lots", "2XB", "-1GB", "1MB", "0"])
    func badSizes(text: String) {
        #expect(MemorySize.parse(text) == nil)
    }

    @Test(
        "a size below 32 MB says so; text that is no size says what a size looks like",
        arguments: [
            ("8MB", "'8MB' is below the 32 MB minimum"), ("31999999", "'31999999' is below the 32 MB minimum"),
            ("2XB", "'2XB' is not a size such as 2GB, 512MB or 96MiB (at least 32 MB)"),
            ("0", "'0' is not a size such as 2GB, 512MB or 96MiB (at least 32 MB)"),
        ])
    func sizeProblems(text: String, problem: String) {
        #expect(MemorySize.read(text) == .problem(problem))
        #expect(MemorySize.read("32MB") == .bytes(32_000_000))
    }

    /// Rows with every field set in every way the codec distinguishes.
    static func randomRows(_ n: Int, strings: Int, seed: UInt64) -> [Transaction] {
        var g = SplitMix64(seed: seed, index: 0)
        func pick<T>(_ xs: [T]) -> T { xs[Int(g.next() % UInt64(xs.count))] }
        let big: [Int64] = [0, 1, -1, .max, .min, 1_700_000_000_000, -86_400_000, 9_999_999_999_999_999]
        return (0..<n).map { _ in
            var r = Transaction(
                transactionId: TransactionKey(raw: pick([Int64(g.next() >> 1), -1, -Int64(strings), 0])),
                originalTransactionId: TransactionKey(raw: pick([Int64(g.next() >> 2), -2, 7])),
                subscriptionGroupId: Int32(g.next() % UInt64(strings)), productId: Int32(g.next() % UInt64(strings)),
                purchaseDate: pick(big + [Int64(bitPattern: g.next())]),
                expiresDate: pick(big + [Int64(bitPattern: g.next())]))
            r.revocationDate = pick([Transaction.never, Int64(bitPattern: g.next()), 0])
            r.signedDate = pick([Transaction.unsigned, Int64(bitPattern: g.next()), r.purchaseDate])
            r.offerType = pick([0, 1, 4, 99, Int64(Int32.max), -1, -Int64(strings)])
            r.appAccountToken = pick([
                AppAccountToken.none, AppAccountToken(high: g.next(), low: g.next(), kind: .lowercase),
                AppAccountToken(high: .max, low: 0, kind: .uppercase),
                AppAccountToken(high: 0, low: UInt64(strings - 1), kind: .interned),
            ])
            r.ownership = pick([.purchased, .familyShared, .unknown])
            r.production = g.next() & 1 == 0
            r.isUpgraded = g.next() & 1 == 0
            r.isFreeTrial = g.next() & 1 == 0
            r.offerIdentifier = pick([Transaction.none, 0, Int32(strings - 1)])
            r.offerDiscountType = pick([Transaction.none, 1])
            r.storefront = pick([Transaction.none, 2])
            return r
        }
    }

    /// One row of group 0, product 0, ids 3, bought at 0 and expiring at 1, of offerType 5.
    static var offerTypeFive: Transaction {
        var one = Transaction(
            transactionId: TransactionKey(raw: 3), originalTransactionId: TransactionKey(raw: 3),
            subscriptionGroupId: 0, productId: 0, purchaseDate: 0, expiresDate: 1)
        one.offerType = 5
        return one
    }

    @Test(
        "a section of compact rows, their terms and tokens places in a file's columns, is the same bytes as of their transactions",
        arguments: [false, true])
    func compactRowsEncodeAsTheirTransactions(listed: Bool) throws {
        let rows = Self.randomRows(5000, strings: 10, seed: 7)
        // A file's columns: its tokens listed (one a row, repeated values in several places)
        // as a file read keeps them, or entered once each.
        var file = RowColumns()
        var compact: [CompactRow] = []
        for t in rows {
            if listed {
                var c = file.compactTerms(t)
                if !t.appAccountToken.isNone { c.token = file.list(token: t.appAccountToken) }
                compact.append(c)
            } else {
                compact.append(file.compact(t))
            }
        }
        #expect(listed == (file.tokens.count > Set(file.tokens.values.map { [$0.high, $0.low] }).count))
        // A shard's rows of the file: some of them, in the file's order.
        let picked = rows.indices.filter { $0 % 3 != 1 }
        var fromTransactions: [UInt8] = []
        RowCodec.encode(count: picked.count, row: { file.transaction(compact[picked[$0]]) }, into: &fromTransactions)
        var fromCompact: [UInt8] = []
        RowCodec.encode(count: picked.count, compact: { compact[picked[$0]] }, columns: file, into: &fromCompact)
        #expect(fromCompact == fromTransactions)
        var fromRows: [UInt8] = []
        picked.map { rows[$0] }.withUnsafeBufferPointer { RowCodec.encode($0, into: &fromRows) }
        #expect(fromCompact == fromRows)
        var back: [Transaction] = []
        try fromCompact.withUnsafeBytes {
            try RowCodec.decode($0, count: picked.count, strings: 10) { back.append($0) }
        }
        #expect(back == picked.map { rows[$0] })
    }

    @Test("part rows come back exactly, every field, from their compact encoding")
    func rowCodecRoundTrip() throws {
        let rows = Self.randomRows(5000, strings: 10, seed: 42)
        var bytes: [UInt8] = []
        rows.withUnsafeBufferPointer { RowCodec.encode($0, into: &bytes) }
        #expect(bytes.count < rows.count * MemoryLayout<Transaction>.stride)
        var back: [Transaction] = []
        try bytes.withUnsafeBytes { try RowCodec.decode($0, count: rows.count, strings: 10) { back.append($0) } }
        #expect(back == rows)
        // An id past the table, a row too many or a byte short: refused, never misread.
        bytes.withUnsafeBytes { b in
            #expect(throws: RowCodec.Malformed.self) { try RowCodec.decode(b, count: rows.count, strings: 2) { _ in } }
            #expect(throws: RowCodec.Malformed.self) {
                try RowCodec.decode(b, count: rows.count + 1, strings: 10) { _ in }
            }
            #expect(throws: RowCodec.Malformed.self) {
                try RowCodec.decode(UnsafeRawBufferPointer(rebasing: b.dropLast()), count: rows.count, strings: 10) {
                    _ in
                }
            }
        }
        // A row keeps 32 bits of offerType: a section with a wider one (written by no run of this
        // version) is refused. One row, one term: count 1, presence, bits, group 0, product 0,
        // offerType 5.
        let one = Self.offerTypeFive
        var encoded: [UInt8] = []
        [one].withUnsafeBufferPointer { RowCodec.encode($0, into: &encoded) }
        #expect(Array(encoded[0..<6]) == [1, 1, 1 << 2, 0, 0, RowCodec.zigzag(5).asByte])  // bits: Production
        var wide: [UInt8] = []
        RowCodec.varint(RowCodec.zigzag(Int64(Int32.max) + 1), &wide)
        encoded.replaceSubrange(5..<6, with: wide)
        _ = encoded.withUnsafeBytes { b in
            #expect(throws: RowCodec.Malformed.self) { try RowCodec.decode(b, count: 1, strings: 2) { _ in } }
        }
        var same = encoded
        same.replaceSubrange(5..<(5 + wide.count), with: [RowCodec.zigzag(5).asByte])
        var back1: [Transaction] = []
        try same.withUnsafeBytes { try RowCodec.decode($0, count: 1, strings: 2) { back1.append($0) } }
        #expect(back1 == [one])
    }

    @Test("a section names its rows' shared columns by place: each entered once, none past its table")
    func sectionColumns() throws {
        // 2,000 rows sharing a few terms and tokens: the section lists each once.
        let all = Self.randomRows(5000, strings: 10, seed: 7)
        let rows = (0..<2000).map { all[$0 % 6] }
        var bytes: [UInt8] = []
        rows.withUnsafeBufferPointer { RowCodec.encode($0, into: &bytes) }
        var columns = RowColumns()
        var compact: [CompactRow] = []
        try bytes.withUnsafeBytes {
            try RowCodec.decode($0, count: rows.count, strings: 10, columns: { columns = $0 }) { compact.append($0) }
        }
        #expect(columns.terms.count == Set(rows.prefix(6).map(\.terms)).count)
        #expect(columns.tokens.count == Set(rows.prefix(6).map(\.appAccountToken).filter { !$0.isNone }).count)
        #expect(compact.map { columns.transaction($0) } == rows)
        // One row without a token: [1 term: presence, bits, group, product, offerType] [0 tokens]
        // [the row: presence, purchase, expires, original, transactionId, its term's place].
        let one = Self.offerTypeFive
        var encoded: [UInt8] = []
        [one].withUnsafeBufferPointer { RowCodec.encode($0, into: &encoded) }
        #expect(encoded == [1, 1, 1 << 2, 0, 0, 10, 0, 0, 0, 2, 6, 0, 0])
        func refused(_ change: (inout [UInt8]) -> Void, _ what: String) {
            var b = encoded
            change(&b)
            _ = b.withUnsafeBytes { b in
                #expect(throws: RowCodec.Malformed.self, "\(what)") {
                    try RowCodec.decode(b, count: 1, strings: 2) { _ in }
                }
            }
        }
        refused({ $0[12] = 1 }, "a term past the table")
        refused({ $0[7] |= 4 }, "a token of an empty table")
        refused({ $0[7] |= 8 }, "an unknown presence bit")
        refused({ $0[1] |= 32 }, "an unknown term presence bit")
        refused({ $0[0] = 200 }, "more terms than the bytes hold")
        refused({ $0[6] = 9 }, "more tokens than the bytes hold")
        refused({ $0.replaceSubrange(6..<7, with: [1, 0]) }, "a token of no kind")
        // The smallest rows a section holds take six bytes each (presence, five varints of 0,
        // the term's place): a section of them is whole, not damaged.
        let same = [Transaction](
            repeating: Transaction(
                transactionId: TransactionKey(raw: 0), originalTransactionId: TransactionKey(raw: 0),
                subscriptionGroupId: 0, productId: 0, purchaseDate: 0, expiresDate: 0), count: 1000)
        let small = Paths.temporary() + "/small.part"
        let ws = try PartWriter(path: small)
        let group = StringTable()
        _ = group.intern("g")
        try same.withUnsafeBufferPointer { try ws.append(file: 0, table: group, rows: $0) }
        let (smallSize, smallSHA) = (ws.compressedBytes, ws.sha256)
        try ws.close()
        #expect(smallSize < 8 + 40 + same.count * 7)
        var smallRows = StateRows(store: try TransactionRows(reservingForRead: ()))
        let smallReader = try PartReader(path: small, bytes: smallSize, sha256: smallSHA)
        #expect(try smallReader.next(into: &smallRows) == 0)
        #expect(smallRows.rows.count == 1000 && smallRows.rows[999] == same[0])
        // Read back into a state's rows through a part file: the same transactions.
        let dir = Paths.temporary()
        let w = try PartWriter(path: dir + "/s.part")
        let table = StringTable()
        for i in 0..<10 { _ = table.intern("s\(i)") }
        try rows.withUnsafeBufferPointer { try w.append(file: 0, table: table, rows: $0) }
        try all.withUnsafeBufferPointer { try w.append(file: 1, table: table, from: 10, rows: $0) }
        let (size, sha) = (w.compressedBytes, w.sha256)
        try w.close()
        var state = StateRows(store: try TransactionRows(reservingForRead: ()))
        let reader = try PartReader(path: dir + "/s.part", bytes: size, sha256: sha)
        #expect(try reader.next(into: &state) == 0)
        #expect(try reader.next(into: &state) == 1)
        #expect(try reader.next(into: &state) == nil)
        #expect(state.rows.count == rows.count + all.count)
        #expect((0..<state.rows.count).allSatisfy { state.rows[$0] == (rows + all)[$0] })
    }

    /// The CRC-32 a part file's sections carry is zlib's, whichever library takes it (ISA-L's
    /// where it loads, as on the machines the tests run on): the check value of "123456789",
    /// and random buffers of lengths around the libraries' steps, against zlib's own.
    @Test("a section's CRC-32 is zlib's, whichever library computes it")
    func sectionChecksums() {
        let check = Array("123456789".utf8).withUnsafeBytes { RowCodec.crc($0) }
        #expect(check == 0xCBF4_3926)
        #expect([UInt8]().withUnsafeBytes { RowCodec.crc($0) } == 0)
        var rng = SplitMix64(seed: 7)
        for n in [1, 7, 8, 15, 16, 63, 64, 65, 255, 256, 1_000, 4_096, 65_537, 1 << 20] {
            let bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            bytes.withUnsafeBytes { #expect(RowCodec.crc($0) == RowCodec.zlibCRC($0), "\(n) bytes") }
        }
    }

    @Test("a part file that is not one, is cut short or is damaged is bad data (65)")
    func badPartFiles() throws {
        let dir = Paths.temporary()
        let w = try PartWriter(path: dir + "/a.part")
        let table = StringTable()
        for i in 0..<10 { _ = table.intern("s\(i)") }
        let rows = Self.randomRows(300, strings: 10, seed: 1)
        try rows.withUnsafeBufferPointer { try w.append(file: 3, table: table, rows: $0) }
        try rows.withUnsafeBufferPointer {
            try w.append(file: 5, table: table, rows: UnsafeBufferPointer(rebasing: $0[0..<7]))
        }
        let (size, sha) = (w.compressedBytes, w.sha256)
        try w.close()
        let store = try TransactionRows(reservingForRead: ())
        let make = { (_: Int) in FileRows(path: "x", store: store) }
        let reader = try PartReader(path: dir + "/a.part", bytes: size, sha256: sha)
        let (file, got) = try #require(try reader.next(into: make))
        #expect(file == 3 && got.rows.count == 300)
        #expect((0..<300).allSatisfy { got.rows[$0] == rows[$0] })
        #expect(got.table.string(9) == "s9")
        #expect(try reader.next(into: make)?.file == 5)
        #expect(try reader.next(into: make) == nil)

        func expectBad(_ bytes: [UInt8], _ what: String) {
            let path = dir + "/bad-\(what)"
            #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            do {
                let r = try PartReader(path: path, bytes: bytes.count, sha256: sha)
                while try r.next(into: make) != nil {}
                Issue.record("read a part file that is \(what)")
            } catch let e as WinBackError {
                #expect(e.code.exitCode == 65, "\(what)")
            } catch {
                Issue.record("\(what): \(error)")
            }
        }
        let whole = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/a.part")))
        expectBad(Array("hello, world\n".utf8), "not one")
        expectBad(Array(whole.prefix(whole.count / 2)), "cut short")
        var damaged = whole
        damaged[whole.count - 40] ^= 0x10
        expectBad(damaged, "damaged")
    }
}

extension ShardPiecesTests {
    @Test("the merge's line reader: lines longer than its buffer, CRLF kept, a last line without a newline")
    func lineCursor() throws {
        let path = Paths.temporary() + "/lines"
        let long = String(repeating: "x", count: 700_000)
        let text = "a\n\(long)\nb\r\n\nlast"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let c = try LineCursor(path: path)
        var lines: [String] = []
        while let l = try c.next() { lines.append(String(decoding: l, as: UTF8.self)) }
        #expect(lines == ["a\n", long + "\n", "b\r\n", "\n", "last"])
        #expect(
            LineCursor.less(UnsafeRawBufferPointer(start: nil, count: 0), UnsafeRawBufferPointer(start: nil, count: 0))
                == false)
        let x: [UInt8] = Array("g,12,".utf8)
        let y: [UInt8] = Array("g,123,".utf8)
        x.withUnsafeBytes { a in y.withUnsafeBytes { b in #expect(LineCursor.less(a, b) && !LineCursor.less(b, a)) } }
    }
}

extension UInt64 {
    /// The value as one byte (a varint under 128).
    fileprivate var asByte: UInt8 { UInt8(self) }
}
