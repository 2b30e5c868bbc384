import Foundation
import Testing
import WinBackTestSupport

@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackSupport

/// The csv and revenuecat formats read row by row (docs/rules.md §2.3): records, typing and
/// RevenueCat's mapping, on small files written here. The golden world in these formats is run
/// end to end in the slow target.
@Suite("Export formats: csv and revenuecat (docs/rules.md §2.3)")
struct ExportFormatTests {
    /// Reads CSV text through the record reader: (line, fields or problem).
    func records(_ text: String) throws -> [(Int, [String], String?)] {
        let dir = Paths.temporary()
        try text.write(toFile: dir + "/t.csv", atomically: true, encoding: .utf8)
        var out: [(Int, [String], String?)] = []
        try CSVRecordReader(source: try openSource(path: dir + "/t.csv"), chunkSize: 16).forEachRecord {
            fields, line, _, bad in
            out.append((line, fields.map { String(decoding: $0, as: UTF8.self) }, bad))
        }
        return out
    }

    @Test("RFC 4180: quotes, doubled quotes, commas and line breaks in fields, CRLF, BOM, blank lines")
    func recordReader() throws {
        let text = "\u{FEFF}a,b,c\r\n\"x,1\",\"say \"\"hi\"\"\",\"two\nlines\"\r\n\n  \n,,\nlast,row,\"no newline\""
        let r = try records(text)
        #expect(r.map(\.0) == [1, 2, 6, 7])
        #expect(r[0].1 == ["a", "b", "c"])
        #expect(r[1].1 == ["x,1", "say \"hi\"", "two\nlines"])
        #expect(r[2].1 == ["", "", ""])
        #expect(r[3].1 == ["last", "row", "no newline"])
        #expect(r.allSatisfy { $0.2 == nil })
    }

    @Test("malformed records are flagged with their line: unbalanced quote, text after a closing quote")
    func malformed() throws {
        let r = try records("a,b\n\"x\"y,1\nok,2\n\"open,3\nmore\n")
        #expect(r.count == 4)
        #expect(r[1].0 == 2 && r[1].2?.contains("after the closing quote") == true)
        #expect(r[2].0 == 3 && r[2].1 == ["ok", "2"] && r[2].2 == nil)
        // The quote opened on line 4 swallows the rest of the file.
        #expect(r[3].0 == 4 && r[3].2?.contains("unbalanced quote") == true)
        let open = try records("a,b\nok,1\n\"never closed,2\nstill open\n")
        #expect(open.last?.0 == 3)
        #expect(open.last?.2?.contains("unbalanced quote") == true)
    }

    func readRevenueCat(_ rows: [String], products: [String: String] = ["basic": "g1"]) throws -> TransactionSet {
        let header =
            "store,store_transaction_id,original_store_transaction_id,product_identifier,start_time,end_time,"
            + "refunded_at,is_sandbox,ownership_type,country,offer,offer_type,is_trial_period,"
            + "price_in_purchased_currency,is_auto_renewable,updated_at"
        let path = try file("rc.csv", [header] + rows)
        return try TransactionReader.read(
            inputs: [path].map(InputStores.lookUp), format: .revenuecat, products: products, threads: 1)
    }

    /// `lines` written as the file `name` of a new folder: its path.
    func file(_ name: String, _ lines: [String]) throws -> String {
        let path = Paths.temporary() + "/" + name
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("RevenueCat rows map onto transactions: groups, countries, offers, trials, refunds, newest updated_at")
    func revenueCatMapping() throws {
        let set = try readRevenueCat([
            "app_store,t1,o1,basic,2026-01-01 08:27:06,2026-01-08 08:27:06,,false,PURCHASED,US,,,true,0,true,2026-01-01 08:27:07",
            "app_store,t2,o1,basic,2026-01-08 08:27:06,2026-02-08 08:27:06,2026-01-20 00:00:00,false,PURCHASED,CA,wb.x,win_back_offer,false,0,true,2026-01-08 08:27:07",
            "app_store,t3,o1,basic,2026-02-08 08:27:06,2026-03-08 08:27:06,,false,PURCHASED,GB,spring,mystery_offer,false,4.99,true,2026-02-08 08:27:07",
            "app_store,t3,o1,basic,2026-02-08 08:27:06,2026-04-08 08:27:06,,false,PURCHASED,GB,spring,mystery_offer,false,4.99,true,2026-02-09 00:00:00",
            "play_store,g1,g1,basic,2026-01-01 00:00:00,2026-02-01 00:00:00,,false,PURCHASED,US,,,false,1,true,2026-01-01 00:00:00",
            "app_store,t4,o2,basic,2026-01-01 00:00:00,2026-02-01 00:00:00,,false,PURCHASED,US,,,false,1,false,2026-01-01 00:00:00",
            "app_store,t5,o3,basic,2026-01-01 00:00:00,2026-02-01 00:00:00,,true,PURCHASED,US,,,false,1,true,2026-01-01 00:00:00",
        ])
        let s = set.strings
        #expect(set.counters.nonSubscription == 2)  // the other store, the non-renewing product
        #expect(set.counters.sandbox == 1)
        #expect(set.counters.duplicates == 1)
        #expect(set.rejects.isEmpty)
        let byId = Dictionary(uniqueKeysWithValues: set.rows.map { (s.string($0.transactionId), $0) })
        let trial = try #require(byId["t1"])
        #expect(s.string(trial.subscriptionGroupId) == "g1")
        #expect(s.string(trial.storefront) == "USA")
        #expect(trial.offerType == 1 && trial.isFreeTrial)
        #expect(trial.purchaseDate == ms("2026-01-01T08:27:06Z"))
        let winBack = try #require(byId["t2"])
        #expect(winBack.offerType == 4 && s.string(winBack.offerIdentifier) == "wb.x" && winBack.isFreeTrial)
        #expect(winBack.revocationDate == ms("2026-01-20"))
        #expect(s.string(winBack.storefront) == "CAN")
        let named = try #require(byId["t3"])
        #expect(OfferType.label(named.offerType, strings: s) == "unknown:mystery_offer")
        #expect(!named.isFreeTrial)
        #expect(named.expiresDate == ms("2026-04-08T08:27:06Z"))  // the newer updated_at won
    }

    @Test("RevenueCat rows are rejected for an unknown country or a product missing from the map")
    func revenueCatRejects() throws {
        let set = try readRevenueCat([
            "app_store,t1,o1,basic,2026-01-01 00:00:00,2026-02-01 00:00:00,,false,PURCHASED,ZZ,,,false,1,true,2026-01-01 00:00:00",
            "app_store,t2,o1,premium,2026-01-01 00:00:00,2026-02-01 00:00:00,,false,PURCHASED,US,,,false,1,true,2026-01-01 00:00:00",
            "app_store,t3,o1,basic,2026-01-01 00:00:00,,,false,PURCHASED,US,,,false,1,true,2026-01-01 00:00:00",
            "app_store,t4,o1,basic,2026-01-01 00:00:00,2026-02-01 00:00:00,,false,PURCHASED,,,,false,1,true,2026-01-01 00:00:00",
        ])
        #expect(set.rejects.map(\.line) == [2, 3, 4])
        #expect(set.rejects[0].reason.contains("country 'ZZ'"))
        #expect(set.rejects[1].reason.contains("product 'premium' is not in the pipeline's products map"))
        #expect(set.rejects[2].reason.contains("expiresDate"))
        #expect(set.rows.count == 1)  // an empty country is an absent storefront, not an error
        #expect(set.rows[0].storefront == Transaction.none)
    }

    @Test("CSV cells are typed like JSON fields: bad integers, booleans and dates are rejected by field")
    func csvTyping() throws {
        let path = try file(
            "t.csv",
            [
                "transactionId,originalTransactionId,subscriptionGroupIdentifier,productId,purchaseDate,expiresDate,isUpgraded,offerType",
                "t1,o1,g,p,2026-01-01T00:00:00Z,2026-02-01 00:00:00,true,4",
                "t2,o1,g,p,yesterday,2026-02-01T00:00:00Z,,",
                "t3,o1,g,p,1767225600000,1769904000000,maybe,",
                "t4,o1,g,p,1767225600000,1769904000000,,1.5",
                "t5,o1,g,p,1767225600000,1767225599999,,",
            ])
        let set = try TransactionReader.read(inputs: [path].map(InputStores.lookUp), format: .csv, threads: 1)
        #expect(set.rows.count == 1)
        #expect(set.rows.first?.isUpgraded == true && set.rows.first?.offerType == 4)
        #expect(set.rows.first?.expiresDate == ms("2026-02-01"))
        #expect(set.rejects.map(\.line) == [3, 4, 5, 6])
        #expect(set.rejects[0].reason.contains("purchaseDate"))
        #expect(set.rejects[1].reason.contains("isUpgraded"))
        #expect(set.rejects[2].reason.contains("offerType"))
        #expect(set.rejects[3].reason.contains("expiresDate before purchaseDate"))
    }
}
