/// The `apple:` block of a pipeline file (docs/rules.md §2.7): how signed inputs are verified.
public struct AppleSettings: Sendable, Equatable {
    public var verify = true
    /// Root certificate files (DER or PEM) as written, relative to the pipeline file's folder;
    /// empty = Apple Root CA - G3, built in.
    public var roots: [String] = []
    public var bundleId: String?
    public var appAppleId: Int64?

    public init() {}

    package static let keys: Set<String> = ["verify", "roots", "bundleId", "appAppleId"]
    package static let environments = ["Production", "Sandbox"]
}
