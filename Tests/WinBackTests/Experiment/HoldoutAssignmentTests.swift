import Testing

@testable import WinBackRules

@Suite("Holdout assignment: a SHA-256 bucket per customer")
struct HoldoutAssignmentTests {
    static let experiment = HoldoutAssignment(name: "winback-2026h2", basisPoints: 1_000)

    /// Buckets computed independently (Python's hashlib over the same UTF-8 text).
    @Test(
        "buckets equal SHA-256 computed by hand",
        arguments: [
            ("winback-2026h2", "21482345", "2000000000000001", 8151),
            ("winback-2026h2", "21482345", "2000000000000002", 7262),
            ("winback-2026h2", "21482345", "abc.def:1", 6713),
            ("winback-2026h2", "21482345", "3000000000002439", 1000),
            ("café-test", "g", "o", 7263),
        ])
    func buckets(name: String, group: String, id: String, bucket: Int) {
        let a = HoldoutAssignment(name: name, basisPoints: 1_000)
        #expect(a.bucket(group: group, originalTransactionId: id) == bucket)
    }

    @Test("a bucket exactly at the threshold is in treatment; one basis point more holds it out")
    func threshold() {
        let id = "3000000000002439"  // bucket 1 000
        #expect(!Self.experiment.isHeldOut(group: "21482345", originalTransactionId: id))
        let more = HoldoutAssignment(name: "winback-2026h2", basisPoints: 1_001)
        #expect(more.isHeldOut(group: "21482345", originalTransactionId: id))
        #expect(!Self.experiment.isHeldOut(group: "21482345", originalTransactionId: "2000000000000001"))
    }

    @Test("another experiment name or group is another draw")
    func independentDraws() {
        let other = HoldoutAssignment(name: "winback-2027h1", basisPoints: 1_000)
        let ids = (0..<200).map { "2000000000\($0)" }
        let a = ids.map { Self.experiment.bucket(group: "21482345", originalTransactionId: $0) }
        let b = ids.map { other.bucket(group: "21482345", originalTransactionId: $0) }
        let c = ids.map { Self.experiment.bucket(group: "21482346", originalTransactionId: $0) }
        #expect(a != b && a != c)
        #expect(a.allSatisfy { (0..<10_000).contains($0) })
        // About a tenth of 200 customers held out at 10 %.
        let held = a.filter { $0 < 1_000 }.count
        #expect(held >= 5 && held <= 40)
    }
}
