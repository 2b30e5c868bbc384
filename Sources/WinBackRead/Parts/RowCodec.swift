import CZlib
import WinBackModel

/// The rows of a part-file section, encoded compactly (docs/rules.md §8.1): about a third of
/// their size in memory, with no compression to pay for. Per row, against the row before it in
/// the section:
///
///     u8 presence · u8 ownership, flags and token kind ·
///     zigzag varints: purchaseDate − the previous row's, expiresDate − purchaseDate,
///     [revocationDate − purchaseDate], [signedDate − purchaseDate], [offerType],
///     originalTransactionId − the previous row's, transactionId − originalTransactionId ·
///     [token: 16 bytes, or the string id of an interned one] ·
///     varints: group, product, [offer id], [discount type], [storefront] ·
///     [amounts: u8 presence and revocation type · varints: [price], [currency], [percentage]]
///
/// Differences wrap (two's complement), so every Int64 comes back exactly.
package enum RowCodec {
    private static let revoked: UInt8 = 1
    private static let signed: UInt8 = 2
    private static let token: UInt8 = 4
    private static let offerType: UInt8 = 8
    private static let offer: UInt8 = 16
    private static let discount: UInt8 = 32
    private static let storefront: UInt8 = 64
    private static let amounts: UInt8 = 128
    // The amounts byte: presence in its low bits, the revocation type in its high nibble.
    private static let price: UInt8 = 1
    private static let currency: UInt8 = 2
    private static let percentage: UInt8 = 4

    @inline(__always)
    package static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }

    @inline(__always)
    package static func unzigzag(_ u: UInt64) -> Int64 { Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1))) }

    @inline(__always)
    package static func varint(_ v: UInt64, _ out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// Appends the encoding of `rows` to `out`.
    package static func encode(_ rows: UnsafeBufferPointer<Transaction>, into out: inout [UInt8]) {
        var purchase: Int64 = 0
        var original: Int64 = 0
        for r in rows {
            var presence: UInt8 = 0
            if r.revocationDate != Transaction.never { presence |= revoked }
            if r.signedDate != Transaction.unsigned { presence |= signed }
            if !r.appAccountToken.isNone { presence |= token }
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
            out.append(r.ownership.rawValue | r.rawFlags << 2 | r.appAccountToken.kind.rawValue << 5)
            varint(zigzag(r.purchaseDate &- purchase), &out)
            varint(zigzag(r.expiresDate &- r.purchaseDate), &out)
            if presence & revoked != 0 { varint(zigzag(r.revocationDate &- r.purchaseDate), &out) }
            if presence & signed != 0 { varint(zigzag(r.signedDate &- r.purchaseDate), &out) }
            if presence & offerType != 0 { varint(zigzag(r.offerType), &out) }
            varint(zigzag(r.originalTransactionId.raw &- original), &out)
            varint(zigzag(r.transactionId.raw &- r.originalTransactionId.raw), &out)
            if presence & token != 0 {
                if r.appAccountToken.kind == .interned {
                    varint(r.appAccountToken.low, &out)
                } else {
                    withUnsafeBytes(of: r.appAccountToken.high.littleEndian) { out.append(contentsOf: $0) }
                    withUnsafeBytes(of: r.appAccountToken.low.littleEndian) { out.append(contentsOf: $0) }
                }
            }
            varint(UInt64(UInt32(bitPattern: r.subscriptionGroupId)), &out)
            varint(UInt64(UInt32(bitPattern: r.productId)), &out)
            if presence & offer != 0 { varint(UInt64(UInt32(bitPattern: r.offerIdentifier)), &out) }
            if presence & discount != 0 { varint(UInt64(UInt32(bitPattern: r.offerDiscountType)), &out) }
            if presence & storefront != 0 { varint(UInt64(UInt32(bitPattern: r.storefront)), &out) }
            if money != 0 {
                out.append(money)
                if money & price != 0 { varint(UInt64(r.price), &out) }
                if money & currency != 0 { varint(UInt64(UInt32(bitPattern: r.currency)), &out) }
                if money & percentage != 0 { varint(UInt64(r.revocationPercentage), &out) }
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
        var purchase: Int64 = 0
        var original: Int64 = 0
        for _ in 0..<count {
            let presence = try byte()
            let bits = try byte()
            guard let ownership = Ownership(rawValue: bits & 3),
                let kind = AppAccountToken.Kind(rawValue: bits >> 5), bits & 0x80 == 0
            else { throw Malformed() }
            purchase = purchase &+ (try signedVarint())
            let expires = purchase &+ (try signedVarint())
            let revocation = presence & revoked != 0 ? purchase &+ (try signedVarint()) : Transaction.never
            let signedDate = presence & signed != 0 ? purchase &+ (try signedVarint()) : Transaction.unsigned
            let type = presence & offerType != 0 ? try signedVarint() : 0
            original = original &+ (try signedVarint())
            let tid = original &+ (try signedVarint())
            var tok = AppAccountToken.none
            if presence & token != 0 {
                guard kind != .none else { throw Malformed() }
                if kind == .interned {
                    tok = AppAccountToken(high: 0, low: UInt64(try id()), kind: .interned)
                } else {
                    let high = try word()
                    tok = AppAccountToken(high: high, low: try word(), kind: kind)
                }
            }
            var r = Transaction(
                transactionId: try key(tid), originalTransactionId: try key(original), subscriptionGroupId: try id(),
                productId: try id(), purchaseDate: purchase, expiresDate: expires)
            r.revocationDate = revocation
            r.signedDate = signedDate
            guard type <= Int64(Int32.max) else { throw Malformed() }
            if type < 0 { guard -(type + 1) < Int64(strings) else { throw Malformed() } }
            r.offerType = type
            r.appAccountToken = tok
            r.ownership = ownership
            r.rawFlags = (bits >> 2) & 7
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
            try body(r)
        }
        guard p == n else { throw Malformed() }
    }

    /// CRC-32 of `bytes` (zlib's).
    package static func crc(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
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
