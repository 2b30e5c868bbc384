import WinBackModel

/// Reads the lines of an `appstore-signed` file (docs/rules.md §2.6) into a file's rows: finds
/// every JWS of a line whatever its form, decodes its payload, verifies it, and keeps the
/// transactions and renewal info it holds.
///
/// A line is one of: a bare JWS or a JSON string holding one; `{"signedPayload": …}` (a
/// notification as POSTed); `{"signedTransactions": [...]}` (a history page);
/// `{"data": [{"lastTransactions": [...]}]}` (a status response); `{"signedTransactionInfo": …,
/// "signedRenewalInfo": …}` (a notification's `data`, or one `lastTransactions` item). A
/// notification's payload adds the JWS of its `data`.
final class SignedLine {
    /// False for renewal-info files: their transactions are not rows of the run.
    var keepTransactions = true

    private let settings: SignedReading
    private let verifier: SignedDataVerifier?
    private let out: FileRows
    private let decoder: TransactionDecoder
    private let lists = RenewalReader.OfferLists()

    private let lineScanner = JSONLineScanner(keys: [
        "signedPayload", "signedTransactions", "data", "signedTransactionInfo", "signedRenewalInfo",
    ])
    private let statusScanner = JSONLineScanner(keys: ["lastTransactions"])
    private let itemScanner = JSONLineScanner(keys: ["signedTransactionInfo", "signedRenewalInfo"])
    private let dataScanner = JSONLineScanner(keys: [
        "bundleId", "appAppleId", "environment", "signedTransactionInfo", "signedRenewalInfo",
    ])

    /// The keys of a payload: the transaction decoder's (in the order of its keys), then those
    /// of renewal info and notifications.
    static let payloadKeys =
        TransactionDecoder.Key.allCases.map(\.name) + [
            "autoRenewStatus", "isInBillingRetryPeriod", "gracePeriodExpiresDate", "eligibleWinBackOfferIds",
            "autoRenewProductId", "notificationType", "data", "bundleId",
        ]
    /// Indices of the keys after the transaction decoder's (which has 22; checked in `init`).
    private enum Extra: Int {
        case autoRenewStatus = 22
        case isInBillingRetryPeriod, gracePeriodExpiresDate, eligibleWinBackOfferIds
        case autoRenewProductId, notificationType, data, bundleId
    }
    /// Fields that are dates: fractions of a millisecond are floored.
    private static let dateFields = [
        TransactionDecoder.Key.purchaseDate.rawValue, TransactionDecoder.Key.expiresDate.rawValue,
        TransactionDecoder.Key.revocationDate.rawValue, TransactionDecoder.Key.signedDate.rawValue,
        Extra.gracePeriodExpiresDate.rawValue,
    ]

    /// Per level (0: a JWS of the line, 1: one inside a notification's payload): the decoded
    /// payload, its scanner and its fields.
    private let payloads = [DecodeBuffer(), DecodeBuffer()]
    private let payloadScanners = [JSONLineScanner(keys: payloadKeys), JSONLineScanner(keys: payloadKeys)]
    private let fields: [UnsafeMutableBufferPointer<ScannedValue>]
    private let renewalFields: UnsafeMutableBufferPointer<ScannedValue>
    /// The first failure of the line being read.
    private var failure: String?
    /// For a rejected line, the decoded payload being read when it failed (`payload: {…}`), if
    /// any: every JWS line starts alike, so the payload is what tells a reader which row it was.
    private(set) var failureExcerpt: [UInt8]?
    /// The level whose payload is being read, nil before one is decoded.
    private var current: Int?
    /// Transactions found in the line being read.
    private var transactions = 0
    /// A failure that stops the run (no room for more rows), raised once the line is read.
    private var fatal: Error?

    init(settings: SignedReading, into out: FileRows) {
        precondition(Extra.autoRenewStatus.rawValue == TransactionDecoder.Key.allCases.count)
        self.settings = settings
        self.out = out
        verifier = settings.chains.map(SignedDataVerifier.init)
        decoder = TransactionDecoder(table: out.table)
        decoder.environment = out.environment
        fields = (0..<2).map { _ in
            let f = UnsafeMutableBufferPointer<ScannedValue>.allocate(capacity: SignedLine.payloadKeys.count)
            f.initialize(repeating: .absent)
            return f
        }
        renewalFields = .allocate(capacity: RenewalReader.keys.count)
        renewalFields.initialize(repeating: .absent)
    }

    deinit {
        for f in fields { f.deallocate() }
        renewalFields.deallocate()
    }

    /// Reads one non-blank line; the reason it is rejected, nil when every JWS in it was good.
    /// The good ones of a rejected line are kept all the same: each was verified on its own.
    /// Throws what stops the run (the rows no longer fit).
    func read(_ line: UnsafeRawBufferPointer) throws -> String? {
        defer { fatal = nil }
        let reason = readLine(line)
        if let fatal { throw fatal }
        return reason
    }

    private func readLine(_ line: UnsafeRawBufferPointer) -> String? {
        failure = nil
        failureExcerpt = nil
        current = nil
        transactions = 0
        defer { out.extraRows += max(0, transactions - 1) }
        let text = SignedLine.trimmed(line)
        guard let first = text.first else { return nil }
        if first == UInt8(ascii: "\"") {
            if text.count >= 2 && text.last == UInt8(ascii: "\"") {
                jws(UnsafeRawBufferPointer(rebasing: text[1..<(text.count - 1)]), level: 0)
            } else {
                note(.jwsFormat, "a JSON string without its closing quote")
            }
        } else if first == UInt8(ascii: "{") {
            object(text)
        } else {
            jws(text, level: 0)
        }
        return failure
    }

    private func note(_ step: SignedDataFailure.Step, _ detail: String) {
        note(SignedDataFailure(step, detail).reason)
    }

    private func note(_ reason: String) {
        guard failure == nil else { return }
        failure = reason
        if let current { failureExcerpt = Array("payload: ".utf8) + payloads[current].bytes.prefix(800) }
    }

    private static func trimmed(_ s: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var a = 0
        var b = s.count
        while a < b && Whitespace.contains(s[a]) { a += 1 }
        while b > a && Whitespace.contains(s[b - 1]) { b -= 1 }
        return UnsafeRawBufferPointer(rebasing: s[a..<b])
    }

    /// The text of a JSON string element (raw, with its quotes), nil for another value.
    private static func stringElement(_ raw: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard raw.count >= 2, raw.first == UInt8(ascii: "\""), raw.last == UInt8(ascii: "\"") else { return nil }
        return UnsafeRawBufferPointer(rebasing: raw[1..<(raw.count - 1)])
    }

    /// A line holding a JSON object: a notification, a history page, a status response or a
    /// notification's data.
    private func object(_ text: UnsafeRawBufferPointer) {
        guard lineScanner.scan(text) else {
            note(.jwsFormat, "invalid JSON: \(lineScanner.error)")
            return
        }
        let v = lineScanner.lastValues
        var found = signed("signedPayload", v[0], level: 0)
        switch v[1] {
        case .absent, .null: break
        case .other(.array, let raw):
            found = true
            JSONArrayElements.forEach(raw) { e in
                if let s = SignedLine.stringElement(e) {
                    jws(s, level: 0)
                } else {
                    note(.jwsFormat, "signedTransactions holds something other than a string")
                }
            }
        case let other: note(.jwsFormat, "signedTransactions is \(other.typeName), not an array")
        }
        switch v[2] {
        case .absent, .null: break
        case .other(.array, let raw):
            found = true
            JSONArrayElements.forEach(raw) { group in
                guard statusScanner.scan(group) else {
                    note(.jwsFormat, "an item of data is not an object")
                    return
                }
                guard case .other(.array, let items) = statusScanner.lastValues[0] else { return }
                JSONArrayElements.forEach(items) { item in
                    guard itemScanner.scan(item) else {
                        note(.jwsFormat, "an item of lastTransactions is not an object")
                        return
                    }
                    pair(itemScanner.lastValues[0], itemScanner.lastValues[1])
                }
            }
        case .other(.object, let raw):
            found = true
            if itemScanner.scan(raw) { pair(itemScanner.lastValues[0], itemScanner.lastValues[1]) }
        case let other: note(.jwsFormat, "data is \(other.typeName), not an array or an object")
        }
        if !v[3].isAbsent || !v[4].isAbsent {
            found = true
            pair(v[3], v[4])
        }
        if !found { note(.jwsFormat, "the line holds no signed data") }
    }

    /// A signedTransactionInfo and a signedRenewalInfo, either absent.
    private func pair(_ transaction: ScannedValue, _ renewal: ScannedValue, level: Int = 0) {
        signed("signedTransactionInfo", transaction, level: level)
        signed("signedRenewalInfo", renewal, level: level)
    }

    /// The JWS held by a field, if any: whether the field held a string.
    @discardableResult
    private func signed(_ name: StaticString, _ value: ScannedValue, level: Int) -> Bool {
        switch value {
        case .absent, .null: return false
        case .string(let s):
            jws(s, level: level)
            return true
        case let other:
            note(.jwsFormat, "\(name) is \(other.typeName), not a string")
            return false
        }
    }

    /// One JWS: decoded, verified at its signedDate, then read as what its payload holds.
    private func jws(_ text: UnsafeRawBufferPointer, level: Int) {
        guard let c = CompactJWS(text) else {
            note(.jwsFormat, "not a JWS of three segments")
            return
        }
        let payload = payloads[level]
        guard payload.decode(c.payload) else {
            note(.jwsFormat, "the payload is not base64url")
            return
        }
        let outer = current
        current = level
        defer { current = outer }
        let scanner = payloadScanners[level]
        guard scanner.scan(payload.bytes) else {
            note(.jwsFormat, "the payload is not a JSON object: \(scanner.error)")
            return
        }
        let f = fields[level]
        _ = f.update(fromContentsOf: scanner.lastValues)
        for i in SignedLine.dateFields {
            if case .other(.fraction, let raw) = f[i], let floored = SignedLine.floorMilliseconds(raw) {
                f[i] = .int(floored)
            }
        }
        if !f[TransactionDecoder.Key.transactionId.rawValue].isAbsent { transactions += 1 }
        if let verifier {
            var at = settings.now
            if case .int(let t) = f[TransactionDecoder.Key.signedDate.rawValue] { at = t }
            if let failure = verifier.verify(c, at: at) {
                note(failure.reason)
                return
            }
        }
        if !f[TransactionDecoder.Key.transactionId.rawValue].isAbsent {
            transaction(f)
        } else if !f[Extra.notificationType.rawValue].isAbsent {
            notification(f, level: level)
        } else if !f[Extra.autoRenewStatus.rawValue].isAbsent || !f[Extra.autoRenewProductId.rawValue].isAbsent {
            renewal(f, scanner: scanner)
        } else {
            note(.jwsFormat, "the payload is neither a transaction, renewal info nor a notification")
        }
    }

    /// Whether `value` is the string `expected`.
    private static func equals(_ value: ScannedValue, _ expected: String) -> Bool {
        guard case .string(let s) = value else { return false }
        return s.elementsEqual(expected.utf8)
    }

    private func checkBundle(_ value: ScannedValue) -> Bool {
        guard let want = settings.bundleId, !SignedLine.equals(value, want) else { return true }
        var found = "absent"
        if case .string(let s) = value { found = "'\(String(decoding: s.prefix(100), as: UTF8.self))'" }
        note(.bundleId, "bundleId is \(found), not '\(want)'")
        return false
    }

    private func transaction(_ f: UnsafeMutableBufferPointer<ScannedValue>) {
        guard checkBundle(f[Extra.bundleId.rawValue]), keepTransactions else { return }
        do {
            let outcome = decoder.build(UnsafeBufferPointer(rebasing: f[0..<TransactionDecoder.Key.allCases.count]))
            if let reason = try out.take(outcome) { note(reason) }
        } catch { fatal = fatal ?? error }
    }

    private func notification(_ f: UnsafeMutableBufferPointer<ScannedValue>, level: Int) {
        guard level == 0 else {
            note(.jwsFormat, "a notification inside a notification")
            return
        }
        // Some notifications (TEST, summaries) carry no transaction: nothing to read.
        guard case .other(.object, let raw) = f[Extra.data.rawValue], dataScanner.scan(raw) else { return }
        let d = dataScanner.lastValues
        guard checkBundle(d[0]) else { return }
        if let want = settings.appAppleId, SignedLine.equals(d[2], "Production") {
            guard case .int(let id) = d[1], id == want else {
                var found = "absent"
                if case .int(let id) = d[1] { found = "\(id)" }
                note(.appAppleId, "appAppleId is \(found), not \(want)")
                return
            }
        }
        pair(d[3], d[4], level: 1)
    }

    private func renewal(_ f: UnsafeMutableBufferPointer<ScannedValue>, scanner: JSONLineScanner) {
        // In the order of RenewalReader.keys.
        renewalFields[0] = f[TransactionDecoder.Key.originalTransactionId.rawValue]
        renewalFields[1] = f[Extra.autoRenewStatus.rawValue]
        renewalFields[2] = f[Extra.isInBillingRetryPeriod.rawValue]
        renewalFields[3] = f[Extra.gracePeriodExpiresDate.rawValue]
        renewalFields[4] = f[Extra.eligibleWinBackOfferIds.rawValue]
        renewalFields[5] = f[TransactionDecoder.Key.signedDate.rawValue]
        switch RenewalReader.decode(values: UnsafeBufferPointer(renewalFields), scanner: scanner, lists: lists) {
        case .success(let (original, info)):
            out.renewals.append((TransactionKey(original, table: out.table), info))
        case .failure(let bad): note(bad.reason)
        }
    }

    /// The floor of a JSON number with a fraction or exponent, nil when it does not fit.
    static func floorMilliseconds(_ raw: UnsafeRawBufferPointer) -> Int64? {
        if raw.contains(UInt8(ascii: "e")) || raw.contains(UInt8(ascii: "E")) {
            guard let d = Double(String(decoding: raw, as: UTF8.self)), d.isFinite else { return nil }
            return Int64(exactly: d.rounded(.down))
        }
        var i = 0
        let negative = raw.first == UInt8(ascii: "-")
        if negative { i = 1 }
        var v: Int64 = 0
        while i < raw.count, raw[i] != UInt8(ascii: ".") {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(Int64(raw[i] &- 48))
            if o1 || o2 { return nil }
            v = s
            i += 1
        }
        let fractional = i + 1 < raw.count && raw[(i + 1)...].contains { $0 != UInt8(ascii: "0") }
        return negative ? -v - (fractional ? 1 : 0) : v
    }
}

extension ScannedValue {
    /// Absent or `null`.
    var isAbsent: Bool {
        switch self {
        case .absent, .null: return true
        default: return false
        }
    }
}
