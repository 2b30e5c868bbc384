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

extension ReadStageTests {
    /// Renewal info NDJSON (docs/rules.md §2.2) and the newest version known at T.
    @Suite struct RenewalReaderTests {
        private func read(_ lines: [String], gzip: Bool = true) throws -> (
            RenewalIndex, [Reject], [InputStats], StringTable
        ) {
            try ReadSupport.withTempDir { dir in
                let text = lines.joined(separator: "\n")
                let url = dir.appendingPathComponent(gzip ? "renewal-info.jsonl.gz" : "renewal-info.jsonl")
                let path =
                    gzip ? try ReadSupport.write(ReadSupport.gzip(text), to: url) : try ReadSupport.write(text, to: url)
                let strings = StringTable()
                let (index, rejects, stats) = try RenewalReader.read(paths: [path], strings: strings)
                #expect(stats.first?.sha256 == (try ReadSupport.sha256sum(path)))
                #expect(stats.first?.uncompressedBytes == text.utf8.count)
                return (index, Array(rejects), stats, strings)
            }
        }

        @Test func everyFieldIsRead() throws {
            let (index, rejects, stats, strings) = try read([
                #"{"originalTransactionId":"2000000000000001","autoRenewStatus":0,"isInBillingRetryPeriod":true,"gracePeriodExpiresDate":1700000500000,"eligibleWinBackOfferIds":["wb.a","w\u0062.b"],"signedDate":1700000000000,"productId":"ignored","renewalDate":1,"extra":{"nested":[1,2]}}"#
            ])
            #expect(rejects.isEmpty)
            #expect(stats.first?.rows == 1)
            let orig = try #require(TransactionKey.lookup("2000000000000001", in: strings))
            let info = try #require(index.known(at: 1_700_000_000_000, originalTransactionId: orig))
            #expect(info.autoRenewStatus == 0)
            #expect(info.isInBillingRetryPeriod)
            #expect(info.gracePeriodExpiresDate == 1_700_000_500_000)
            #expect(info.eligibleWinBackOfferIds == ["wb.a", "wb.b"])
            #expect(info.signedDate == 1_700_000_000_000)
        }

        @Test func absentAndNullFieldsTakeTheirDefaults() throws {
            let (index, rejects, _, strings) = try read([
                #"{"originalTransactionId":"o1"}"#,
                #"{"originalTransactionId":"o2","autoRenewStatus":null,"isInBillingRetryPeriod":null,"gracePeriodExpiresDate":null,"eligibleWinBackOfferIds":null,"signedDate":null}"#,
                #"{"originalTransactionId":"o3","eligibleWinBackOfferIds":[]}"#,
            ])
            #expect(rejects.isEmpty)
            for id in ["o1", "o2"] {
                let orig = try #require(TransactionKey.lookup(id, in: strings))
                let info = try #require(index.known(at: 0, originalTransactionId: orig))
                #expect(info == RenewalInfo())
            }
            let o3id = try #require(TransactionKey.lookup("o3", in: strings))
            let o3 = try #require(index.known(at: 0, originalTransactionId: o3id))
            #expect(o3.eligibleWinBackOfferIds == [])
        }

        @Test func theNewestVersionSignedAtOrBeforeTIsKnown() throws {
            let (index, _, _, strings) = try read(
                [
                    #"{"originalTransactionId":"o","signedDate":300,"autoRenewStatus":3}"#,
                    #"{"originalTransactionId":"o","signedDate":100,"autoRenewStatus":1}"#,
                    "",
                    #"{"originalTransactionId":"o","signedDate":200,"autoRenewStatus":2}"#,
                    #"{"originalTransactionId":"other","signedDate":150,"autoRenewStatus":9}"#,
                ], gzip: false)
            let o = try #require(TransactionKey.lookup("o", in: strings))
            #expect(index.known(at: 99, originalTransactionId: o) == nil)
            #expect(index.known(at: 100, originalTransactionId: o)?.autoRenewStatus == 1)
            #expect(index.known(at: 199, originalTransactionId: o)?.autoRenewStatus == 1)
            #expect(index.known(at: 250, originalTransactionId: o)?.autoRenewStatus == 2)
            #expect(index.known(at: 300, originalTransactionId: o)?.autoRenewStatus == 3)
            #expect(index.known(at: .max, originalTransactionId: o)?.autoRenewStatus == 3)
            #expect(index.known(at: 1_000, originalTransactionId: TransactionKey("unknown", table: strings)) == nil)
        }

        @Test func onEqualSignedDatesTheLaterReadWinsAndUnsignedIsOldest() throws {
            let (index, _, _, strings) = try read([
                #"{"originalTransactionId":"o","signedDate":100,"autoRenewStatus":1}"#,
                #"{"originalTransactionId":"o","signedDate":100,"autoRenewStatus":2}"#,
                #"{"originalTransactionId":"o","autoRenewStatus":0}"#,
            ])
            let o = try #require(TransactionKey.lookup("o", in: strings))
            #expect(index.known(at: 100, originalTransactionId: o)?.autoRenewStatus == 2)
            #expect(index.known(at: 99, originalTransactionId: o)?.autoRenewStatus == 0)
            #expect(index.known(at: .min, originalTransactionId: o)?.autoRenewStatus == 0)
        }

        @Test func idsReadOnTheirOwnJoinTheRunsTableInTheOrderFirstRead() throws {
            try ReadSupport.withTempDir { dir in
                let path = try ReadSupport.write(
                    [
                        #"{"originalTransactionId":"b","signedDate":1,"autoRenewStatus":1}"#,
                        #"{"originalTransactionId":"2000000000000001","signedDate":1,"autoRenewStatus":2}"#,
                        #"{"originalTransactionId":"a","signedDate":1,"autoRenewStatus":3}"#,
                        #"{"originalTransactionId":"b","signedDate":2,"autoRenewStatus":4}"#,
                    ].joined(separator: "\n"), to: dir.appendingPathComponent("renewal-info.jsonl"))
                let read = try RenewalReader.read(paths: [path])
                // The run's table already holds other ids and one of these: "a" keeps its id,
                // "b" is added after them.
                let strings = StringTable()
                for s in ["x", "a", "y"] { _ = strings.intern(s) }
                let index = read.index(in: strings)
                #expect(strings.count == 4)
                #expect(strings.lookup("a") == 1)
                #expect(strings.lookup("b") == 3)
                #expect(
                    index.known(at: 1, originalTransactionId: TransactionKey("a", table: strings))?.autoRenewStatus == 3
                )
                #expect(
                    index.known(at: 9, originalTransactionId: TransactionKey("b", table: strings))?.autoRenewStatus == 4
                )
                #expect(
                    index.known(at: 1, originalTransactionId: TransactionKey("b", table: strings))?.autoRenewStatus == 1
                )
                #expect(
                    index.known(at: 1, originalTransactionId: TransactionKey(raw: 2_000_000_000_000_001))?
                        .autoRenewStatus
                        == 2)
                #expect(index.known(at: 1, originalTransactionId: TransactionKey("x", table: strings)) == nil)
            }
        }

        @Test func offerListsOfTheSameTextAreReadAlikeAndABadOneIsRejectedEachTime() throws {
            let (index, rejects, _, strings) = try read([
                #"{"originalTransactionId":"1","eligibleWinBackOfferIds":["wb.a","wb.b"]}"#,
                #"{"originalTransactionId":"2","eligibleWinBackOfferIds":["wb.a"]}"#,
                #"{"originalTransactionId":"3","eligibleWinBackOfferIds":["wb.a","wb.b"]}"#,
                #"{"originalTransactionId":"4","eligibleWinBackOfferIds":["wb.a",1]}"#,
                #"{"originalTransactionId":"5","eligibleWinBackOfferIds":["wb.a",1]}"#,
                #"{"originalTransactionId":"6","eligibleWinBackOfferIds":[]}"#,
            ])
            func list(_ id: String) -> [String]? {
                index.known(at: 0, originalTransactionId: TransactionKey(id, table: strings))?.eligibleWinBackOfferIds
            }
            #expect(list("1") == ["wb.a", "wb.b"])
            #expect(list("2") == ["wb.a"])
            #expect(list("3") == ["wb.a", "wb.b"])
            #expect(list("6") == [])
            #expect(rejects.map(\.line) == [4, 5])
            #expect(rejects.allSatisfy { $0.reason == "field eligibleWinBackOfferIds: expected an array of strings" })
        }

        @Test func theIndexOrdersWhatItIsGiven() {
            var index = RenewalIndex()
            index.add(
                originalTransactionId: TransactionKey(raw: 7), RenewalInfo(signedDate: 50, isInBillingRetryPeriod: true)
            )
            index.add(originalTransactionId: TransactionKey(raw: 7), RenewalInfo(signedDate: 10))
            index.add(
                originalTransactionId: TransactionKey(raw: 7), RenewalInfo(signedDate: 30, gracePeriodExpiresDate: 99))
            index.finish()
            #expect(index.known(at: 5, originalTransactionId: TransactionKey(raw: 7)) == nil)
            #expect(index.known(at: 40, originalTransactionId: TransactionKey(raw: 7))?.gracePeriodExpiresDate == 99)
            #expect(index.known(at: 50, originalTransactionId: TransactionKey(raw: 7))?.isInBillingRetryPeriod == true)
            #expect(!index.isEmpty)
        }

        @Test func theIndexAnswersLikeEachKeysListSortedByDate() {
            // A model: each key's infos in the order added, sorted stably by signedDate; the newest
            // known at t is the last of them signed at or before t.
            var g = SplitMix64(seed: 11, index: 0)
            var index = RenewalIndex()
            var other = RenewalIndex()
            var model: [Int64: [RenewalInfo]] = [:]
            var firstModel: [Int64: [RenewalInfo]] = [:]
            for n in 0..<600 {
                let key = Int64(g.next() % 40) - 20  // interned (negative) and numeric keys
                var info = RenewalInfo(signedDate: Int64(g.next() % 12))
                info.autoRenewStatus = Int64(n)  // tells equal dates apart
                model[key, default: []].append(info)
                if n < 400 {
                    firstModel[key, default: []].append(info)
                    index.add(originalTransactionId: TransactionKey(raw: key), info)
                } else {
                    other.add(originalTransactionId: TransactionKey(raw: key), info)
                }
            }
            let unfinished = index
            other.finish()
            index.merge(other)  // finishes; other's infos after index's
            // `index` answers as the list `infos` of key `key`, sorted stably by date, says.
            func expectAnswers(_ index: RenewalIndex, _ infos: [RenewalInfo]?, key: Int) -> [RenewalInfo] {
                let list = (infos ?? []).enumerated().sorted {
                    ($0.element.signedDate, $0.offset) < ($1.element.signedDate, $1.offset)
                }.map(\.element)
                for t in -1...13 {
                    let want = list.last { $0.signedDate <= Int64(t) }
                    let k = TransactionKey(raw: Int64(key))
                    #expect(index.known(at: Int64(t), originalTransactionId: k) == want, "key \(key) at \(t)")
                }
                return list
            }
            for key in -21...21 {
                let list = expectAnswers(index, model[Int64(key)], key: key)
                #expect(index.infos(of: TransactionKey(raw: Int64(key))) == list)
                // Before it is finished, an index answers the same (more slowly) for what it holds.
                _ = expectAnswers(unfinished, firstModel[Int64(key)], key: key)
            }
            #expect(index.keys == model.count)
            #expect(index.known(at: 5, originalTransactionId: TransactionKey(raw: 99)) == nil)
        }

        static let bad: [(line: String, field: String)] = [
            (#"{"autoRenewStatus":1}"#, "originalTransactionId"),
            (#"{"originalTransactionId":null}"#, "originalTransactionId"),
            (#"{"originalTransactionId":12}"#, "originalTransactionId"),
            (#"{"originalTransactionId":"-x"}"#, "originalTransactionId"),
            (#"{"originalTransactionId":"o","autoRenewStatus":"1"}"#, "autoRenewStatus"),
            (#"{"originalTransactionId":"o","isInBillingRetryPeriod":1}"#, "isInBillingRetryPeriod"),
            (#"{"originalTransactionId":"o","gracePeriodExpiresDate":1.5}"#, "gracePeriodExpiresDate"),
            (#"{"originalTransactionId":"o","eligibleWinBackOfferIds":"wb.a"}"#, "eligibleWinBackOfferIds"),
            (#"{"originalTransactionId":"o","eligibleWinBackOfferIds":["wb.a",1]}"#, "eligibleWinBackOfferIds"),
            (#"{"originalTransactionId":"o","eligibleWinBackOfferIds":{"a":"b"}}"#, "eligibleWinBackOfferIds"),
            (#"{"originalTransactionId":"o","eligibleWinBackOfferIds":1.5}"#, "eligibleWinBackOfferIds"),
            (#"{"originalTransactionId":"o","signedDate":"2024"}"#, "signedDate"),
            (#"{"originalTransactionId":"o","#, "invalid JSON"),
        ]

        @Test(arguments: bad)
        func aBadLineIsRejectedNamingTheField(line: String, field: String) throws {
            let (index, rejects, stats, _) = try read(["", line, #"{"originalTransactionId":"good"}"#])
            #expect(rejects.count == 1)
            #expect(rejects.first?.line == 2)
            #expect(rejects.first?.reason.contains(field) == true, "\(rejects.first?.reason ?? "")")
            #expect(stats.first?.rows == 2)
            #expect(stats.first?.rejected == 1)
            #expect(index.keys == 1)
        }

        @Test func aMissingRenewalFileIsNoInput() throws {
            #expect {
                _ = try RenewalReader.read(paths: ["/nonexistent/renewal-\(UUID()).jsonl.gz"], strings: StringTable())
            } throws: { e in
                (e as? WinBackError)?.code == .noInput
            }
        }
    }
}
