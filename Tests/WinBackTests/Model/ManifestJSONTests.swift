import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackDelivery
@testable import WinBackHistory
@testable import WinBackIncremental
@testable import WinBackModel
@testable import WinBackRules

/// The manifest is written through JSONEncoder (`JSONValue.prettySorted()`), and its bytes are
/// those of Foundation's JSONSerialization, the writer it replaced (docs/rules.md §4.4).
@Suite("The manifest's JSON is JSONSerialization's, written by JSONEncoder")
struct ManifestJSONTests {
    /// JSONSerialization's bytes for `object`: the reference.
    static func reference(_ object: Any) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    }

    @Test("strings of every control, escape and plane, numbers, booleans, null and empty containers")
    func valuesAreWrittenAlike() throws {
        var strings = (0..<0x250).map { String(Unicode.Scalar($0)!) }
        strings += ["\u{2028}\u{2029}", "😀", "a/b//c", "\u{FEFF}", "\\\"", "é/\u{1}\"\\", ""]
        var doubles: [Double] = [0, 1, 0.1, 0.001, 1e-5, 2.5e-7, 1.0 / 3, 123_456.789, 1e16, 1e21, -0.5, 12]
        doubles += (0..<2_000).map { Double($0) / 1000 }
        let object: [String: Any] = [
            "strings": strings, "doubles": doubles,
            "integers": [0, -1, Int.max, Int.min, 1 << 53, (1 << 53) + 1],
            "flags": [true, false], "count": 1, "flag": true, "nothing": NSNull(),
            "empty": [Any](), "emptyObject": [String: Any](),
            "nested": ["inputs": [["path": "data/x.gz", "bytes": 4, "sha256": "ab"]], "seconds": 0.123],
        ]
        let value = try #require(JSONValue(any: object))
        #expect(try value.prettySorted() == Self.reference(object))
    }

    @Test("a value JSON has no type for gives no document")
    func otherValuesAreRefused() {
        #expect(JSONValue(any: ["date": Date()]) == nil)
        #expect(JSONValue(any: [1: "a"]) == nil)
        #expect(JSONValue(any: ["a": [UInt8(1)]]) == nil)
        #expect(JSONValue(any: ["a": 1, "b": true]) == .object(["a": .int(1), "b": .bool(true)]))
    }

    /// JSONSerialization sorts keys without regard to case and reads digits as numbers; the
    /// encoder sorts them bytewise. Every key a manifest has orders the same both ways.
    @Test("the manifest's keys order alike bytewise and as JSONSerialization sorts them")
    func manifestKeysOrderAlike() throws {
        var m = Manifest()
        m.error = "a/b"
        m.memory = (limit: 64_000_000, shards: 4, peakResidentBytes: 1)
        m.eligible = [("offer-a", 3)]
        m.planTypes = ["offer-a": "monthly"]
        m.stages = [("read", 0.1234), ("write", 1)]
        m.droppedByApple = [("offer-a", 0), ("best-offer", 0)]
        m.destinations = [
            DestinationCount(
                type: .braze, audience: .bestOffer, files: 1, rows: 2, unaddressable: 3, exited: 4, folded: 5,
                withoutLink: 6)
        ]
        m.identities = IdentityCount(path: "data/identities.csv.gz", rows: 3, duplicates: 1, rejected: 0)
        m.incremental = IncrementalSummary(
            state: "rebuilt", reason: "a/b", filesRead: 2, filesFromState: 5, rowsInState: 9, read: ["data/x.gz"])
        m.pruned = PrunePlan(keepDays: 35, dates: ["2026-10-01"], failed: ["2026-10-02"])
        m.changes = ChangesSummary(
            baseline: nil, segments: [SegmentChangeCount(segment: "best-offer", entered: 1, exited: 2, changed: 3)])
        m.money = MoneySettings(currency: "USD", ratesPath: "data/rates.csv", horizonMonths: 3)
        m.experiment = Experiment(name: "winback-2026h2", basisPoints: 1_000, start: 0)
        m.heldOut = [("offer-a", 1), ("best-offer", 2)]
        let bytes = m.json()
        let object = try JSONSerialization.jsonObject(with: Data(bytes))
        #expect(Array(try Self.reference(object)) + [UInt8(ascii: "\n")] == bytes)
        // With the blocks of a signed run's and an object store's inputs, which need more to build.
        let keys = Self.keys(of: object).union(["signatures", "verified", "roots", "etag", "date", "manifestSHA256"])
        #expect(keys.count > 80)
        for a in keys {
            for b in keys where Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) {
                #expect(
                    a.compare(b, options: [.caseInsensitive, .numeric]) != .orderedDescending,
                    "\(a) and \(b) order differently")
            }
        }
    }

    /// Every key of `object`'s objects, at any depth.
    static func keys(of object: Any) -> Set<String> {
        switch object {
        case let o as [String: Any]: return Set(o.keys).union(o.values.flatMap { keys(of: $0) })
        case let a as [Any]: return Set(a.flatMap { keys(of: $0) })
        default: return []
        }
    }
}
