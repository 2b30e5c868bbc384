import Foundation
import Testing
import WinBack
import WinBackModel
import WinBackRead
import WinBackRules
import WinBackSupport
import WinBackTestSupport
import WinBackWrite

@testable import WinBackTesting

@Suite("winback generate", .serialized, .tags(.slow))
struct WorldGeneratorTests {
    static let asOf = ms("2026-11-22")

    func generate(_ customers: Int, seed: UInt64 = 3, format: InputFormat = .appstoreNDJSON, threads: Int = 2) throws
        -> String
    {
        let dir = Paths.temporary() + "/world"
        var o = GenerateOptions(customers: customers, seed: seed, asOf: Self.asOf, format: format)
        o.threads = threads
        _ = try WorldGenerator.generate(o, to: dir)
        return dir
    }

    func contents(_ dir: String) -> [String: Data] {
        var out: [String: Data] = [:]
        for f in filesBelow(dir) { out[f] = FileManager.default.contents(atPath: dir + "/" + f) }
        return out
    }

    @Test("the same seed gives byte-identical files, whatever the thread count; another seed differs")
    func deterministic() throws {
        let a = contents(try generate(300, threads: 1))
        let b = contents(try generate(300, threads: 4))
        #expect(a.keys.sorted() == b.keys.sorted())
        #expect(a == b)
        let c = contents(try generate(300, seed: 4))
        #expect(a["transactions-2026-10.jsonl.gz"] != c["transactions-2026-10.jsonl.gz"])
    }

    @Test("the world reads without rejects and has every kind of row the rules care about")
    func realistic() throws {
        let dir = try generate(400)
        let files = try InputFiles.resolve(["transactions-*.jsonl.gz"], base: dir)
        #expect(files.count > 30)
        let set = try TransactionReader.read(inputs: files.map(InputStores.lookUp), threads: 2)
        #expect(set.rejects.isEmpty)
        let c = set.counters
        #expect(c.duplicates > 0 && c.sandbox > 0 && c.nonSubscription > 0 && c.familyShared > 0)
        let rows = set.rows
        #expect(rows.contains { $0.offerType == 1 && $0.isFreeTrial })
        #expect(rows.contains { $0.offerType == 2 })
        #expect(rows.contains { $0.offerType == 4 })
        #expect(rows.contains { $0.isUpgraded && $0.revocationDate != Transaction.never })
        #expect(rows.contains { !$0.isUpgraded && $0.revocationDate != Transaction.never })
        #expect(rows.allSatisfy { $0.purchaseDate < Self.asOf })
        _ = try OfferCatalog.load(path: dir + "/offers.json")
        let (renewals, rejects, _) = try RenewalReader.read(
            paths: [dir + "/renewal-info.jsonl.gz"], strings: set.strings)
        #expect(rejects.isEmpty && !renewals.isEmpty)
    }

    @Test("the generated pipeline runs, with customers in every state and eligible ones")
    func runs() throws {
        let dir = try generate(400)
        var o = RunOptions(pipelinePath: dir + "/pipeline.yaml", threads: 2)
        o.now = Self.asOf
        let s = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        let states = s.states
        #expect(states.active > 0 && states.churned > 0 && states.billingRetry > 0 && states.notSubscriber > 0)
        // Every subscriber is in exactly one of the three states (non-subscribers are counted apart).
        #expect(states.active + states.billingRetry + states.churned == states.customers)
        // The counts the run reports are the rows of the segment files it published, counted here.
        let free = try #require(s.eligible.first { $0.0 == "wb.basic.1m.free" }, "wb.basic.1m.free not reported")
        #expect(free.1 > 0)
        #expect(try Self.rows(s.published + "/segments/wb.basic.1m.free.csv") == free.1)
        let summer = try #require(s.eligible.first { $0.0 == "wb.basic.summer24" }, "wb.basic.summer24 not reported")
        #expect(summer.1 == 0)  // ended in 2024
        let summerFile = s.published + "/segments/wb.basic.summer24.csv"
        if FileManager.default.fileExists(atPath: summerFile) { #expect(try Self.rows(summerFile) == 0) }
    }

    /// The data rows of a published CSV file: its lines but the header.
    static func rows(_ path: String) throws -> Int {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return text.split(separator: "\n", omittingEmptySubsequences: true).count - 1
    }

    @Test(
        "apple-agreement.csv and apple-disagreements.csv hold, row for row, what the renewal info's lists and the segments at each signedDate give, counted here"
    )
    func appleAgreementCountedHere() throws {
        let dir = try generate(1500)
        let renewalPath = dir + "/renewal-info.jsonl.gz"
        let lines = String(decoding: try ReadSupport.readAll(renewalPath), as: UTF8.self).split(separator: "\n")
        // The generator's lists: signed days to weeks before the as-of. Each is moved to the
        // midnight nearest its signedDate among T and 14, 28 and 42 days before, so that winback's
        // evaluation at S is what a run as of S publishes.
        let instants = [0, 14, 28, 42].map { Self.asOf - $0 * MonthMath.day }
        var lists: [String: [String]] = [:]
        var signedAt: [String: Int64] = [:]
        var moved: [String] = []
        for line in lines.map(String.init) {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            guard let ids = object["eligibleWinBackOfferIds"] as? [Any] else {
                moved.append(line)
                continue
            }
            let original = try #require(object["originalTransactionId"] as? String)
            let signed = try #require((object["signedDate"] as? NSNumber)?.int64Value)
            #expect(signed < Self.asOf && signed >= Self.asOf - 42 * MonthMath.day, "\(original)")
            #expect(lists[original] == nil, "\(original) has two lists")
            lists[original] = try ids.map { try #require($0 as? String) }
            let s = try #require(instants.min { abs($0 - signed) < abs($1 - signed) })
            signedAt[original] = s
            let field = "\"signedDate\":\(signed)"
            try #require(line.components(separatedBy: field).count == 2, "\(line)")
            moved.append(line.replacingOccurrences(of: field, with: "\"signedDate\":\(s)"))
        }
        #expect(lists.count > 200)
        try ReadSupport.write(
            ReadSupport.gzip(moved.joined(separator: "\n") + "\n"), to: URL(fileURLWithPath: renewalPath))
        for s in instants { #expect(signedAt.values.contains(s), "no list signed at \(s)") }

        // The customers that exist at T (docs/rules.md §3 rules 1–2), from the exports.
        let customers = try Self.customersAtT(dir, asOf: Self.asOf)
        // The catalog, in its order, with each offer's group.
        let catalog = try Self.catalog(dir + "/offers.json")
        let catalogIds = Set(catalog.map(\.id))
        // winback's eligible offers at each S, best first, from the segments of a run as of S.
        var eligibleAt: [Int64: [Customer: [String]]] = [:]
        var tonight: RunSummary?
        for s in instants {
            var o = RunOptions(pipelinePath: dir + "/pipeline.yaml", output: Paths.temporary(), threads: 2)
            o.asOf = String(Self.iso(s).prefix(10))
            o.now = Self.asOf
            let run = try PipelineRun.run(o, progress: Progress(mode: .quiet))
            #expect(run.asOf == s)
            eligibleAt[s] = try Self.eligible(run.published, catalog: catalog)
            if s == Self.asOf { tonight = run }
        }
        let published = try #require(tonight).published

        // The agreement, counted here (docs/rules.md §4.5).
        var offers = [String: [Int]](uniqueKeysWithValues: catalog.map { ($0.id, [0, 0, 0, 0]) })
        var unknown: [String: Int] = [:]
        var overall = [0, 0, 0, 0]
        var top = 0
        var disagreements: [String] = []
        var movedByS = 0
        for customer in customers.sorted() {
            guard let apple = lists[customer.original], let s = signedAt[customer.original] else { continue }
            let ranked = eligibleAt[s]?[customer] ?? []
            if ranked != eligibleAt[Self.asOf]?[customer] ?? [] { movedByS += 1 }
            let a = Set(apple)
            let w = Set(ranked)
            overall[0] += 1
            if a == w { overall[1] += 1 }
            if !a.subtracting(w).isEmpty { overall[2] += 1 }
            if !w.subtracting(a).isEmpty { overall[3] += 1 }
            if let first = apple.first, first == ranked.first { top += 1 }
            for offer in catalog where offer.group == customer.group {
                var c = offers[offer.id]!
                c[0] += 1
                if a.contains(offer.id) && w.contains(offer.id) { c[1] += 1 }
                if a.contains(offer.id) && !w.contains(offer.id) { c[2] += 1 }
                if w.contains(offer.id) && !a.contains(offer.id) { c[3] += 1 }
                offers[offer.id] = c
            }
            for id in a where !catalogIds.contains(id) { unknown[id, default: 0] += 1 }
            for id in a.symmetricDifference(w) {
                let inA = a.contains(id)
                disagreements.append(
                    [
                        customer.group, customer.original, id, inA ? "eligible" : "not", inA ? "not" : "eligible",
                        Self.iso(s),
                    ].joined(separator: ","))
            }
        }
        var expected = catalog.map { o in ([o.id] + offers[o.id]!.map(String.init) + [""]).joined(separator: ",") }
        expected += unknown.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map {
            "\($0),,,\(unknown[$0]!),,"
        }
        expected.append((["*"] + overall.map(String.init) + ["\(top)"]).joined(separator: ","))

        // winback's rows, the agreement rate aside (its rounding is AppleAgreementTests').
        let report = try String(contentsOfFile: published + "/reports/apple-agreement.csv", encoding: .utf8)
        #expect(report.hasPrefix("offer_id,compared,both,apple_only,winback_only,agreement_rate,top_agreement\n"))
        let rows = report.split(separator: "\n").dropFirst().map { line -> String in
            var f = line.split(separator: ",", omittingEmptySubsequences: false)
            if f.count == 7 { f.remove(at: 5) }
            return f.joined(separator: ",")
        }
        #expect(rows == expected)
        let written = try String(contentsOfFile: published + "/reports/apple-disagreements.csv", encoding: .utf8)
        #expect(
            written.hasPrefix(
                "subscription_group_id,original_transaction_id,app_account_token,offer_id,apple,winback,"
                    + "renewal_signed_date,reasons\n"))
        let writtenRows = written.split(separator: "\n").dropFirst().map { line in
            // group, id, offer, apple, winback, S: the token and the reasons aside.
            let f = line.split(separator: ",", omittingEmptySubsequences: false)
            return [f[0], f[1], f[3], f[4], f[5], f[6]].joined(separator: ",")
        }
        #expect(writtenRows.sorted() == disagreements.sorted())

        // What the counts are made of: most agree, every kind of disagreement is there, and S matters.
        #expect(overall[0] == lists.count && overall[0] > 200)
        #expect(overall[1] * 100 > overall[0] * 70 && overall[1] < overall[0])
        #expect(overall[2] > 0 && overall[3] > 0 && top > 0)
        #expect(offers.values.contains { $0[1] > 0 } && offers.values.contains { $0[2] > 0 })
        #expect(offers.values.contains { $0[3] > 0 })
        #expect(unknown[GeneratedAppleList.retiredOfferId] ?? 0 > 0)
        #expect(movedByS > 0, "no customer's offers at S differ from those at T")
    }

    @Test(
        "every file written is one the pipeline reads, no export is dated after the as-of month, and the identities make destination files",
        arguments: InputFormat.allCases)
    func everyFileUsed(format: InputFormat) throws {
        let dir = try generate(300, format: format)
        let written = Set(filesBelow(dir))
        // Months of the exports: every one up to the as-of's (2026-11), none after.
        let months = written.compactMap { name -> String? in
            guard name.hasPrefix("transactions-") || name.hasPrefix("revenuecat-") else { return nil }
            return name.split(separator: "-", maxSplits: 1).last.map { String($0.prefix(7)) }
        }
        #expect(months.count > 30)
        #expect(months.max() == Timestamp.month(Self.asOf), "\(months.sorted().suffix(3))")
        // The pipeline names every file the generator wrote.
        let config = try PipelineConfig.load(path: dir + "/pipeline.yaml")
        let identities = try #require(config.identities, "the generated pipeline has no identities:")
        #expect(config.destinations.map(\.type.rawValue) == ["braze", "klaviyo"])
        var used = Set(try InputFiles.resolve(config.transactionPaths + config.renewalInfoPaths, base: dir))
        used.formUnion([identities.path, config.offersPath].map(config.resolve))
        used.formUnion(config.apple.roots.map(config.resolve))
        if let money = config.money { used.insert(config.resolve(money.ratesPath)) }
        used.insert(config.path)
        #expect(Set(written.map { dir + "/" + $0 }).subtracting(used).sorted() == [], "written and never read")
        // Run, the destinations hold the addressable customers of the best-offer segment.
        var o = RunOptions(pipelinePath: dir + "/pipeline.yaml", threads: 2)
        o.now = Self.asOf
        let s = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        let segment = try Self.rows(s.published + "/segments/best-offer.csv")
        #expect(segment > 0)
        for tool in ["braze", "klaviyo"] {
            let rows = try Self.rows(s.published + "/destinations/\(tool)/best-offer-001.csv")
            // Nine customers in ten have an identity row: some are left out, most are not.
            #expect(rows < segment && rows * 10 >= segment * 7, "\(tool): \(rows) of \(segment)")
        }
    }

    @Test("a folder that already holds exports is refused, so no stale month is read later")
    func refusesStaleExports() throws {
        let dir = try generate(20)
        do {
            _ = try WorldGenerator.generate(GenerateOptions(customers: 20, asOf: Self.asOf), to: dir)
            Issue.record("expected a refusal")
        } catch let e as WinBackError {
            #expect(e.code == .usage)
            #expect("\(e)".contains("already holds exports"))
        }
    }
}

extension WorldGeneratorTests {
    /// A customer: (subscription group, originalTransactionId).
    struct Customer: Hashable, Comparable {
        var group: String
        var original: String
        static func < (a: Customer, b: Customer) -> Bool { (a.group, a.original) < (b.group, b.original) }
    }

    /// `t` as the reports write timestamps.
    static func iso(_ t: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: Double(t) / 1000))
    }

    /// The catalog's offers in their order, each with its group, read as JSON.
    static func catalog(_ path: String) throws -> [(id: String, group: String)] {
        let data = try #require(FileManager.default.contents(atPath: path))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let offers = try #require(object["offers"] as? [[String: Any]])
        return try offers.map {
            (try #require($0["offerId"] as? String), try #require($0["subscriptionGroupId"] as? String))
        }
    }

    /// The customers that exist at `t` (docs/rules.md §3 rules 1–2), read from the exports as
    /// JSON: the newest signedDate of a transactionId wins; Production auto-renewable rows of
    /// their own bought before `t`, at least one with a non-empty period.
    static func customersAtT(_ dir: String, asOf t: Int64) throws -> Set<Customer> {
        var newest: [String: (signed: Int64, row: [String: Any])] = [:]
        for file in filesBelow(dir) where file.hasPrefix("transactions-") {
            let text = String(decoding: try ReadSupport.readAll(dir + "/" + file), as: UTF8.self)
            for line in text.split(separator: "\n") {
                let row = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let id = try #require(row["transactionId"] as? String)
                let signed = (row["signedDate"] as? NSNumber)?.int64Value ?? .min
                if let kept = newest[id], kept.signed > signed { continue }
                newest[id] = (signed, row)
            }
        }
        var out: Set<Customer> = []
        for (_, kept) in newest {
            let row = kept.row
            func int(_ key: String) -> Int64? { (row[key] as? NSNumber)?.int64Value }
            guard row["type"] as? String == "Auto-Renewable Subscription",
                row["environment"] as? String == "Production",
                row["inAppOwnershipType"] as? String == "PURCHASED",
                let group = row["subscriptionGroupIdentifier"] as? String,
                let original = row["originalTransactionId"] as? String,
                let purchase = int("purchaseDate"), let expires = int("expiresDate"), purchase < t
            else { continue }
            var end = expires
            if let revoked = int("revocationDate"), revoked < t, (row["isUpgraded"] as? Bool) != true {
                end = min(end, revoked)
            }
            if end > purchase { out.insert(Customer(group: group, original: original)) }
        }
        return out
    }

    /// Each customer's eligible offers, best first, from a published run's segment files: the
    /// catalog's per-offer lists say which, best-offer.csv's rank-1 offer and list say the order.
    static func eligible(_ published: String, catalog: [(id: String, group: String)]) throws -> [Customer: [String]] {
        func rows(_ name: String) throws -> [[Substring]] {
            let path = published + "/segments/" + name
            guard FileManager.default.fileExists(atPath: path) else { return [] }
            let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            let header = lines.first?.split(separator: ",", omittingEmptySubsequences: false) ?? []
            #expect(header.prefix(2) == ["subscription_group_id", "original_transaction_id"])
            return lines.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        }
        var sets: [Customer: Set<String>] = [:]
        for offer in catalog {
            for f in try rows(offer.id + ".csv") {
                sets[Customer(group: String(f[0]), original: String(f[1])), default: []].insert(offer.id)
            }
        }
        var ranked: [Customer: [String]] = [:]
        for f in try rows("best-offer.csv") {
            // offer_id (rank 1) and eligible_offer_ids (all, best first): the 10th and 12th columns.
            let customer = Customer(group: String(f[0]), original: String(f[1]))
            let list = f[11].split(separator: ";").map(String.init)
            #expect(list.first == String(f[9]), "\(customer)")
            #expect(Set(list) == sets[customer], "\(customer)")
            ranked[customer] = list
        }
        #expect(Set(ranked.keys) == Set(sets.keys))
        return ranked
    }
}
