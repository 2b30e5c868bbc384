import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead

/// Amounts on rows (docs/rules.md §13.1): read from every format, kept through part files, and
/// netted of refunds.
@Suite struct AmountTests {
    private let t0: Int64 = 1_700_000_000_000
    private let day: Int64 = 86_400_000

    @Test func theAmountFieldsAreReadAndBillingPlansReadCleanly() throws {
        let h = DecodeHarness()
        let line = TxLine().with("price", "9990").with("currency", #""JPY""#)
            .with("revocationDate", "1701000000000").with("revocationType", #""REFUND_PRORATED""#)
            .with("revocationPercentage", "50000").with("billingPlanType", #""MONTHLY""#)
            .with("commitmentInfo", #"{"commitmentPeriod":"P1Y","billingPeriodNumber":3,"price":[1,2]}"#)
        let t = try #require(h.row(line.json))
        #expect(t.price == 9990)
        #expect(h.string(t.currency) == "JPY")
        #expect(t.revocationType == .refundProrated)
        #expect(t.revocationPercentage == 50_000)
        #expect(t.isPriced)
        let plain = try #require(h.row(TxLine().json))
        #expect(plain.price == Transaction.unpriced && plain.currency == Transaction.none && !plain.isPriced)
        #expect(plain.revocationType == .none && plain.revocationPercentage == Transaction.noPercentage)
        let family = try #require(h.row(TxLine().with("revocationType", #""FAMILY_REVOKE""#).json))
        #expect(family.revocationType == .familyRevoke)
        let other = try #require(h.row(TxLine().with("revocationType", #""SOMETHING_NEW""#).json))
        #expect(other.revocationType == .unknown)
        let largest = try #require(h.row(TxLine().with("price", "\(Int64.max)").with("currency", #""KRW""#).json))
        #expect(largest.price == .max)
    }

    @Test func hostileAmountsAreRejected() {
        let h = DecodeHarness()
        #expect(h.rejection(TxLine().with("price", "-1").json) == "field price: -1 is negative")
        #expect(h.rejection(TxLine().with("price", "9.99").json)?.hasPrefix("field price: expected an integer") == true)
        #expect(h.rejection(TxLine().with("price", #""9990""#).json)?.hasPrefix("field price") == true)
        #expect(h.rejection(TxLine().with("currency", #""usd""#).json)?.hasPrefix("field currency") == true)
        #expect(h.rejection(TxLine().with("currency", #""USDX""#).json)?.hasPrefix("field currency") == true)
        #expect(h.rejection(TxLine().with("currency", "840").json)?.hasPrefix("field currency") == true)
        #expect(
            h.rejection(TxLine().with("revocationPercentage", "100001").json)
                == "field revocationPercentage: 100001 is not 0–100000")
        #expect(h.rejection(TxLine().with("revocationPercentage", "-1").json) != nil)
        #expect(h.rejection(TxLine().with("revocationType", "1").json)?.hasPrefix("field revocationType") == true)
    }

    private func row(price: Int64 = 10_000, revoked: Int64? = nil) -> Transaction {
        var r = Transaction(
            transactionId: TransactionKey(raw: 1), originalTransactionId: TransactionKey(raw: 1),
            subscriptionGroupId: 0,
            productId: 0, purchaseDate: t0, expiresDate: t0 + 30 * day)
        r.price = price
        r.currency = 0
        if let revoked { r.revocationDate = revoked }
        return r
    }

    @Test func refundsFollowTheirTypeAndPercentage() {
        let at = t0 + 10 * day
        var r = row(price: 9_990, revoked: t0 + day)
        // Without a type, and REFUND_FULL: everything back.
        #expect(r.refunded(at: at) == 9_990 && r.net(at: at) == 0)
        r.revocationType = .refundFull
        #expect(r.net(at: at) == 0)
        // Prorated at 0, 50 and 100 %: floor(price × p / 100 000).
        r.revocationType = .refundProrated
        r.revocationPercentage = 0
        #expect(r.refunded(at: at) == 0 && r.net(at: at) == 9_990)
        r.revocationPercentage = 50_000
        #expect(r.refunded(at: at) == 4_995 && r.net(at: at) == 4_995)
        r.revocationPercentage = 33_333
        #expect(r.refunded(at: at) == 3_329)  // 9 990 × 33 333 / 100 000 = 3 329.9667
        r.revocationPercentage = 100_000
        #expect(r.refunded(at: at) == 9_990 && r.net(at: at) == 0)
        // Prorated without a percentage: a full refund.
        r.revocationPercentage = Transaction.noPercentage
        #expect(r.refunded(at: at) == 9_990)
        // A family revoke refunds nothing; nor does an upgrade.
        r.revocationType = .familyRevoke
        #expect(r.refunded(at: at) == 0 && r.net(at: at) == 9_990)
        r.revocationType = .refundFull
        r.isUpgraded = true
        #expect(r.refunded(at: at) == 0)
        r.isUpgraded = false
        // A revocation not before T is not known yet.
        #expect(r.refunded(at: t0 + day) == 0 && r.refunded(at: t0 + day + 1) == 9_990)
        // A row without price or currency has no amount.
        var unpriced = row(price: Transaction.unpriced, revoked: t0)
        #expect(unpriced.net(at: at) == 0 && unpriced.refunded(at: at) == 0)
        unpriced.price = 5
        unpriced.currency = Transaction.none
        #expect(!unpriced.isPriced && unpriced.net(at: at) == 0)
    }

    @Test func theLargestPricesRefundWithoutOverflow() {
        var r = row(price: .max, revoked: t0)
        r.revocationType = .refundProrated
        r.revocationPercentage = 99_999
        let exact = Int64((Int128(Int64.max) * 99_999) / 100_000)
        #expect(r.refunded(at: t0 + 1) == exact)
        #expect(r.net(at: t0 + 1) == Int64.max - exact)
        r.revocationPercentage = 100_000
        #expect(r.net(at: t0 + 1) == 0)
    }

    @Test func revenueCatAmountsBecomeMilliunitsHalfToEven() {
        func m(_ s: String) -> Int64? { Array(s.utf8).withUnsafeBytes { RevenueCatFormat.milliunits($0) } }
        #expect(m("4.99") == 4_990)
        #expect(m("1200") == 1_200_000)
        #expect(m("0.5") == 500)
        #expect(m(".5") == 500)
        #expect(m("0.0005") == 0)
        #expect(m("0.0015") == 2)
        #expect(m("0.0025") == 2)
        #expect(m("0.00250001") == 3)
        #expect(m("0.0034999") == 3)
        #expect(m("-1.5") == -1_500)
        #expect(m("9223372036854775.807") == .max)
        #expect(m("9223372036854775.8075") == nil)
        #expect(m("9223372036854776") == nil)
        for bad in ["", ".", "-", "1.2.3", "1e3", "4,99", " 1", "abc"] { #expect(m(bad) == nil, "\(bad)") }
    }

    @Test func partFilesKeepEveryAmount() throws {
        var rows: [Transaction] = []
        for (k, price) in [Transaction.unpriced, 0, 1, 9_990, .max].enumerated() {
            var r = row(price: price, revoked: k.isMultiple(of: 2) ? t0 + Int64(k) : nil)
            r.currency = k == 1 ? Transaction.none : Int32(k % 2)
            r.revocationType = RevocationType(rawValue: UInt8(k))!
            r.revocationPercentage = k == 3 ? 100_000 : k == 2 ? 0 : Transaction.noPercentage
            rows.append(r)
        }
        var bytes: [UInt8] = []
        rows.withUnsafeBufferPointer { RowCodec.encode($0, into: &bytes) }
        var back: [Transaction] = []
        try bytes.withUnsafeBytes { try RowCodec.decode($0, count: rows.count, strings: 2) { back.append($0) } }
        #expect(back == rows)
        // One row: its one term (count 1, presence, bits, group, product) holds the amounts byte
        // at index 5 (price 1, currency 0, percentage 0 follow); an unknown revocation type or
        // a percentage past 100 000 is damage.
        var one: [UInt8] = []
        [rows[2]].withUnsafeBufferPointer { RowCodec.encode($0, into: &one) }
        #expect(one[0..<2] == [1, 16] && one[3..<5] == [0, 0] && one[5..<9] == [2 << 4 | 7, 1, 0, 0])
        var damaged = one
        damaged[5] = 7 << 4 | 7
        #expect(throws: RowCodec.Malformed.self) {
            try damaged.withUnsafeBytes { try RowCodec.decode($0, count: 1, strings: 2) { _ in } }
        }
        damaged = one
        damaged.replaceSubrange(8..<9, with: [0xA1, 0x8D, 0x06])  // 100 001
        #expect(throws: RowCodec.Malformed.self) {
            try damaged.withUnsafeBytes { try RowCodec.decode($0, count: 1, strings: 2) { _ in } }
        }
        damaged = one
        damaged.replaceSubrange(8..<9, with: [0xA0, 0x8D, 0x06])  // 100 000
        try damaged.withUnsafeBytes {
            try RowCodec.decode($0, count: 1, strings: 2) { #expect($0.revocationPercentage == 100_000) }
        }
        // A currency id past the table is damage.
        rows[4].currency = 5
        bytes = []
        rows.withUnsafeBufferPointer { RowCodec.encode($0, into: &bytes) }
        #expect(throws: RowCodec.Malformed.self) {
            try bytes.withUnsafeBytes { try RowCodec.decode($0, count: rows.count, strings: 2) { _ in } }
        }
    }
}
