import WinBackModel

/// A randomised holdout (docs/rules.md §9.1): from `start` on, the customers whose bucket falls
/// below the holdout are left out of every audience, so that the campaign's effect can be
/// measured against them.
public struct Experiment: Sendable, Equatable {
    /// Who is held out: the experiment's name and share.
    package let assignment: HoldoutAssignment
    /// The first instant of the first UTC day whose audiences leave the holdout out.
    public var start: Int64

    public init(name: String, basisPoints: Int, start: Int64) {
        assignment = HoldoutAssignment(name: name, basisPoints: basisPoints)
        self.start = start
    }

    /// `[A-Za-z0-9._-]{1,64}`; a new name is a new experiment (new buckets).
    public var name: String { assignment.name }
    /// The share held out, in basis points: 1 (0.01 %) to 5 000 (50 %).
    public var basisPoints: Int { assignment.basisPoints }

    /// Whether a run at `t` leaves the holdout out of its audiences: from `start` on.
    public func applies(at t: Int64) -> Bool { t >= start }

    /// Whether `name` may name an experiment.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                    || c == 0x5F || c == 0x2D
            }
    }

    /// The holdout in basis points, from `10%`, `2.5%` (a percentage with at most two decimals)
    /// or `0.1` (a fraction with at most four); nil when it is neither, or not in 0.01 %–50 %.
    public static func basisPoints(_ text: String) -> Int? {
        var s = Substring(text)
        var scale = 4  // decimals of a fraction that make basis points
        if s.hasSuffix("%") {
            s = s.dropLast()
            scale = 2
        }
        let parts = s.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 6, whole.allSatisfy(\.isASCIIDigit) else {
            return nil
        }
        var decimals = parts.count > 1 ? String(parts[1]) : ""
        guard parts.count == 1 || !decimals.isEmpty, decimals.allSatisfy(\.isASCIIDigit) else { return nil }
        while decimals.hasSuffix("0") { decimals.removeLast() }
        guard decimals.count <= scale else { return nil }
        decimals += String(repeating: "0", count: scale - decimals.count)
        guard let w = Int(whole), let d = Int(decimals.isEmpty ? "0" : decimals) else { return nil }
        var bp = w
        for _ in 0..<scale { bp *= 10 }
        bp += d
        return (1...5_000).contains(bp) ? bp : nil
    }

    /// `10%`, `2.5%`, `0.01%`: the holdout as a percentage, for messages and pages.
    public var percent: String {
        let whole = basisPoints / 100
        let rest = basisPoints % 100
        if rest == 0 { return "\(whole)%" }
        return rest % 10 == 0 ? "\(whole).\(rest / 10)%" : "\(whole).\(rest < 10 ? "0" : "")\(rest)%"
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
