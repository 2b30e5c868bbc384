import Foundation

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
    public static func load(path: String) throws -> OfferCatalog {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw WinBackError(.configuration, "offer catalog is missing or unreadable", path: path)
        }
        let (catalog, problems) = parse(data, folder: (path as NSString).deletingLastPathComponent)
        if !problems.isEmpty {
            throw WinBackError(
                .configuration, "invalid offer catalog (\(problems.count) problem\(problems.count == 1 ? "" : "s"))",
                path: path, details: problems)
        }
        return catalog
    }

    /// Parses catalog JSON, returning the valid offers and every problem found.
    /// `folder` resolves the paths of App Store Connect responses the catalog points at.
    public static func parse(_ data: Data, folder: String = ".") -> (OfferCatalog, [String]) {
        let root: JSONValue
        do {
            root = try JSONValue.parse(data)
        } catch {
            return (OfferCatalog(offers: []), ["not valid JSON: \(error.localizedDescription)"])
        }
        let list = root["offers"]?.array
        let connect = root["appStoreConnect"]?.array
        guard list != nil || connect != nil else {
            return (
                OfferCatalog(offers: []),
                ["expected an object with an \"offers\" array (or \"appStoreConnect\" responses)"]
            )
        }
        var offers: [Offer] = []
        var problems: [String] = []
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
            guard let group = entry["subscriptionGroupId"]?.string, Identifier.isValid(group),
                let product = entry["productId"]?.string, Identifier.isValid(product),
                let file = entry["response"]?.string
            else {
                problems.append("\(label): needs subscriptionGroupId, productId and response (a file path)")
                continue
            }
            let path = InputFiles.absolute(file, base: folder)
            guard let bytes = FileManager.default.contents(atPath: path), let response = try? JSONValue.parse(bytes)
            else {
                problems.append("\(label): cannot read \(path) as JSON")
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

/// Checks one offer object field by field, collecting a message per bad field.
struct FieldChecker {
    let label: String
    let fields: [String: JSONValue]
    var problems: [String] = []

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
            fail(field, "'\(s)' is not a date YYYY-MM-DD")
            return nil
        }
        return d
    }

    mutating func offer() -> Offer? {
        let offerId = string(
            "offerId", required: true, pattern: Identifier.isOfferId,
            what: "a valid offer id (letters, digits, '.', '_'; at most 100; it names files)")
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

        let sinceField = "customerEligibilityTimeSinceLastSubscribedInMonths"
        var minSince: Int64?
        var maxSince: Int64?
        if let v = value(sinceField) {
            if let o = v.object {
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
        return offer
    }
}
