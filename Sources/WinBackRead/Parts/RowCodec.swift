import CIsal
import CZlib
import WinBackModel

/// The rows of a part-file section, encoded compactly (docs/rules.md §8.1): the columns many
/// rows share (``RowTerms`` and tokens) once each in two tables, then every row against the row
/// before it, naming its terms and token by their place in those tables, so that a reader enters
/// each value once a section and keeps rows as ``CompactRow``s without looking any up:
///
///     varint n · n terms, each: u8 presence · u8 ownership and flags ·
///         varints: group, product, [zigzag offerType], [offer id], [discount type], [storefront] ·
///         [amounts: u8 presence and revocation type · varints: [price], [currency], [percentage]]
///     varint m · m tokens, each: u8 kind · the string id of an interned one (varint), or 16 bytes
///     the rows, each: u8 presence (revoked, signed, token) ·
///         zigzag varints: purchaseDate − the previous row's, expiresDate − purchaseDate,
///         [revocationDate − purchaseDate], [signedDate − purchaseDate],
///         originalTransactionId − the previous row's, transactionId − originalTransactionId ·
///         varints: its terms' place, [its token's place]
///
/// Differences wrap (two's complement), so every Int64 comes back exactly.
package enum RowCodec {
    // A row's presence byte.
    private static let revoked: UInt8 = 1
    private static let signed: UInt8 = 2
    private static let token: UInt8 = 4
    // A term's presence byte.
    private static let offerType: UInt8 = 1
    private static let offer: UInt8 = 2
    private static let discount: UInt8 = 4
    private static let storefront: UInt8 = 8
    private static let amounts: UInt8 = 16
    // The amounts byte: presence in its low bits, the revocation type in its high nibble.
    private static let price: UInt8 = 1
    private static let currency: UInt8 = 2
    private static let percentage: UInt8 = 4

    @inline(__always)
    package static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }

    @inline(__always)
    package static func unzigzag(_ u: UInt64) -> Int64 { Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1))) }

    /// Appends `v` as a varint (seven bits a byte, low first) to `out`.
    @inline(__always)
    package static func varint(_ v: UInt64, _ out: inout [UInt8]) {
        out.append(addingCapacity: 10) { varint(v, &$0) }
    }

    /// ``varint(_:_:)`` into room already made (at most 10 bytes).
    @inline(__always)
    static func varint(_ v: UInt64, _ out: inout OutputSpan<UInt8>) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// A transaction holding `terms` and nothing else of note: terms are read and made
    /// through the transaction's own accessors, which know how its fields are packed.
    private static func carrier() -> Transaction {
        Transaction(
            transactionId: TransactionKey(raw: 0), originalTransactionId: TransactionKey(raw: 0),
            subscriptionGroupId: 0, productId: 0, purchaseDate: 0, expiresDate: 0)
    }

    /// Appends the encoding of `rows` to `out`.
    package static func encode(_ rows: UnsafeBufferPointer<Transaction>, into out: inout [UInt8]) {
        encode(count: rows.count, row: { rows[$0] }, into: &out)
    }

    /// Appends the encoding of `count` rows to `out`, row i being `row(i)` (called twice for
    /// each: once for the columns, once for the row).
    package static func encode(count: Int, row: (Int) -> Transaction, into out: inout [UInt8]) {
        // The columns first, each row's places in them kept (8 bytes a row: a section of a
        // partition task's spill is 65,536 rows under a memory limit).
        var columns = RowColumns()
        let places = [Int32](unsafeUninitializedCapacity: count * 2) { p, n in
            for i in 0..<count {
                let c = columns.compact(row(i))
                p.initializeElement(at: 2 * i, to: c.terms)
                p.initializeElement(at: 2 * i + 1, to: c.token)
            }
            n = count * 2
        }
        encode(columns: columns, places: places, into: &out) { i in
            let t = row(i)
            return CompactRow(
                purchaseDate: t.purchaseDate, expiresDate: t.expiresDate, revocationDate: t.revocationDate,
                signedDate: t.signedDate, transactionId: t.transactionId,
                originalTransactionId: t.originalTransactionId, terms: 0, token: -1)
        }
    }

    /// Appends the encoding of `count` compact rows to `out`, row i being `row(i)` (called twice
    /// for each), its terms and token places in `source` (a file's columns, whose tokens may be
    /// listed more than once): the same bytes as the rows made into transactions
    /// (``encode(count:row:into:)``), without making them. Each of `source`'s terms is entered in
    /// the section's columns where its first row is, as ``RowColumns/compact(_:)`` enters it,
    /// then found again by its place in `source` (a file has a few hundred, at most one a row);
    /// each row's token is entered as it comes (a file lists nearly one a row: a map of their
    /// places would seldom find one entered already).
    package static func encode(
        count: Int, compact row: (Int) -> CompactRow, columns source: RowColumns, into out: inout [UInt8]
    ) {
        var columns = RowColumns()
        var termsAt = [Int32](repeating: -1, count: source.terms.count)
        let places = [Int32](unsafeUninitializedCapacity: count * 2) { p, n in
            for i in 0..<count {
                let r = row(i)
                var terms = termsAt[Int(r.terms)]
                if terms < 0 {
                    terms = columns.enter(terms: source.terms[r.terms])
                    termsAt[Int(r.terms)] = terms
                }
                var token: Int32 = -1
                // A token that is none in the row's transaction takes no place, as compact(_:) gives.
                if r.token >= 0, case let v = source.tokens[r.token], !v.isNone { token = columns.enter(token: v) }
                p.initializeElement(at: 2 * i, to: terms)
                p.initializeElement(at: 2 * i + 1, to: token)
            }
            n = count * 2
        }
        encode(columns: columns, places: places, into: &out, row)
    }

    /// Appends a section's `columns`, then its rows: row i's instants and ids from `row(i)`, its
    /// terms and token places `places[2i]` and `places[2i + 1]`.
    private static func encode(
        columns: RowColumns, places: [Int32], into out: inout [UInt8], _ row: (Int) -> CompactRow
    ) {
        let count = places.count / 2
        varint(UInt64(columns.terms.count), &out)
        var r = carrier()
        for c in columns.terms.values {
            r.terms = c
            var presence: UInt8 = 0
            if r.offerType != 0 { presence |= offerType }
            if r.offerIdentifier != Transaction.none { presence |= offer }
            if r.offerDiscountType != Transaction.none { presence |= discount }
            if r.storefront != Transaction.none { presence |= storefront }
            var money: UInt8 = r.revocationType.rawValue << 4
            if r.price != Transaction.unpriced { money |= price }
            if r.currency != Transaction.none { money |= currency }
            if r.revocationPercentage != Transaction.noPercentage { money |= percentage }
            if money != 0 { presence |= amounts }
            out.append(presence)
            out.append(r.ownership.rawValue | r.rawFlags << 2)
            varint(UInt64(UInt32(bitPattern: r.subscriptionGroupId)), &out)
            varint(UInt64(UInt32(bitPattern: r.productId)), &out)
            if presence & offerType != 0 { varint(zigzag(r.offerType), &out) }
            if presence & offer != 0 { varint(UInt64(UInt32(bitPattern: r.offerIdentifier)), &out) }
            if presence & discount != 0 { varint(UInt64(UInt32(bitPattern: r.offerDiscountType)), &out) }
            if presence & storefront != 0 { varint(UInt64(UInt32(bitPattern: r.storefront)), &out) }
            if money != 0 {
                out.append(money)
                if money & price != 0 { varint(UInt64(r.price), &out) }
                if money & currency != 0 { varint(UInt64(UInt32(bitPattern: r.currency)), &out) }
                if money & percentage != 0 { varint(UInt64(r.revocationPercentage), &out) }
            }
        }
        varint(UInt64(columns.tokens.count), &out)
        for t in columns.tokens.values {
            out.append(t.kind.rawValue)
            if t.kind == .interned {
                varint(t.low, &out)
            } else {
                withUnsafeBytes(of: t.high.littleEndian) { out.append(contentsOf: $0) }
                withUnsafeBytes(of: t.low.littleEndian) { out.append(contentsOf: $0) }
            }
        }
        var purchase: Int64 = 0
        var original: Int64 = 0
        for i in 0..<count {
            let r = row(i)
            let (terms, tok) = (places[2 * i], places[2 * i + 1])
            var presence: UInt8 = 0
            if r.revocationDate != Transaction.never { presence |= revoked }
            if r.signedDate != Transaction.unsigned { presence |= signed }
            if tok >= 0 { presence |= token }
            // A row takes at most 1 + 6 × 10 + 2 × 5 bytes: written in place, one capacity
            // check a row rather than one a byte.
            out.append(addingCapacity: 71) { b in
                @inline(__always) func varint(_ v: UInt64) { RowCodec.varint(v, &b) }
                b.append(presence)
                varint(zigzag(r.purchaseDate &- purchase))
                varint(zigzag(r.expiresDate &- r.purchaseDate))
                if presence & revoked != 0 { varint(zigzag(r.revocationDate &- r.purchaseDate)) }
                if presence & signed != 0 { varint(zigzag(r.signedDate &- r.purchaseDate)) }
                varint(zigzag(r.originalTransactionId.raw &- original))
                varint(zigzag(r.transactionId.raw &- r.originalTransactionId.raw))
                varint(UInt64(terms))
                if presence & token != 0 { varint(UInt64(tok)) }
            }
            purchase = r.purchaseDate
            original = r.originalTransactionId.raw
        }
    }

    package struct Malformed: Error {}

    /// Decodes `count` rows from `bytes`, which must hold exactly them, calling `body` with each.
    /// Ids are checked against `strings` (the section's table size), so a damaged section can
    /// never name a string that is not there.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, count: Int, strings: Int, _ body: (Transaction) throws -> Void
    ) throws {
        var section = RowColumns()
        try decode(
            bytes, count: count, strings: strings, columns: { section = $0 }, { try body(section.transaction($0)) })
    }

    /// Decodes a section's columns, handed to `columns` first, then its `count` rows, each
    /// handed to `body` as a compact row whose terms and token are places in those columns.
    /// `bytes` must hold exactly them; every id is checked against `strings` (the section's
    /// table size) and every place against its table, so a damaged section can never name a
    /// string or a value that is not there.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, count: Int, strings: Int, columns: (RowColumns) throws -> Void,
        _ body: (CompactRow) throws -> Void
    ) throws {
        var p = 0
        let n = bytes.count
        @inline(__always) func byte() throws -> UInt8 {
            guard p < n else { throw Malformed() }
            defer { p += 1 }
            return bytes[p]
        }
        @inline(__always) func varint() throws -> UInt64 {
            var v: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                guard shift < 64 else { throw Malformed() }
                v |= UInt64(b & 0x7F) << shift
                if b < 0x80 { return v }
                shift += 7
            }
        }
        @inline(__always) func signedVarint() throws -> Int64 { unzigzag(try varint()) }
        @inline(__always) func id() throws -> Int32 {
            let v = try varint()
            guard v < UInt64(strings) else { throw Malformed() }
            return Int32(v)
        }
        @inline(__always) func key(_ raw: Int64) throws -> TransactionKey {
            guard raw >= 0 || -(raw + 1) < Int64(strings) else { throw Malformed() }
            return TransactionKey(raw: raw)
        }
        @inline(__always) func word() throws -> UInt64 {
            guard p + 8 <= n else { throw Malformed() }
            defer { p += 8 }
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: p, as: UInt64.self))
        }
        // A count of values each taking at least `least` bytes: never more than the bytes left hold.
        @inline(__always) func values(least: Int) throws -> Int {
            let v = try varint()
            guard v <= UInt64((n - p) / least) else { throw Malformed() }
            return Int(v)
        }
        let termCount = try values(least: 4)
        var terms: [RowTerms] = []
        terms.reserveCapacity(termCount)
        for _ in 0..<termCount {
            let presence = try byte()
            let bits = try byte()
            guard presence & ~(offerType | offer | discount | storefront | amounts) == 0,
                let ownership = Ownership(rawValue: bits & 3), bits >> 5 == 0
            else { throw Malformed() }
            var r = carrier()
            r.subscriptionGroupId = try id()
            r.productId = try id()
            r.ownership = ownership
            r.rawFlags = bits >> 2
            if presence & offerType != 0 {
                let type = try signedVarint()
                guard type <= Int64(Int32.max), type >= 0 || -(type + 1) < Int64(strings) else { throw Malformed() }
                r.offerType = type
            }
            if presence & offer != 0 { r.offerIdentifier = try id() }
            if presence & discount != 0 { r.offerDiscountType = try id() }
            if presence & storefront != 0 { r.storefront = try id() }
            if presence & amounts != 0 {
                let money = try byte()
                guard money & 0x08 == 0, let type = RevocationType(rawValue: money >> 4) else { throw Malformed() }
                r.revocationType = type
                if money & price != 0 {
                    let v = try varint()
                    guard v <= UInt64(Int64.max) else { throw Malformed() }
                    r.price = Int64(v)
                }
                if money & currency != 0 { r.currency = try id() }
                if money & percentage != 0 {
                    let v = try varint()
                    guard v <= 100_000 else { throw Malformed() }
                    r.revocationPercentage = Int32(v)
                }
            }
            terms.append(r.terms)
        }
        let tokenCount = try values(least: 2)
        var tokens: [AppAccountToken] = []
        tokens.reserveCapacity(tokenCount)
        for _ in 0..<tokenCount {
            guard let kind = AppAccountToken.Kind(rawValue: try byte()), kind != .none else { throw Malformed() }
            if kind == .interned {
                tokens.append(AppAccountToken(high: 0, low: UInt64(try id()), kind: .interned))
            } else {
                let high = try word()
                tokens.append(AppAccountToken(high: high, low: try word(), kind: kind))
            }
        }
        try columns(RowColumns(terms: terms, tokens: tokens))
        var purchase: Int64 = 0
        var original: Int64 = 0
        for _ in 0..<count {
            let presence = try byte()
            guard presence & ~(revoked | signed | token) == 0 else { throw Malformed() }
            purchase = purchase &+ (try signedVarint())
            let expires = purchase &+ (try signedVarint())
            let revocation = presence & revoked != 0 ? purchase &+ (try signedVarint()) : Transaction.never
            let signedDate = presence & signed != 0 ? purchase &+ (try signedVarint()) : Transaction.unsigned
            original = original &+ (try signedVarint())
            let tid = original &+ (try signedVarint())
            let term = try varint()
            guard term < UInt64(termCount) else { throw Malformed() }
            var tok: Int32 = -1
            if presence & token != 0 {
                let t = try varint()
                guard t < UInt64(tokenCount) else { throw Malformed() }
                tok = Int32(t)
            }
            try body(
                CompactRow(
                    purchaseDate: purchase, expiresDate: expires, revocationDate: revocation, signedDate: signedDate,
                    transactionId: try key(tid), originalTransactionId: try key(original), terms: Int32(term),
                    token: tok))
        }
        guard p == n else { throw Malformed() }
    }

    /// CRC-32 of `bytes` (zlib's): ISA-L's where it loads, several times as fast (a night checks
    /// every section of its state), zlib's otherwise; the same value either way.
    package static func crc(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        if let api = IsalEngine.api {
            var c: UInt32 = 0
            if winback_isal_crc32(api, base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count), &c) != 0 {
                return c
            }
        }
        return zlibCRC(bytes)
    }

    /// CRC-32 of `bytes` by zlib.
    package static func zlibCRC(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        var c = crc32(0, nil, 0)
        var off = 0
        while off < bytes.count {
            let k = min(bytes.count - off, 1 << 30)
            c = crc32(c, base.assumingMemoryBound(to: Bytef.self) + off, uInt(k))
            off += k
        }
        return UInt32(truncatingIfNeeded: c)
    }
}
