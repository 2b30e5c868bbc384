/// An object or a key prefix in S3: `s3://bucket/key` (docs/rules.md §11).
public struct S3Location: Sendable, Equatable, Hashable {
    public var bucket: String
    /// The key, without a leading `/`; may hold glob characters when it names a pattern.
    public var key: String

    public init(bucket: String, key: String) {
        self.bucket = bucket
        self.key = key
    }

    /// Parses `s3://bucket/key`; nil for anything else (or an empty bucket).
    public init?(uri: String) {
        guard uri.hasPrefix("s3://") else { return nil }
        let rest = uri.dropFirst(5)
        let bucket = rest.prefix { $0 != "/" }
        guard !bucket.isEmpty else { return nil }
        self.bucket = String(bucket)
        key = String(rest.dropFirst(bucket.count).drop { $0 == "/" })
    }

    /// Whether `path` is an `s3://` URI.
    public static func isURI(_ path: String) -> Bool { path.hasPrefix("s3://") }

    public var uri: String { "s3://\(bucket)/\(key)" }

    /// How a key prefix is written, for messages and help.
    public static let prefixForm = "s3://bucket/prefix"
}
