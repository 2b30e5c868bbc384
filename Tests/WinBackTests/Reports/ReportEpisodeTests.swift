import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Offer episodes: conversion and pending (docs/rules.md §4.3)")
struct ReportEpisodeTests {
    let t = "2026-11-22T00:00:00Z"

    func episodes(_ w: TestWorld, _ rows: [Transaction], gapDays: Int64 = 60) -> [Episode] {
        var out: [Episode] = []
        Episode.scan(w.ordered(rows), asOf: ms(t), gapDays: gapDays, into: &out)
        return out
    }

    @Test(
        "rows of one offer at most the gap apart are one episode; one millisecond more starts another",
        arguments: [
            // The first row expires 2026-02-01T12:00; 60 days later is 2026-04-02T12:00.
            ("2026-04-02T12:00:00Z", 1),
            ("2026-04-02T12:00:00.001Z", 2),
        ] as [(String, Int)])
    func gapSplitsEpisodes(second: String, count: Int) {
        let w = TestWorld()
        let rows = [
            w.discount(
                w.tx("2026-01-01T12:00:00Z", "2026-02-01T12:00:00Z", offerType: 2, offerId: "p"), "PAY_AS_YOU_GO"),
            w.discount(w.tx(second, "2026-05-05T12:00:00Z", offerType: 2, offerId: "p"), "PAY_AS_YOU_GO"),
        ]
        let e = episodes(w, rows)
        #expect(e.count == count)
        #expect(e[0].start == ms("2026-01-01T12:00:00Z"))
        #expect(e.last?.end == ms("2026-05-05T12:00:00Z"))
    }

    @Test(
        "converted when the next row is paid, without an offer, and starts at most the gap after the end",
        arguments: [
            ("2026-04-02T12:00:00Z", false, 0 as Int64, nil, Episode.Outcome.converted),
            ("2026-04-02T12:00:00.001Z", false, 0, nil, .lapsed),  // 60 days and 1 ms
            ("2026-02-01T12:00:00Z", true, 0, nil, .lapsed),  // a free trial is not paid
            ("2026-02-01T12:00:00Z", false, 2, nil, .lapsed),  // another offer follows
            ("2026-02-01T12:00:00Z", false, 0, "2026-02-10T00:00:00Z", .lapsed),  // refunded: not paid
            ("2026-02-01T12:00:00Z", false, 0, "2026-12-01T00:00:00Z", .converted),  // refund not known at T
        ] as [(String, Bool, Int64, String?, Episode.Outcome)])
    func conversion(next: String, free: Bool, offerType: Int64, revoked: String?, expected: Episode.Outcome) {
        let w = TestWorld()
        let rows = [
            w.tx("2026-01-01T12:00:00Z", "2026-02-01T12:00:00Z", free: true, offerType: 1),
            w.tx(
                next, "2026-05-01T12:00:00Z", free: free, offerType: offerType, offerId: offerType == 0 ? nil : "q",
                revoked: revoked),
        ]
        #expect(episodes(w, rows).first?.outcome == expected)
    }

    @Test(
        "pending when nothing follows and the episode ended less than the gap before T",
        arguments: [
            // T − 60 days = 2026-09-23T00:00.
            ("2026-09-23T00:00:00Z", Episode.Outcome.lapsed),
            ("2026-09-23T00:00:00.001Z", .pending),
            ("2026-12-01T00:00:00Z", .pending),  // still running at T
        ] as [(String, Episode.Outcome)])
    func pending(end: String, expected: Episode.Outcome) {
        let w = TestWorld()
        let rows = [w.tx("2026-08-01T00:00:00Z", end, free: true, offerType: 4, offerId: "wb")]
        #expect(
            episodes(w, rows) == [
                Episode(
                    offerType: 4, offerIdentifier: w.id("wb"), discountType: w.id("FREE_TRIAL"),
                    start: ms("2026-08-01"),
                    end: ms(end), outcome: expected)
            ])
    }

    @Test("family-shared rows and rows not yet purchased at T neither extend nor follow an episode")
    func onlyPurchasedRowsKnownAtT() {
        let w = TestWorld()
        let rows = [
            w.tx("2026-10-01T12:00:00Z", "2026-11-01T12:00:00Z", free: true, offerType: 4, offerId: "wb"),
            w.tx("2026-11-01T12:00:00Z", "2026-12-01T12:00:00Z", family: true),
            w.tx("2026-11-22T00:00:00Z", "2026-12-22T00:00:00Z"),  // purchased at T: not known at T
        ]
        let e = episodes(w, rows)
        #expect(e.count == 1)
        #expect(e.first?.end == ms("2026-11-01T12:00:00Z"))
        #expect(e.first?.outcome == .pending)
    }
}
