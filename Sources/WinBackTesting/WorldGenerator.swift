import Foundation
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackWrite

/// Options of `winback generate`.
public struct GenerateOptions: Sendable {
    public var customers: Int
    public var seed: UInt64 = 1
    /// The world's present, ms since the epoch (UTC).
    public var asOf: Int64
    /// `appstore-ndjson`, `csv`, `revenuecat` or `appstore-signed`.
    public var format: InputFormat = .appstoreNDJSON
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    /// A holdout experiment to simulate and to write into the pipeline (docs/rules.md §9.4).
    public var experiment: Experiment?
    /// Called with the customers simulated so far, after each block of them.
    public var progress: (@Sendable (Int) -> Void)?

    public init(customers: Int, seed: UInt64 = 1, asOf: Int64, format: InputFormat = .appstoreNDJSON) {
        self.customers = customers
        self.seed = seed
        self.asOf = asOf
        self.format = format
    }
}

/// What `generate` wrote.
public struct GenerateSummary: Sendable {
    public var files: [String]
    public var transactions: Int
    public var customers: Int
    /// Bytes of the transaction files, compressed.
    public var bytes: Int
}

/// Writes a realistic synthetic world: monthly transaction exports up to the as-of month
/// (duplicates across months, shuffled lines), renewal info, the team's identities, the offer
/// catalog, and a `pipeline.yaml` that runs on them and makes destination files from the
/// identities.
/// Deterministic: the same options give byte-identical files, whatever the thread count.
public enum WorldGenerator {
    static let block = 4000

    public static func generate(_ o: GenerateOptions, to directory: String) throws -> GenerateSummary {
        let format = try prepare(o, in: directory)
        let signed = format as? SignedWorldFormat
        let sim = CustomerSimulator(asOf: o.asOf, seed: o.seed, experiment: o.experiment)
        // No export is dated after the world's present: the last file is the as-of month's.
        let lastMonth = MonthMath.monthStart(o.asOf)
        var writers: [String: GzipWriter] = [:]
        let renewalWriter = o.format == .revenuecat ? nil : try GzipWriter(path: directory + "/renewal-info.jsonl.gz")
        var transactions = 0
        let identityWriter = try GzipWriter(path: directory + "/identities.csv.gz")
        try identityWriter.write(Array("original_transaction_id,app_account_token,external_id,email\n".utf8))

        var start = 0
        while start < o.customers {
            let range = start..<min(o.customers, start + block)
            // Simulate and encode in parallel; each customer's lines land in its own slot.
            let slots = ResultSlots<([(String, [UInt8])], [UInt8], [UInt8])>(count: range.count)
            try parallelFor(count: range.count, threads: o.threads) { i in
                let c = range.lowerBound + i
                slots[i] = encode(customer: c, sim, format: format, seed: o.seed, lastMonth: lastMonth)
            }
            // Bucket by month, shuffle each bucket, append to its file.
            var buckets: [String: [[UInt8]]] = [:]
            var renewals: [[UInt8]] = []
            var identities: [UInt8] = []
            for (lines, renewal, identity) in slots.all {
                for (month, line) in lines { buckets[month, default: []].append(line) }
                if !renewal.isEmpty { renewals.append(renewal) }
                identities += identity
            }
            try identityWriter.write(identities)
            var shuffler = SplitMix64(seed: o.seed ^ 0x5EED, index: UInt64(start))
            let months = buckets.keys.sorted()
            for m in months where writers[m] == nil {
                let w = try GzipWriter(path: directory + "/" + format.fileName(month: m))
                if let h = format.header { try w.write(h) }
                writers[m] = w
            }
            let mixed = months.map { buckets[$0]!.shuffled(using: &shuffler) }
            transactions += mixed.reduce(0) { $0 + $1.count }
            let shuffled = signed.map { mixed.map($0.pages) } ?? mixed
            let targets = months.map { writers[$0]! }
            try parallelFor(count: months.count, threads: o.threads) { i in
                var chunk: [UInt8] = []
                for line in shuffled[i] { chunk.append(contentsOf: line) }
                try targets[i].write(chunk)
            }
            if let renewalWriter {
                var chunk: [UInt8] = []
                for line in renewals.shuffled(using: &shuffler) { chunk.append(contentsOf: line) }
                try renewalWriter.write(chunk)
            }
            start = range.upperBound
            o.progress?(start)
        }
        try identityWriter.close()
        var files: [String] = ["identities.csv.gz"]
        var bytes = 0
        for m in writers.keys.sorted() {
            try writers[m]!.close()
            bytes += writers[m]!.compressedBytes
            files.append(format.fileName(month: m))
        }
        if let renewalWriter {
            try renewalWriter.close()
            files.append("renewal-info.jsonl.gz")
        }
        try write(GeneratedCatalog.offersJSON, to: directory + "/offers.json")
        files.append("offers.json")
        if let signed {
            try write(try TestChain.pem(signed.chain.root), to: directory + "/test-root.pem")
            files.append("test-root.pem")
        }
        try write(GeneratedCatalog.rates, to: directory + "/rates.csv")
        files.append("rates.csv")
        try write(pipeline(o, format: format), to: directory + "/pipeline.yaml")
        files.append("pipeline.yaml")
        return GenerateSummary(files: files, transactions: transactions, customers: o.customers, bytes: bytes)
    }

    /// One customer's export lines (by month), renewal line and identities line.
    static func encode(
        customer c: Int, _ sim: CustomerSimulator, format: WorldFormat, seed: UInt64, lastMonth: Int64
    ) -> ([(String, [UInt8])], [UInt8], [UInt8]) {
        let signed = format as? SignedWorldFormat
        let result = sim.simulate(c)
        var dup = SplitMix64(seed: seed ^ 0xD0_0D, index: UInt64(c))
        var lines: [(String, [UInt8])] = []
        // Signed worlds carry some customers' renewal info beside their last transaction.
        let carried = signed != nil && c % 4 == 0 ? result.renewal : nil
        for (k, row) in result.rows.enumerated() {
            var line: [UInt8] = []
            if let signed, let r = carried, k == result.rows.count - 1 {
                let json = Array(renewalLine(r).dropLast())
                signed.append(
                    row, renewal: (json, r.signedDate), variant: Int(row.transactionId % 6), to: &line)
            } else {
                format.append(row, variant: Int(row.transactionId % 6), to: &line)
            }
            let month = Timestamp.month(row.purchaseDate)
            lines.append((month, line))
            // Exports overlap: some rows come again in the next month's file (in the
            // as-of month's own file when that is the last), some re-signed later.
            if dup.chance(0.03) {
                var again = row
                if dup.chance(0.5) { again.signedDate += MonthMath.day }
                var copy: [UInt8] = []
                format.append(again, variant: k, to: &copy)
                let next = MonthMath.addMonths(MonthMath.monthStart(row.purchaseDate), 1)
                lines.append((Timestamp.month(min(next, lastMonth)), copy))
            }
        }
        var renewal: [UInt8] = []
        if let r = result.renewal, carried == nil {
            renewal = renewalLine(r)
            if let signed {
                renewal = signed.renewalLine(
                    Array(renewal.dropLast()), signedDate: r.signedDate,
                    variant: Int(r.originalTransactionId % 3))
            }
        }
        return (lines, renewal, identityLine(c, result.rows))
    }

    /// The world's export format; a folder that already holds exports is refused (64).
    static func prepare(_ o: GenerateOptions, in directory: String) throws -> WorldFormat {
        let format: WorldFormat
        switch o.format {
        case .appstoreNDJSON: format = NDJSONWorldFormat()
        case .csv: format = CSVWorldFormat()
        case .revenuecat: format = RevenueCatWorldFormat()
        case .appstoreSigned: format = try SignedWorldFormat(asOf: o.asOf)
        }
        // Exports left by an earlier world (another as-of, another size) would be read by the
        // pipeline's glob along with the new ones.
        let existing = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        if let stale = existing.first(where: { $0.hasPrefix("transactions-") || $0.hasPrefix("revenuecat-") }) {
            throw WinBackError(
                .usage, "already holds exports (\(stale)); remove them or choose another --out", path: directory)
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw WinBackError(
                .cannotCreateOutput, "cannot create the folder: \(error.localizedDescription)", path: directory)
        }
        return format
    }

    static func renewalLine(_ r: GeneratedRenewal) -> [UInt8] {
        var s = "{\"originalTransactionId\":\"\(r.originalTransactionId)\",\"autoRenewStatus\":\(r.autoRenewStatus)"
        s += ",\"isInBillingRetryPeriod\":\(r.isInBillingRetryPeriod)"
        if let g = r.gracePeriodExpiresDate { s += ",\"gracePeriodExpiresDate\":\(g)" }
        if let ids = r.eligibleWinBackOfferIds {
            s += ",\"eligibleWinBackOfferIds\":[" + ids.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        }
        s += ",\"signedDate\":\(r.signedDate),\"environment\":\"Production\"}\n"
        return Array(s.utf8)
    }

    /// The identities file's row for customer `c` (docs/rules.md §10.1): nine customers in ten
    /// have one, a team's user id and email; every tenth token is upper-case, as some apps
    /// store them.
    static func identityLine(_ c: Int, _ rows: [GeneratedTransaction]) -> [UInt8] {
        guard c % 10 != 9, let first = rows.first else { return [] }
        var token = rows.lazy.compactMap(\.appAccountToken).first ?? ""
        if c % 10 == 3 { token = token.uppercased() }
        return Array("\(first.originalTransactionId),\(token),user-\(c),user\(c)@example.com\n".utf8)
    }

    /// A pipeline file that runs on the generated folder.
    static func pipeline(_ o: GenerateOptions, format: WorldFormat) -> String {
        let glob = format.fileName(month: "*")
        let flags =
            o.experiment.map {
                " --experiment \($0.name) --holdout \($0.percent) --experiment-start \(Timestamp.date($0.start))"
            } ?? ""
        var s = """
            # Written by `winback generate --customers \(o.customers) --seed \(o.seed) --format \(o.format.rawValue)\(flags)`;
            # runs on this folder.
            name: generated
            transactions:
              format: \(o.format.rawValue)
              paths: ["\(glob)"]

            """
        if o.format == .revenuecat {
            s += "products:\n"
            for p in GeneratedCatalog.products { s += "  \(p.id): \"\(p.group)\"\n" }
        } else {
            s += "renewalInfo: [\"renewal-info.jsonl.gz\"]\n"
        }
        if o.format == .appstoreSigned {
            s += """
                apple:
                  roots: [test-root.pem]   # the test chain that signed this world, not Apple's
                  bundleId: \(SignedWorldFormat.bundleId)
                  appAppleId: \(SignedWorldFormat.appAppleId)

                """
        }
        s += """
            offers: offers.json
            asOf: \(Timestamp.iso(o.asOf))
            identities:                 # the team's ids of nine customers in ten (docs/rules.md §10.1)
              path: identities.csv.gz
              key: original_transaction_id
            output:
              directory: out
              destinations: [braze, klaviyo]

            """
        s += """
            money:                      # revenue in USD (docs/rules.md §13); the rows are priced in nine currencies
              currency: USD
              rates: rates.csv

            """
        if let e = o.experiment {
            s += """
                experiment:               # a campaign that works was simulated for the treatment
                  name: \(e.name)
                  holdout: \(e.percent)
                  start: \(Timestamp.date(e.start))

                """
        }
        return s
    }

    static func write(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) else {
            throw WinBackError(.cannotCreateOutput, "cannot write", path: path)
        }
    }
}
