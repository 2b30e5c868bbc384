import Foundation

/// `manifest.json` (SPEC §4.4): what a run read, counted, wrote and how long each stage took.
public struct Manifest {
    public static let toolVersion = "0.1.0"

    public var pipeline = ""
    public var asOf: Int64 = 0
    public var started = Date()
    public var finished = Date()
    public var status = "succeeded"
    public var error: String?
    public var threads = 1
    /// The library that inflated `.gz` inputs.
    public var inflater = "zlib"
    public var inputs: [InputStats] = []
    public var renewalInputs: [InputStats] = []
    public var counters = ReadCounters()
    public var renewalRejected = 0
    public var states = StateCounts()
    public var eligible: [(String, Int)] = []
    public var outputs: [OutputStats] = []
    public var stages: [(String, Double)] = []
    /// The transactions' format, and for signed inputs how they were verified.
    public var format = "appstore-ndjson"
    public var signed: SignedReading?

    public init() {}

    static func iso(_ d: Date) -> String { Timestamp.iso(Int64((d.timeIntervalSince1970 * 1000).rounded())) }

    func input(_ s: InputStats) -> [String: Any] {
        [
            "path": s.path, "bytes": s.bytes, "uncompressedBytes": s.uncompressedBytes, "sha256": s.sha256,
            "rows": s.rows, "rejected": s.rejected,
        ]
    }

    public func json() -> [UInt8] {
        var d: [String: Any] = [
            "tool": "winback", "toolVersion": Manifest.toolVersion, "pipeline": pipeline,
            "asOf": Timestamp.iso(asOf), "started": Manifest.iso(started), "finished": Manifest.iso(finished),
            "status": status, "threads": threads, "inflater": inflater,
            "inputs": inputs.map(input), "renewalInputs": renewalInputs.map(input),
            "counters": [
                "rowsRead": counters.rowsRead, "duplicates": counters.duplicates, "sandbox": counters.sandbox,
                "otherEnvironment": counters.otherEnvironment, "lines": counters.lines,
                "nonSubscription": counters.nonSubscription, "familyShared": counters.familyShared,
                "rejected": counters.rejected, "renewalRejected": renewalRejected, "customers": states.customers,
                "active": states.active, "billingRetry": states.billingRetry, "churned": states.churned,
                "notSubscriber": states.notSubscriber,
            ] as [String: Any],
            "eligible": eligible.map { ["offerId": $0.0, "customers": $0.1] as [String: Any] },
            "outputs": outputs.map {
                ["path": $0.path, "bytes": $0.bytes, "rows": $0.rows, "sha256": $0.sha256] as [String: Any]
            },
            "stageSeconds": stages.map { ["stage": $0.0, "seconds": ($0.1 * 1000).rounded() / 1000] as [String: Any] },
        ]
        if let error { d["error"] = error }
        d["format"] = format
        if let signed {
            d["signatures"] =
                [
                    "verified": signed.verifies,
                    "roots": signed.roots.map { ["path": $0.path, "sha256": $0.sha256] },
                ] as [String: Any]
        }
        let data = (try? JSONSerialization.data(withJSONObject: d, options: [.prettyPrinted, .sortedKeys])) ?? Data()
        return Array(data) + [UInt8(ascii: "\n")]
    }
}
