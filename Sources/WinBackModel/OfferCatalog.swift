import Foundation
import WinBackSupport

/// The configured win-back offers, in catalog order (the order ranks tie-break on).
///
/// Read from `{"offers": [...]}` (docs/rules.md §2.4). Every violation is collected, so `validate`
/// can report all of them at once; each names the offer and the field.
public struct OfferCatalog: Sendable, Equatable {
    public var offers: [Offer]

    public init(offers: [Offer]) { self.offers = offers }

    static let durations: Set<String> = [
        "THREE_DAYS", "ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "TWO_MONTHS", "THREE_MONTHS",
        "SIX_MONTHS", "ONE_YEAR",
    ]
    static let modes: Set<String> = ["FREE_TRIAL", "PAY_AS_YOU_GO", "PAY_UP_FRONT"]
    static let paidDurations: Set<Int64> = Set(1...24).union([36, 48, 60])

    /// Loads and validates a catalog file; throws a configuration error listing every problem.
    /// An offer id no catalog may use: the experiment's segment has it (docs/rules.md §9.1).
    public static let reservedOfferId = "holdout"

    public static func load(path: String, contents: Data? = nil) throws -> OfferCatalog {
        let data = try contents ?? Data(System.readConfiguration(path, what: "offer catalog"))
        let (catalog, problems) = parse(data, folder: (path as NSString).deletingLastPathComponent)
        if !problems.isEmpty {
            throw WinBackError(
                .configuration, "invalid offer catalog (\(counted(problems.count, "problem")))",
                path: path, details: problems)
        }
        return catalog
    }

    /// The problem of a key given twice, naming the offer it is in when it is in one.
    static func duplicateProblem(_ twice: JSONDuplicateKey, root: JSONValue) -> String {
        var at = twice.path.map { c -> String in
            switch c {
            case .key(let k): return "." + k
            case .index(let i): return "[\(i)]"
            }
        }.joined()
        if at.hasPrefix(".") { at.removeFirst() }
        var label = at.isEmpty ? "the catalog" : at
        if twice.path.count >= 2, case .key(let list) = twice.path[0], case .index(let i) = twice.path[1],
            let id = root[list]?.array.flatMap({ i < $0.count ? $0[i]["offerId"]?.string : nil })
        {
            label = "offer '\(id)' (\(at))"
        }
        return "\(label): key '\(twice.key)' is given twice (line \(twice.line), column \(twice.column)); "
            + "give it once"
    }

    /// Parses catalog JSON, returning the valid offers and every problem found.
    /// `folder` resolves the paths of App Store Connect responses the catalog points at.
    public static func parse(_ data: Data, folder: String = ".") -> (OfferCatalog, [String]) {
        let root: JSONValue
        do {
            root = try JSONValue.parse(data)
        } catch {
            return (OfferCatalog(offers: []), ["not valid JSON\(error)"])
        }
        let list = root["offers"]?.array
        let connect = root["appStoreConnect"]?.array
        // A misspelt key is never a default (docs/rules.md §2.4): every key of the catalog is
        // checked, except inside the App Store Connect responses it points at.
        var unknown = root.object.map { KnownKeys.unknown(in: $0, known: KnownKeys.catalog, label: "catalog") } ?? []
        // A key given twice is never one of the two taken silently (docs/rules.md §6.3).
        if let twice = JSONDuplicateKey.first(in: data) { unknown.insert(duplicateProblem(twice, root: root), at: 0) }
        guard list != nil || connect != nil else {
            return (
                OfferCatalog(offers: []),
                unknown + ["expected an object with an \"offers\" array (or \"appStoreConnect\" responses)"]
            )
        }
        var offers: [Offer] = []
        var problems: [String] = unknown
        var seen: Set<String> = []
        func add(_ offer: Offer, _ problemsOfOffer: inout [String], label: String) {
            if seen.contains(offer.offerId) {
                problemsOfOffer.append("\(label) field 'offerId': duplicate offerId '\(offer.offerId)'")
            } else {
                seen.insert(offer.offerId)
                offers.append(offer)
            }
        }
        for (i, item) in (list ?? []).enumerated() {
            guard let o = item.object else {
                problems.append("offer #\(i + 1): expected an object, found \(item.typeName)")
                continue
            }
            var p = FieldChecker(label: o["offerId"]?.string.map { "offer '\($0)'" } ?? "offer #\(i + 1)", fields: o)
            p.checksKeys = true
            if let offer = p.offer() {
                if seen.contains(offer.offerId) {
                    p.fail("offerId", "duplicate offerId '\(offer.offerId)'")
                } else {
                    seen.insert(offer.offerId)
                    if p.problems.isEmpty { offers.append(offer) }
                }
            }
            problems += p.problems
        }
        for (i, entry) in (connect ?? []).enumerated() {
            let label = "appStoreConnect[\(i)]"
            if let o = entry.object {
                problems += KnownKeys.unknown(in: o, known: KnownKeys.appStoreConnectEntry, label: label)
            }
            guard let group = entry["subscriptionGroupId"]?.string, Identifier.isValid(group),
                let product = entry["productId"]?.string, Identifier.isValid(product),
                let file = entry["response"]?.string
            else {
                problems.append("\(label): needs subscriptionGroupId, productId and response (a file path)")
                continue
            }
            let path = FilePaths.absolute(file, base: folder)
            guard let bytes = System.contents(path) else {
                problems.append("\(label): cannot read \(path)")
                continue
            }
            let response: JSONValue
            do { response = try JSONValue.parse(bytes) } catch {
                problems.append("\(label): \(path) is not valid JSON\(error)")
                continue
            }
            let (found, errors) = AppStoreConnectOffers.parse(response, group: group, product: product, source: file)
            problems += errors
            for offer in found {
                var dup: [String] = []
                add(offer, &dup, label: "\(file): offer '\(offer.offerId)'")
                problems += dup
            }
        }
        return (OfferCatalog(offers: offers), problems)
    }
}

/// The keys a catalog may hold (docs/rules.md §2.4), and the problems of the keys it may not.
package enum KnownKeys {
    /// Keys of the catalog object.
    static let catalog = ["offers", "appStoreConnect"]
    /// Keys of an `appStoreConnect` entry.
    static let appStoreConnectEntry = ["subscriptionGroupId", "productId", "response"]
    /// Keys of an offer, in the order of docs/rules.md §2.4's example.
    static let offer = [
        "offerId", "referenceName", "subscriptionGroupId", "productId", "appleId", "duration", "offerMode",
        "periodCount", "customerEligibilityPaidSubscriptionDurationInMonths", timeSince,
        "customerEligibilityWaitBetweenOffersInMonths", "startDate", "endDate", "priority", "territories",
        "targetSubscriptionPlanType",
        // An App Store Connect attribute winback reads nothing from, kept so that offers copied
        // from Apple's responses are accepted as they are.
        "promotionIntent",
    ]
    static let timeSince = "customerEligibilityTimeSinceLastSubscribedInMonths"
    /// Keys of the time-since-last-subscribed object.
    static let range = ["minimum", "maximum"]

    /// One problem per key of `object` not in `known`, in key order: `<label> field '<key>':
    /// unknown key`, with the nearest known key when one is close, else the known keys.
    static func unknown(in object: [String: JSONValue], known: [String], label: String, prefix: String = "")
        -> [String]
    {
        object.keys.filter { !known.contains($0) }.sorted().map { key in
            let hint =
                nearest(key, in: known).map { " (did you mean '\(prefix)\($0)'?)" }
                ?? "; known keys: \(known.joined(separator: ", "))"
            return "\(label) field '\(prefix)\(key)': unknown key" + hint
        }
    }

    /// The known key closest to `key` by edit distance, ignoring case, when it is close: at
    /// most 2 edits, or a third of the shorter key's length (`territory` → `territories`).
    package static func nearest(_ key: String, in known: [String]) -> String? {
        let k = Array(key.lowercased().unicodeScalars)
        var best: (key: String, distance: Int)?
        for candidate in known {
            let c = Array(candidate.lowercased().unicodeScalars)
            let d = distance(k, c)
            if d <= max(2, min(k.count, c.count) / 3), d < (best?.distance ?? .max) { best = (candidate, d) }
        }
        return best?.key
    }

    /// Levenshtein distance: insertions, deletions and substitutions.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        if a.isEmpty || b.isEmpty { return a.count + b.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(
                    previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// Checks one offer object field by field, collecting a message per bad field.
struct FieldChecker {
    let label: String
    let fields: [String: JSONValue]
    var problems: [String] = []
    /// Whether a key outside ``KnownKeys`` is a problem: true for the catalog's own offers,
    /// false for App Store Connect's `attributes`, which Apple extends over time.
    var checksKeys = false

    mutating func fail(_ field: String, _ why: String) {
        problems.append("\(label) field '\(field)': \(why)")
    }

    /// The value of `field`, nil when absent or null.
    func value(_ field: String) -> JSONValue? {
        guard let v = fields[field], v != .null else { return nil }
        return v
    }

    mutating func string(
        _ field: String, required: Bool = false, pattern: (String) -> Bool = { _ in true }, what: String = ""
    )
        -> String?
    {
        guard let v = value(field) else {
            if required { fail(field, "required") }
            return nil
        }
        guard let s = v.string else {
            fail(field, "expected a string, found \(v.typeName)")
            return nil
        }
        guard pattern(s) else {
            fail(field, "'\(s)' is not \(what)")
            return nil
        }
        return s
    }

    mutating func int(
        _ field: String, _ container: [String: JSONValue]? = nil, name: String? = nil, required: Bool = false
    )
        -> Int64?
    {
        let src = container ?? fields
        let label = name ?? field
        guard let v = src[field], v != .null else {
            if required { fail(label, "required") }
            return nil
        }
        guard let i = v.int else {
            fail(label, "expected an integer, found \(v.typeName)")
            return nil
        }
        return i
    }

    mutating func oneOf(_ field: String, _ allowed: Set<String>) -> String? {
        let s = string(field)
        if let s, !allowed.contains(s) {
            fail(field, "'\(s)' is not one of \(allowed.sorted().joined(separator: ", "))")
            return nil
        }
        return s
    }

    mutating func date(_ field: String) -> Int64? {
        guard let s = string(field) else { return nil }
        guard let d = Timestamp.parseDate(s) else {
            fail(field, "'\(s)' is not a date " + (Timestamp.whyNotADate(s).map { "(\($0))" } ?? "YYYY-MM-DD"))
            return nil
        }
        return d
    }

    mutating func offer() -> Offer? {
        if checksKeys { problems += KnownKeys.unknown(in: fields, known: KnownKeys.offer, label: label) }
        let offerId = string(
            "offerId", required: true, pattern: Identifier.isOfferId,
            what: "a valid offer id (letters, digits, '.', '_'; at most 100; it names files)")
        // `holdout` names the held-out customers' segment (docs/rules.md §9.1).
        if offerId == OfferCatalog.reservedOfferId {
            fail("offerId", "'\(OfferCatalog.reservedOfferId)' is reserved: it names the segment of held-out customers")
        }
        let group = string(
            "subscriptionGroupId", required: true, pattern: Identifier.isValid, what: "a valid identifier")
        let product = string("productId", required: true, pattern: Identifier.isValid, what: "a valid identifier")
        _ = string("referenceName")
        let appleId = string("appleId", pattern: Identifier.isValid, what: "a valid identifier")
        let duration = oneOf("duration", OfferCatalog.durations)
        let mode = oneOf("offerMode", OfferCatalog.modes)
        let periodCount = int("periodCount")
        if let pc = periodCount, pc < 1 { fail("periodCount", "must be at least 1, found \(pc)") }

        let paidField = "customerEligibilityPaidSubscriptionDurationInMonths"
        let paid = int(paidField, required: true)
        if let paid, !OfferCatalog.paidDurations.contains(paid) {
            fail(paidField, "must be 1–24, 36, 48 or 60 months, found \(paid)")
        }

        let sinceField = KnownKeys.timeSince
        var minSince: Int64?
        var maxSince: Int64?
        if let v = value(sinceField) {
            if let o = v.object {
                if checksKeys {
                    problems += KnownKeys.unknown(
                        in: o, known: KnownKeys.range, label: label, prefix: "\(sinceField).")
                }
                minSince = int("minimum", o, name: "\(sinceField).minimum", required: true)
                maxSince = int("maximum", o, name: "\(sinceField).maximum", required: true)
                if let lo = minSince, lo < 1 { fail("\(sinceField).minimum", "must be at least 1, found \(lo)") }
                if let lo = minSince, let hi = maxSince, hi < lo {
                    fail("\(sinceField).maximum", "must be at least the minimum (\(lo)), found \(hi)")
                }
            } else {
                fail(sinceField, "expected an object {\"minimum\": …, \"maximum\": …}, found \(v.typeName)")
            }
        } else {
            fail(sinceField, "required")
        }

        let waitField = "customerEligibilityWaitBetweenOffersInMonths"
        let wait = int(waitField)
        if let w = wait, !(2...24).contains(w) { fail(waitField, "must be null or 2–24 months, found \(w)") }

        let start = date("startDate")
        let end = date("endDate")
        if let s = start, let e = end, e < s { fail("endDate", "is before startDate") }

        let priority = oneOf("priority", ["HIGH", "NORMAL"])
        let plan = oneOf("targetSubscriptionPlanType", ["UPFRONT", "MONTHLY"])

        var territories: [String] = []
        if let v = value("territories") {
            if let list = v.array {
                for t in list {
                    guard let code = t.string else {
                        fail("territories", "expected alpha-3 strings, found \(t.typeName)")
                        continue
                    }
                    if ISO3166.alpha2(code) == nil {
                        fail("territories", "'\(code)' is not an ISO 3166-1 alpha-3 code")
                    } else {
                        territories.append(code)
                    }
                }
            } else {
                fail("territories", "expected an array of alpha-3 codes, found \(v.typeName)")
            }
        }

        guard let offerId, let group, let product, let paid, let minSince, let maxSince, problems.isEmpty else {
            return nil
        }
        var offer = Offer(
            offerId: offerId, subscriptionGroupId: group, productId: product, paidMonths: Int(paid),
            minMonthsSince: Int(minSince), maxMonthsSince: Int(maxSince), waitMonths: wait.map { Int($0) },
            startDay: start, endDay: end, priority: priority == "HIGH" ? .high : .normal,
            territories: territories, appleId: appleId)
        offer.referenceName = fields["referenceName"]?.string
        offer.duration = duration
        offer.offerMode = mode
        offer.periodCount = periodCount.map { Int($0) }
        offer.targetSubscriptionPlanType = plan
        return offer
    }
}
