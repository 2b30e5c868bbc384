import Foundation

/// Sizes of memory as people write them: `2GB`, `512MB`, `96MiB`, `1G`, or bytes.
public enum MemorySize {
    /// Bytes of `s`, or nil when it is not a size of at least 32 MB. Decimal (kB, MB, GB, TB)
    /// and binary (KiB, MiB, GiB, TiB) units; a bare K, M, G, T is binary.
    public static func parse(_ s: String) -> Int? {
        guard let b = bytes(s), b >= 32_000_000 else { return nil }
        return b
    }

    /// Bytes of `s`, any positive size, or nil when it is not a size.
    public static func bytes(_ s: String) -> Int? {
        let t = s.trimmingCharacters(in: .whitespaces)
        let digits = t.prefix { $0.isNumber || $0 == "." }
        guard let value = Double(digits), value > 0 else { return nil }
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
        default: return nil
        }
        let bytes = value * scale
        guard bytes >= 1, bytes < 1e18 else { return nil }
        return Int(bytes)
    }
}
