import Crypto
import Foundation

// libFuzzer entry point: one input = one part file, read by PartReader section after section to
// its end. The size and SHA-256 the reader checks are those of the input itself, so that what is
// fuzzed is the decoder, not the digest. Every input must read or fail with a bad-data
// WinBackError; every row read must name only strings of its section's table. Anything else
// (a trap, another error) stops the fuzzer.

/// What `PartReader` fills, standing in for the read stage's `FileRows` (whose file brings every
/// format's reader with it): a section's string table and rows.
final class FileRows {
    let table = StringTable()
    var rows: [Transaction] = []

    func add(_ t: Transaction) throws { rows.append(t) }
}

private let path = NSTemporaryDirectory() + "/winback-fuzz-\(getpid()).part"

private func checkIds(_ f: FileRows) {
    let n = Int32(f.table.count)
    func id(_ v: Int32, optional: Bool = false) -> Bool { (optional && v == Transaction.none) || (v >= 0 && v < n) }
    func key(_ k: TransactionKey) -> Bool { k.raw >= 0 || -(k.raw + 1) < Int64(n) }
    for r in f.rows {
        precondition(id(r.subscriptionGroupId) && id(r.productId), "group or product outside the table")
        precondition(key(r.transactionId) && key(r.originalTransactionId), "id outside the table")
        precondition(
            id(r.offerIdentifier, optional: true) && id(r.offerDiscountType, optional: true)
                && id(r.storefront, optional: true), "offer, discount or storefront outside the table")
        precondition(r.offerType >= 0 || -(r.offerType + 1) < Int64(n), "offer type outside the table")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPart(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    if let data, size > 0 { precondition(write(fd, data, size) == size) }
    close(fd)
    var hasher = SHA256()
    hasher.update(bufferPointer: UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    do {
        let reader = try PartReader(path: path, bytes: size, sha256: Hex.string(hasher.finalize()))
        while let (_, rows) = try reader.next(into: { _ in FileRows() }) { checkIds(rows) }
    } catch let e as WinBackError {
        precondition(e.code == .badData, "\(e)")
    } catch {
        preconditionFailure("\(error)")
    }
    return 0
}

/// Seeds: part files written by `PartWriter` into `$WINBACK_FUZZ_PART_SEEDS` (run.sh sets it to
/// the corpus), once: one with no section, one with a section of rows using every optional
/// field, and one with two sections.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzPartInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    guard let dir = ProcessInfo.processInfo.environment["WINBACK_FUZZ_PART_SEEDS"] else { return 0 }
    let table = StringTable()
    for s in ["21482345", "com.example.pass.monthly", "wb.a", "FREE_TRIAL", "USA", "not-a-number", "b"] {
        _ = table.intern(s)
    }
    var rows: [Transaction] = []
    for i in 0..<6 {
        var r = Transaction(
            transactionId: TransactionKey(raw: i == 5 ? -6 : 2_000_000_000_000_000 + Int64(i)),
            originalTransactionId: TransactionKey(raw: 1_000_000_000_000_000 + Int64(i / 2)), subscriptionGroupId: 0,
            productId: 1, purchaseDate: 1_700_000_000_000 + Int64(i) * 86_400_000,
            expiresDate: 1_702_592_000_000 + Int64(i) * 86_400_000)
        if i % 2 == 1 {
            r.revocationDate = r.purchaseDate + 1000
            r.signedDate = r.purchaseDate + 5
            r.offerType = i == 3 ? 4 : -7
            r.offerIdentifier = 2
            r.offerDiscountType = 3
            r.storefront = 4
            r.appAccountToken = AppAccountToken(
                high: 0x7e3f_b20b_4cdb_47cc, low: 0x936d_99d6_5f60_8138, kind: .lowercase)
        }
        rows.append(r)
    }
    func seed(_ name: String, _ sections: [(Int, Range<Int>)]) {
        let file = dir + "/" + name
        guard !FileManager.default.fileExists(atPath: file), let w = try? PartWriter(path: file) else { return }
        for (index, range) in sections {
            rows[range].withUnsafeBufferPointer { b in _ = try? w.append(file: index, table: table, rows: b) }
        }
        try? w.close()
    }
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    seed("seed-empty", [])
    seed("seed-one", [(0, 0..<6)])
    seed("seed-two", [(1, 0..<2), (4, 2..<5)])
    return 0
}
