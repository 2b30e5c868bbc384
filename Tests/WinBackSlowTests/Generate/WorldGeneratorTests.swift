import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

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
        "renewal info carries Apple's list as winback's rules find it at its signedDate, days to weeks before the as-of, with a few disagreements of each kind"
    )
    func appleLists() throws {
        let dir = try generate(1500)
        var o = RunOptions(pipelinePath: dir + "/pipeline.yaml", threads: 2)
        o.now = Self.asOf
        let s = try PipelineRun.run(o, progress: Progress(mode: .quiet))
        let text = try String(contentsOfFile: s.published + "/reports/apple-agreement.csv", encoding: .utf8)
        let rows = text.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        let overall = try #require(rows.last)
        let compared = Int(overall[1])!
        let agreeing = Int(overall[2])!
        #expect(compared > 200)
        // Most agree; some do not, each way, and Apple lists an id the catalog lacks.
        #expect(agreeing * 100 > compared * 85 && agreeing < compared)
        #expect(Int(overall[3])! > 0 && Int(overall[4])! > 0)
        #expect(rows.contains { $0[0] == Substring(GeneratedAppleList.retiredOfferId) })
        let disagreements = try String(
            contentsOfFile: s.published + "/reports/apple-disagreements.csv", encoding: .utf8)
        #expect(disagreements.contains(",eligible,not,") && disagreements.contains(",not,eligible,"))

        let (renewals, _, _) = try RenewalReader.read(paths: [dir + "/renewal-info.jsonl.gz"], strings: StringTable())
        var listed = 0
        for list in renewals.byOriginal.values {
            for info in list where info.eligibleWinBackOfferIds != nil {
                listed += 1
                #expect(info.signedDate < Self.asOf && info.signedDate >= Self.asOf - 42 * MonthMath.day)
            }
        }
        #expect(listed == compared)
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
