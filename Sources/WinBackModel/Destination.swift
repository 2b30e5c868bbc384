/// An email or push tool that imports audiences as CSV (docs/rules.md §10.2), and how its import
/// wants the file: the first column, which identity column fills it, and the size it accepts.
public enum DestinationType: String, Sendable, CaseIterable, Codable {
    case braze, onesignal, iterable, customerio, airship, klaviyo, mailchimp

    /// The header of the first column, as the tool's CSV import names its identifier.
    public var firstColumn: String {
        switch self {
        case .braze, .onesignal: return "external_id"
        case .iterable: return "userId"
        case .customerio: return "id"
        case .airship: return "named_user"
        case .klaviyo: return "Email"
        case .mailchimp: return "Email Address"
        }
    }

    /// The identity file's column that fills the first column.
    public var identityColumn: String {
        switch self {
        case .klaviyo, .mailchimp: return "email"
        default: return "external_id"
        }
    }

    /// The most a file may hold for the tool's import: rows and bytes (nil: no limit).
    public var limits: (rows: Int?, bytes: Int?) {
        switch self {
        case .braze: return (nil, 500_000_000)
        case .onesignal: return (2_000_000, 150_000_000)
        case .iterable: return (2_000_000, nil)
        case .customerio: return (nil, nil)
        case .airship: return (10_000_000, 150_000_000)
        case .klaviyo: return (nil, 50_000_000)
        case .mailchimp: return (nil, nil)
        }
    }
}

/// One entry of `output.destinations`: a tool, which audience it gets, and its limits.
public struct Destination: Sendable, Equatable {
    public enum Audience: String, Sendable, Equatable {
        /// One list: the best-offer segment.
        case bestOffer = "best-offer"
        /// One list per catalog offer, from its segment.
        case perOffer = "per-offer"
    }

    public var type: DestinationType
    public var audience: Audience = .bestOffer
    /// A file is split before it would hold more data rows or bytes (header included) than this.
    public var maxRows: Int?
    public var maxBytes: Int?

    public init(type: DestinationType, audience: Audience = .bestOffer, maxRows: Int? = nil, maxBytes: Int? = nil) {
        self.type = type
        self.audience = audience
        self.maxRows = maxRows ?? type.limits.rows
        self.maxBytes = maxBytes ?? type.limits.bytes
    }

    public static func == (a: Destination, b: Destination) -> Bool {
        a.type == b.type && a.audience == b.audience && a.maxRows == b.maxRows && a.maxBytes == b.maxBytes
    }
}

/// `identities:` (docs/rules.md §10.1): the team's own ids for App Store customers.
public struct IdentitiesSource: Sendable, Equatable {
    public enum Key: String, Sendable, Equatable {
        case originalTransactionId = "original_transaction_id"
        case appAccountToken = "app_account_token"
    }

    /// As written in the pipeline file (relative to its folder).
    public var path: String
    public var key: Key
    /// `identities.columns`: a destination's identity column (`email`, `external_id`) → the
    /// column of the file that holds it, as the team names it (docs/rules.md §10.10).
    public var columns: [String: String]

    public init(path: String, key: Key, columns: [String: String] = [:]) {
        self.path = path
        self.key = key
        self.columns = columns
    }

    /// The identity columns `identities.columns` may map: those of the destinations.
    public static let mappable = Set(DestinationType.allCases.map(\.identityColumn))

    /// The column of the file that holds destination identity column `column`.
    public func fileColumn(_ column: String) -> String { columns[column] ?? column }

    /// Whether header name `a` names column `b`: ASCII letters compared without regard to case,
    /// surrounding spaces ignored (docs/rules.md §10.10).
    public static func sameColumn(_ a: String, _ b: String) -> Bool {
        func folded(_ s: String) -> [UInt8] {
            var bytes = Array(s.utf8)
            while bytes.last == 0x20 { bytes.removeLast() }
            while bytes.first == 0x20 { bytes.removeFirst() }
            return bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        }
        return folded(a) == folded(b)
    }
}
