import Foundation

/// Sizes of memory as people write them: `2GB`, `512MB`, `96MiB`, `1G`, or bytes.
public enum MemorySize {
    /// The least memory a partitioned run is given (docs/rules.md §8): 32 MB.
    public static let minimum = 32_000_000

    /// A size read, or why the text is not one.
    public enum Reading: Equatable, Sendable {
        case bytes(Int)
        /// A message to follow the option or field's name: `'8MB' is below the 32 MB minimum`.
        case problem(String)
    }

    /// Bytes of `s`, or nil when it is not a size of at least 32 MB. Decimal (kB, MB, GB, TB)
    /// and binary (KiB, MiB, GiB, TiB) units; a bare K, M, G, T is binary.
    public static func parse(_ s: String) -> Int? {
        if case .bytes(let b) = read(s) { return b }
        return nil
    }

    /// Bytes of `s`, any size of at least a byte (limits other than memory), or nil.
    public static func bytes(_ s: String) -> Int? {
        if case .bytes(let b) = read(s, atLeast: 1) { return b }
        return nil
    }

    /// Bytes of `s`, or what is wrong with it: not a size, or below `atLeast` (``minimum``).
    public static func read(_ s: String, atLeast: Int = minimum) -> Reading {
        let t = s.trimmingCharacters(in: .whitespaces)
        let digits = t.prefix { $0.isNumber || $0 == "." }
        let notASize = Reading.problem("'\(s)' is not a size such as 2GB, 512MB or 96MiB (at least 32 MB)")
        guard let value = Double(digits), value > 0 else { return notASize }
        let unit = t.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        let scale: Double
        switch unit {
        case "", "b": scale = 1
        case "kb": scale = 1e3
        case "mb": scale = 1e6
        case "gb": scale = 1e9
        case "tb": scale = 1e12
        case "k", "kib": scale = 1024
        case "m", "mib": scale = 1024 * 1024
        case "g", "gib": scale = 1024 * 1024 * 1024
        case "t", "tib": scale = 1024 * 1024 * 1024 * 1024
        default: return notASize
        }
        let bytes = value * scale
        guard bytes >= Double(atLeast) else { return .problem("'\(s)' is below the 32 MB minimum") }
        guard bytes < 1e18 else { return .problem("'\(s)' is more memory than any machine has") }
        return .bytes(Int(bytes))
    }
}
