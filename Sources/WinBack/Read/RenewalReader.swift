/// Reads renewal-info NDJSON files (SPEC §2.2) into a ``RenewalIndex``, with ids interned in
/// the run's string table. Bad lines are rejected like transaction lines.
public enum RenewalReader {
    static let keys = [
        "originalTransactionId", "autoRenewStatus", "isInBillingRetryPeriod", "gracePeriodExpiresDate",
        "eligibleWinBackOfferIds", "signedDate",
    ]

    public static func read(
        paths: [String], strings: StringTable, inflater: Inflater = .zlib
    ) throws -> (RenewalIndex, [Reject], [InputStats]) {
        var index = RenewalIndex()
        var rejects: [Reject] = []
        var stats: [InputStats] = []
        let scanner = JSONLineScanner(keys: keys)
        for path in paths {
            let source = try openSource(path: path, inflater: inflater)
            var st = InputStats(path: path, bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0)
            try LineReader(source: source).forEachLine { line, number in
                if LineReader.isBlank(line) { return }
                st.rows += 1
                switch decode(line, scanner: scanner) {
                case .success(let (orig, info)):
                    index.add(originalTransactionId: TransactionKey(orig, table: strings), info)
                case .failure(let why):
                    st.rejected += 1
                    rejects.append(Reject(file: path, line: number, reason: why.reason, bytes: line))
                }
            }
            st.bytes = source.fileBytesConsumed
            st.uncompressedBytes = source.bytesProduced
            st.sha256 = source.fileSHA256()
            stats.append(st)
        }
        index.finish()
        return (index, rejects, stats)
    }

    struct Bad: Error { let reason: String }

    static func decode(_ line: UnsafeRawBufferPointer, scanner: JSONLineScanner) -> Result<(String, RenewalInfo), Bad> {
        guard scanner.scan(line) else { return .failure(Bad(reason: "invalid JSON: \(scanner.error)")) }
        let v = scanner.values
        guard case .string(let o) = v[0] else {
            if case .absent = v[0] { return .failure(Bad(reason: "missing required field originalTransactionId")) }
            if case .null = v[0] { return .failure(Bad(reason: "missing required field originalTransactionId")) }
            return .failure(Bad(reason: "field originalTransactionId: expected a string, found \(v[0].typeName)"))
        }
        guard Identifier.isValid(o) else {
            return .failure(Bad(reason: "field originalTransactionId: not a valid identifier"))
        }
        var info = RenewalInfo()
        func int(_ i: Int) -> Result<Int64?, Bad> {
            switch v[i] {
            case .absent, .null: return .success(nil)
            case .int(let x): return .success(x)
            default: return .failure(Bad(reason: "field \(keys[i]): expected an integer, found \(v[i].typeName)"))
            }
        }
        switch int(1) {
        case .success(let x): info.autoRenewStatus = x
        case .failure(let e): return .failure(e)
        }
        switch v[2] {
        case .absent, .null: break
        case .bool(let b): info.isInBillingRetryPeriod = b
        default: return .failure(Bad(reason: "field isInBillingRetryPeriod: expected a boolean, found \(v[2].typeName)"))
        }
        switch int(3) {
        case .success(let x): info.gracePeriodExpiresDate = x
        case .failure(let e): return .failure(e)
        }
        switch v[4] {
        case .absent, .null: break
        case .other(_, let raw):
            guard let list = scanner.stringArray(raw) else {
                return .failure(Bad(reason: "field eligibleWinBackOfferIds: expected an array of strings"))
            }
            info.eligibleWinBackOfferIds = list
        default: return .failure(Bad(reason: "field eligibleWinBackOfferIds: expected an array, found \(v[4].typeName)"))
        }
        switch int(5) {
        case .success(let x): info.signedDate = x ?? Transaction.unsigned
        case .failure(let e): return .failure(e)
        }
        return .success((String(decoding: o, as: UTF8.self), info))
    }
}
