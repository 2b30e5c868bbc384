import WinBackModel
import WinBackSupport

/// A CSV export with the §2.1 field names as its header (docs/rules.md §2.3 `csv`): any column order,
/// unknown columns ignored, an empty cell absent, booleans `true`/`false`, dates as integer
/// milliseconds or UTC `YYYY-MM-DDTHH:MM:SS[.sss]Z` / `YYYY-MM-DD HH:MM:SS[.sss]`.
struct CSVFormat: RowFormat {
    typealias Key = TransactionDecoder.Key

    func read(input: Input, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
    {
        let path = input.path
        let source = try openSource(input: input, inflater: inflater)
        let decoder = TransactionDecoder(table: out.table)
        decoder.environment = out.environment
        var columns: [Key?] = []
        var values = [ScannedValue](repeating: .absent, count: Key.allCases.count)
        try CSVFormat.forEachRow(
            path: path, source: source, into: out, progress: progress,
            header: { fields in columns = fields.map { f in Key.allCases.first { k in CSVFormat.equals(f, k.name) } } },
            row: { fields, line, raw in
                for i in values.indices { values[i] = .absent }
                for (i, f) in fields.enumerated() {
                    guard let k = columns[i], f.count > 0 else { continue }
                    values[k.rawValue] = CSVFormat.typed(f, as: k)
                }
                try out.take(decoder.build(values), line: line, raw: raw)
            })
    }

    /// Reads a CSV file with a header row (docs/rules.md §2.3): `header` gets the header's
    /// fields; every other record counts as a row of the file and goes to `row` when it is
    /// well-formed CSV with as many fields as the header, else it is rejected.
    static func forEachRow(
        path: String, source: ByteSource, into out: FileRows, progress: @escaping @Sendable (Int) -> Void,
        header: ([UnsafeRawBufferPointer]) throws -> Void,
        row: ([UnsafeRawBufferPointer], Int, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var headerCount = 0
        try CSVRecordReader(source: source, maxRecordBytes: out.limits.maxLineBytes).forEachRecord(
            { fields, line, raw, malformed in
                if headerCount == 0 {
                    guard malformed == nil else {
                        throw WinBackError(.badData, "the header row is not valid CSV: \(malformed!)", path: path)
                    }
                    try header(fields)
                    headerCount = fields.count
                    return
                }
                out.stats.rows += 1
                if let malformed {
                    out.rejects.add(Reject(file: path, line: line, reason: malformed, bytes: raw))
                    return
                }
                guard fields.count == headerCount else {
                    out.rejects.add(
                        Reject(
                            file: path, line: line, reason: "expected \(headerCount) fields, found \(fields.count)",
                            bytes: raw))
                    return
                }
                try row(fields, line, raw)
            }, tooLong: out.tooLong, afterChunk: progressTap(source, progress))
        out.finish(source)
    }

    /// A cell as the JSON value the field would have had.
    static func typed(_ f: UnsafeRawBufferPointer, as k: Key) -> ScannedValue {
        switch k {
        case .purchaseDate, .expiresDate, .revocationDate, .signedDate:
            return date(f)
        case .offerType, .revocationReason, .price, .revocationPercentage:
            return integer(f) ?? .other(kind: .notInteger, raw: f)
        case .isUpgraded:
            if equals(f, "true") { return .bool(true) }
            if equals(f, "false") { return .bool(false) }
            return .other(kind: .notBoolean, raw: f)
        default:
            return .string(f)
        }
    }

    static func integer(_ f: UnsafeRawBufferPointer) -> ScannedValue? {
        var v: Int64 = 0
        var i = 0
        let negative = f.first == UInt8(ascii: "-")
        if negative { i = 1 }
        guard i < f.count else { return nil }
        while i < f.count {
            let c = f[i]
            guard c >= 48 && c <= 57 else { return nil }
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (s, o2) =
                negative ? m.subtractingReportingOverflow(Int64(c - 48)) : m.addingReportingOverflow(Int64(c - 48))
            if o1 || o2 { return nil }
            v = s
            i += 1
        }
        return .int(v)
    }

    /// Integer milliseconds, or a UTC date-time.
    static func date(_ f: UnsafeRawBufferPointer) -> ScannedValue {
        if let i = integer(f) { return i }
        if let t = Timestamp.parseDateTime(f.bindMemory(to: UInt8.self).span) { return .int(t) }
        return .other(kind: .notDate, raw: f)
    }

    @inline(__always)
    static func equals(_ s: UnsafeRawBufferPointer, _ lit: String) -> Bool {
        s.count == lit.utf8.count && zip(s, lit.utf8).allSatisfy { $0 == $1 }
    }

    /// A cell quoted in a reason: its first `limit` bytes as UTF-8, controls escaped
    /// (docs/rules.md §6).
    static func quoted(_ cell: UnsafeRawBufferPointer, _ limit: Int) -> String {
        ControlEscape.escaped(String(decoding: cell.prefix(limit), as: UTF8.self))
    }
}

/// RevenueCat's Scheduled Data Export, template v5 (docs/rules.md §2.3 `revenuecat`): gzipped CSV, only
/// `store = app_store` rows, columns mapped onto the §2.1 fields, then validated like any row.
struct RevenueCatFormat: RowFormat {
    typealias Key = TransactionDecoder.Key
    /// productId → subscription group id, from the pipeline's `products:` map.
    let products: [String: String]

    enum Column: String, CaseIterable {
        case store
        case storeTransactionId = "store_transaction_id"
        case originalStoreTransactionId = "original_store_transaction_id"
        case productIdentifier = "product_identifier"
        case startTime = "start_time"
        case endTime = "end_time"
        case refundedAt = "refunded_at"
        case isSandbox = "is_sandbox"
        case ownershipType = "ownership_type"
        case country, offer
        case offerType = "offer_type"
        case isTrialPeriod = "is_trial_period"
        case price = "price_in_purchased_currency"
        case currency = "purchased_currency"
        case isAutoRenewable = "is_auto_renewable"
        case updatedAt = "updated_at"
    }

    /// The export's columns by position; a file without the columns every row needs is not a
    /// RevenueCat export (65).
    static func columns(_ fields: [UnsafeRawBufferPointer], path: String) throws -> [Column: Int] {
        var at: [Column: Int] = [:]
        for (i, f) in fields.enumerated() {
            if let c = Column.allCases.first(where: { CSVFormat.equals(f, $0.rawValue) }) { at[c] = i }
        }
        let missing = [Column.store, .storeTransactionId, .originalStoreTransactionId, .productIdentifier, .startTime]
            .filter { at[$0] == nil }
        if !missing.isEmpty {
            throw WinBackError(
                .badData, "not a RevenueCat export: no column \(missing.map(\.rawValue).joined(separator: ", "))",
                path: path)
        }
        return at
    }

    /// Lookups by bytes, without a String per row: the products map's groups, ISO 3166's
    /// alpha-3 codes by alpha-2, and the constants a row is given.
    struct Lookups {
        let productIds: StringTable
        var groups: [[UInt8]] = []
        let alpha2 = StringTable(capacity: 300)
        var alpha3: [[UInt8]] = []
        let constants = StringTable(capacity: 16)
        let sandbox: Int32
        let production: Int32
        let freeTrial: Int32

        init(products: [String: String]) {
            productIds = StringTable(capacity: products.count + 1)
            for (product, group) in products.sorted(by: { $0.key < $1.key }) {
                _ = productIds.intern(product)
                groups.append(Array(group.utf8))
            }
            for (two, three) in ISO3166.pairs {
                _ = alpha2.intern(two)
                alpha3.append(Array(three.utf8))
            }
            sandbox = constants.intern("Sandbox")
            production = constants.intern("Production")
            freeTrial = constants.intern("FREE_TRIAL")
        }
    }

    func read(input: Input, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void) throws
    {
        let path = input.path
        let source = try openSource(input: input, inflater: inflater)
        let lookups = Lookups(products: products)
        let decoder = TransactionDecoder(table: out.table)
        decoder.environment = out.environment
        let (productIds, groups, alpha2, alpha3) = (lookups.productIds, lookups.groups, lookups.alpha2, lookups.alpha3)
        let (constants, sandbox, production, freeTrial) =
            (lookups.constants, lookups.sandbox, lookups.production, lookups.freeTrial)
        var at: [Column: Int] = [:]
        var values = [ScannedValue](repeating: .absent, count: Key.allCases.count)
        try CSVFormat.forEachRow(
            path: path, source: source, into: out, progress: progress,
            header: { at = try Self.columns($0, path: path) },
            row: { fields, line, raw in
                func reject(_ why: String) {
                    out.rejects.add(Reject(file: path, line: line, reason: why, bytes: raw))
                }
                func cell(_ c: Column) -> UnsafeRawBufferPointer? {
                    guard let i = at[c], fields[i].count > 0 else { return nil }
                    return fields[i]
                }
                func isTrue(_ c: Column) -> Bool { cell(c).map { CSVFormat.equals($0, "true") } ?? false }
                // Other stores and non-renewing products are not this pipeline's rows.
                guard let store = cell(.store), CSVFormat.equals(store, "app_store"),
                    cell(.isAutoRenewable).map({ !CSVFormat.equals($0, "false") }) ?? true
                else {
                    out.nonSubscription += 1
                    return
                }
                for i in values.indices { values[i] = .absent }
                values[Key.transactionId.rawValue] = cell(.storeTransactionId).map { .string($0) } ?? .absent
                values[Key.originalTransactionId.rawValue] =
                    cell(.originalStoreTransactionId).map { .string($0) } ?? .absent
                values[Key.productId.rawValue] = cell(.productIdentifier).map { .string($0) } ?? .absent
                if let product = cell(.productIdentifier) {
                    guard let k = productIds.find(product) else {
                        return reject(
                            "product '\(CSVFormat.quoted(product, 100))' is not in the pipeline's products map")
                    }
                    groups[Int(k)].withUnsafeBytes { values[Key.subscriptionGroupIdentifier.rawValue] = .string($0) }
                }
                values[Key.purchaseDate.rawValue] = cell(.startTime).map { CSVFormat.date($0) } ?? .absent
                values[Key.expiresDate.rawValue] = cell(.endTime).map { CSVFormat.date($0) } ?? .absent
                values[Key.revocationDate.rawValue] = cell(.refundedAt).map { CSVFormat.date($0) } ?? .absent
                values[Key.signedDate.rawValue] = cell(.updatedAt).map { CSVFormat.date($0) } ?? .absent
                constants.withBytes(isTrue(.isSandbox) ? sandbox : production) {
                    values[Key.environment.rawValue] = .string($0)
                }
                values[Key.inAppOwnershipType.rawValue] = cell(.ownershipType).map { .string($0) } ?? .absent
                if let country = cell(.country) {
                    guard let k = alpha2.find(country) else {
                        return reject("country '\(CSVFormat.quoted(country, 10))' is not in the ISO 3166 table")
                    }
                    alpha3[Int(k)].withUnsafeBytes { values[Key.storefront.rawValue] = .string($0) }
                }
                values[Key.offerIdentifier.rawValue] = cell(.offer).map { .string($0) } ?? .absent
                let trial = isTrue(.isTrialPeriod)
                var offerType: Int64 = 0
                if let name = cell(.offerType) {
                    offerType = RevenueCatFormat.offerType(name) ?? -(Int64(out.table.intern(name)) + 1)
                } else if trial {
                    offerType = OfferType.introductory.rawValue
                }
                // A named type is set on the row below: the decoder sees only a known type's number.
                if offerType > 0 { values[Key.offerType.rawValue] = .int(offerType) }
                let freePrice =
                    cell(.price).map { p in p.allSatisfy { $0 == UInt8(ascii: "0") || $0 == UInt8(ascii: ".") } }
                    ?? false
                if let price = cell(.price) {
                    values[Key.price.rawValue] =
                        RevenueCatFormat.milliunits(price).map { .int($0) } ?? .other(kind: .notInteger, raw: price)
                }
                values[Key.currency.rawValue] = cell(.currency).map { .string($0) } ?? .absent
                if trial || (offerType != 0 && freePrice) {
                    constants.withBytes(freeTrial) { values[Key.offerDiscountType.rawValue] = .string($0) }
                }
                var outcome = decoder.build(values)
                if case .row(var t) = outcome {
                    t.offerType = offerType  // keeps a named unknown type (the decoder saw only the number)
                    outcome = .row(t)
                }
                try out.take(outcome, line: line, raw: raw)
            })
    }

    /// A decimal amount in units (`4.99`, `-1`, `1200.5`) as milliunits, rounded half to even
    /// (docs/rules.md §13.1); nil when it is not a decimal or does not fit.
    static func milliunits(_ f: UnsafeRawBufferPointer) -> Int64? {
        var i = 0
        let negative = f.first == UInt8(ascii: "-")
        if negative { i = 1 }
        var whole: Int64 = 0
        var digits = 0
        while i < f.count, f[i] >= 48 && f[i] <= 57 {
            let (m, o1) = whole.multipliedReportingOverflow(by: 10)
            let (v, o2) = m.addingReportingOverflow(Int64(f[i] - 48))
            if o1 || o2 { return nil }
            whole = v
            i += 1
            digits += 1
        }
        var milli: Int64 = 0
        var places = 0
        // After the third decimal: whether the rest is above, at or below half a milliunit.
        var firstRest: UInt8 = 0
        var restNonZero = false
        if i < f.count, f[i] == UInt8(ascii: ".") {
            i += 1
            while i < f.count, f[i] >= 48 && f[i] <= 57 {
                let d = f[i] - 48
                if places < 3 {
                    milli = milli * 10 + Int64(d)
                } else if places == 3 {
                    firstRest = d
                } else if d != 0 {
                    restNonZero = true
                }
                places += 1
                digits += 1
                i += 1
            }
        }
        guard i == f.count, digits > 0 else { return nil }
        for _ in min(places, 3)..<3 { milli *= 10 }
        let (m, o1) = whole.multipliedReportingOverflow(by: 1000)
        var (v, o2) = m.addingReportingOverflow(milli)
        if o1 || o2 { return nil }
        if firstRest > 5 || (firstRest == 5 && (restNonZero || v & 1 == 1)) {
            let (u, o3) = v.addingReportingOverflow(1)
            if o3 { return nil }
            v = u
        }
        return negative ? -v : v
    }

    /// RevenueCat's offer_type names; nil for a name it does not document.
    static func offerType(_ name: UnsafeRawBufferPointer) -> Int64? {
        if CSVFormat.equals(name, "introductory_offer") || CSVFormat.equals(name, "free_trial") { return 1 }
        if CSVFormat.equals(name, "promotional_offer") { return 2 }
        if CSVFormat.equals(name, "offer_code") { return 3 }
        if CSVFormat.equals(name, "win_back_offer") { return 4 }
        return nil
    }
}
