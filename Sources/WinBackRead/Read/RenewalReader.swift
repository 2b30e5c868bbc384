import WinBackModel

/// Renewal info as read from its files, before it meets the run's string table: it can be
/// read while the transactions are.
public struct RenewalRead: Sendable {
    /// Ids that are not canonical decimals are interned in ``table``.
    var index: RenewalIndex
    let table: StringTable
    public let rejects: RejectList
    public let stats: [InputStats]

    /// The index with its ids in `strings` (the run's table); the ids new to it are added
    /// in the order they were first read.
    public func index(in strings: StringTable) -> RenewalIndex {
        guard table.count > 0 else { return index }
        var out = index
        let map = strings.merge(table)
        out.remap(map.span)
        return out
    }
}

/// Reads renewal-info NDJSON files (docs/rules.md §2.2) into a ``RenewalIndex``. Bad lines are
/// rejected like transaction lines.
public enum RenewalReader {
    static let keys = [
        "originalTransactionId", "autoRenewStatus", "isInBillingRetryPeriod", "gracePeriodExpiresDate",
        "eligibleWinBackOfferIds", "signedDate",
    ]

    /// Reads `paths` with ids interned in `strings`, the run's table.
    public static func read(
        paths: [String], strings: StringTable, inflater: Inflater = .zlib
    ) throws -> (RenewalIndex, RejectList, [InputStats]) {
        let r = try read(paths: paths, inflater: inflater)
        return (r.index(in: strings), r.rejects, r.stats)
    }

    /// Reads `paths` on their own; ``RenewalRead/index(in:)`` then joins them to a run. With
    /// `signed`, the files are `appstore-signed` ones. With `keep`, only the renewal info whose
    /// originalTransactionId's bytes it accepts is kept (a shard keeps its own customers');
    /// every line is still validated and counted.
    public static func read(
        paths: [String], inflater: Inflater = .zlib, signed: SignedReading? = nil,
        keep: ((UnsafeRawBufferPointer) -> Bool)? = nil, limits: ReadLimits = .default
    ) throws -> RenewalRead {
        let table = StringTable()
        var index = RenewalIndex()
        var rejects = RejectList(limit: limits.maxRejectsListed)
        var stats: [InputStats] = []
        if let signed {
            for path in paths {
                let out = FileRows(path: path, store: TransactionRows([]), limits: limits)
                try SignedFormat(settings: signed, keepTransactions: false).read(
                    input: InputStores.lookUp(path), inflater: inflater, into: out, progress: { _ in })
                let map = table.merge(out.table)
                map.withUnsafeBufferPointer { m in
                    for (k, info) in out.renewals {
                        if let keep, !k.withBytes(in: out.table, keep) { continue }
                        var key = k
                        key.remap(m)
                        index.add(originalTransactionId: key, info)
                    }
                }
                rejects.merge(out.rejects)
                stats.append(out.stats)
            }
            index.finish()
            rejects.normalize()
            return RenewalRead(index: index, table: table, rejects: rejects, stats: stats)
        }
        let scanner = JSONLineScanner(keys: keys)
        let lists = OfferLists()
        for path in paths {
            let source = try openSource(path: path, inflater: inflater)
            var st = InputStats(path: path, bytes: 0, uncompressedBytes: 0, sha256: "", rows: 0, rejected: 0)
            try LineCursor(source: source, maxLineBytes: limits.maxLineBytes).forEachLine(
                { line, number in
                    if Whitespace.isBlank(line) { return }
                    st.rows += 1
                    switch decode(line, scanner: scanner, lists: lists) {
                    case .success(let (orig, info)):
                        if let keep, !keep(orig) { return }
                        index.add(originalTransactionId: TransactionKey(orig, table: table), info)
                    case .failure(let why):
                        st.rejected += 1
                        rejects.add(Reject(file: path, line: number, reason: why.reason, bytes: line))
                    }
                },
                tooLong: { number, bytes in
                    st.rows += 1
                    st.rejected += 1
                    rejects.add(
                        Reject(file: path, line: number, reason: FileRows.tooLongReason(limits), bytes: bytes))
                })
            st.bytes = source.fileBytesConsumed
            st.uncompressedBytes = source.bytesProduced
            st.sha256 = source.fileSHA256()
            stats.append(st)
        }
        index.finish()
        rejects.normalize()
        return RenewalRead(index: index, table: table, rejects: rejects, stats: stats)
    }

    struct Bad: Error { let reason: String }

    /// The `eligibleWinBackOfferIds` lists read so far, by their JSON text: most lines repeat
    /// one of a few lists, and they then share one array instead of each holding its own.
    final class OfferLists {
        private let texts = StringTable()
        /// By the id of the list's text; nil for a text that is not an array of strings.
        private var lists: [[String]?] = []

        func list(_ raw: UnsafeRawBufferPointer, scanner: JSONLineScanner) -> [String]? {
            let id = Int(texts.intern(raw))
            if id == lists.count { lists.append(scanner.stringArray(raw)) }
            return lists[id]
        }
    }

    /// The originalTransactionId (bytes of the line or of the scanner, valid until the next
    /// line) and the renewal info of one line.
    static func decode(
        _ line: UnsafeRawBufferPointer, scanner: JSONLineScanner, lists: OfferLists
    ) -> Result<(UnsafeRawBufferPointer, RenewalInfo), Bad> {
        guard scanner.scan(line) else { return .failure(Bad(reason: "invalid JSON: \(scanner.error)")) }
        return decode(values: scanner.lastValues, scanner: scanner, lists: lists)
    }

    /// The same from values already scanned, indexed like ``keys``.
    static func decode(
        values v: UnsafeBufferPointer<ScannedValue>, scanner: JSONLineScanner, lists: OfferLists
    ) -> Result<(UnsafeRawBufferPointer, RenewalInfo), Bad> {
        guard case .string(let o) = v[0] else {
            if case .absent = v[0] { return .failure(Bad(reason: "missing required field originalTransactionId")) }
            if case .null = v[0] { return .failure(Bad(reason: "missing required field originalTransactionId")) }
            return .failure(Bad(reason: "field originalTransactionId: expected a string, found \(v[0].typeName)"))
        }
        guard Identifier.isValid(o.bytes) else {
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
        default:
            return .failure(Bad(reason: "field isInBillingRetryPeriod: expected a boolean, found \(v[2].typeName)"))
        }
        switch int(3) {
        case .success(let x): info.gracePeriodExpiresDate = x
        case .failure(let e): return .failure(e)
        }
        switch v[4] {
        case .absent, .null: break
        case .other(_, let raw):
            guard let list = lists.list(raw, scanner: scanner) else {
                return .failure(Bad(reason: "field eligibleWinBackOfferIds: expected an array of strings"))
            }
            info.eligibleWinBackOfferIds = list
        default:
            return .failure(Bad(reason: "field eligibleWinBackOfferIds: expected an array, found \(v[4].typeName)"))
        }
        switch int(5) {
        case .success(let x): info.signedDate = x ?? Transaction.unsigned
        case .failure(let e): return .failure(e)
        }
        return .success((o, info))
    }
}
