/// The form of a pipeline's transaction files (`transactions.format`, docs/rules.md §2): each
/// is read by its own `RowFormat`, and none is a default for a name nobody knows.
public enum InputFormat: String, Sendable, CaseIterable, Codable {
    /// One App Store Server API transaction, decoded, per line.
    case appstoreNDJSON = "appstore-ndjson"
    case csv
    /// RevenueCat's transaction export: products map to subscription groups (`products:`).
    case revenuecat
    /// Apple's signed transactions (JWS), verified as they are read.
    case appstoreSigned = "appstore-signed"
}
