import Foundation
import WinBackModel
import WinBackRules
import WinBackSupport

/// Writes the audience segments (docs/rules.md §4.1, §4.2): one CSV and one XML per catalog offer, and
/// the best-offer list, all in customer order.
public struct SegmentWriter: Sendable {
    public static let columns = [
        "subscription_group_id", "original_transaction_id", "app_account_token", "storefront", "product_id",
        "paid_months", "paid_run_start", "last_subscribed_end", "months_since_last_subscribed", "offer_id",
        "offer_rank", "eligible_offer_ids", "offer_url", "apple_eligible",
    ]

    /// The segment of the held-out customers (docs/rules.md §9.1), written with an experiment.
    public static let holdout = "holdout"

    /// The segments a run writes, but for their extensions: one per catalog offer, best-offer,
    /// and with an experiment the holdout.
    public static func names(offerIds: [String], experiment: Bool) -> [String] {
        offerIds + ["best-offer"] + (experiment ? [holdout] : [])
    }

    let customers: CustomerRows
    let audience: Audience
    let book: OfferBook
    let formats: [String]
    /// Which rows Apple's word keeps (docs/rules.md §4.5, `audience.requireApple`).
    let requireApple: AppleRequirement
    /// Per offer, the UTF-8 bytes of its id and URL, made once rather than on every line.
    let offerIds: ByteList
    let offerURLs: ByteList
    /// The same as XML attribute values, escaped as libxml2 escapes them.
    let xmlOfferIds: ByteList
    let xmlOfferURLs: ByteList
    /// The same as whole CSV fields, escaped.
    let csvOfferIds: ByteList
    let csvOfferURLs: ByteList
    /// Rows of a file formatted as one piece (``defaultPieceRows``; fewer in tests, to cut small
    /// lists up).
    let pieceRows: Int
    /// The segment lists, each customer's rows where ``lists(audience:book:requireApple:threads:)`` puts them.
    let lists: [List]

    public init(
        customers: CustomerRows, audience: Audience, book: OfferBook, formats: [String],
        requireApple: AppleRequirement = .off, pieceRows: Int = SegmentWriter.defaultPieceRows, threads: Int = 1
    ) {
        self.customers = customers
        self.pieceRows = max(1, pieceRows)
        self.audience = audience
        self.book = book
        self.formats = formats
        self.requireApple = requireApple
        offerIds = ByteList(book.offers.map { Array($0.offer.offerId.utf8) })
        offerURLs = ByteList(book.offers.map { Array($0.offer.offerURL.utf8) })
        xmlOfferIds = ByteList(book.offers.map { XMLWriter.escapedAttribute(Array($0.offer.offerId.utf8)) })
        xmlOfferURLs = ByteList(book.offers.map { XMLWriter.escapedAttribute(Array($0.offer.offerURL.utf8)) })
        csvOfferIds = ByteList(book.offers.map { CSVRecord.escaped($0.offer.offerId) })
        csvOfferURLs = ByteList(book.offers.map { CSVRecord.escaped($0.offer.offerURL) })
        lists = SegmentWriter.lists(audience: audience, book: book, requireApple: requireApple, threads: threads)
    }

    /// The bytes of each ``AppleEligible`` value, by raw value (plain letters: no escaping).
    static let appleLabels = ByteList([AppleEligible.silent, .yes, .no].map { Array($0.label.utf8) })

    /// Byte strings written on many lines, one after another in one array: an entry is read
    /// where it is stored, whereas an element of an array of arrays is a copy, and a copy takes
    /// a reference, on every line written.
    struct ByteList: Sendable {
        private let bytes: [UInt8]
        /// Entry i is `bytes[ends[i]..<ends[i + 1]]`.
        private let ends: [Int]

        init(_ entries: [[UInt8]]) {
            bytes = entries.flatMap { $0 }
            ends = entries.reduce(into: [0]) { $0.append($0.last! + $1.count) }
        }

        /// Calls `body` with entry `i`'s bytes, valid only during the call.
        @inline(__always)
        func with<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
            let (start, end) = (ends[i], ends[i + 1])
            return bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
        }
    }

    /// Appends the ids of the offers `r` is eligible for, best first, as `ids` holds them (raw or
    /// escaped for XML), joined by `separator`.
    @inline(__always)
    static func appendEligibleIds(
        _ r: UnsafePointer<CustomerResult>, _ ids: ByteList, separator: UInt8, to out: inout [UInt8]
    ) {
        for (i, id) in r.pointee.eligible.enumerated() {
            if i > 0 { out.append(separator) }
            ids.with(Int(id)) { out.append(contentsOf: $0) }
        }
    }

    /// One line of a segment: a result and the offer it is listed under.
    struct Entry {
        var result: Int
        var offer: Int
        var rank: Int
    }

    /// One segment list: its name (an offer id, `best-offer`, the holdout), its rows in
    /// customer order, and the catalog offer it is of (nil: best-offer and the holdout).
    struct List: Sendable {
        var name: String
        var entries: [Entry]
        var offer: Int?
    }

    /// Which segments every customer's result belongs to (docs/rules.md §4.1, §4.5, §9.1), the
    /// one place that says it: an eligible offer's list at its rank, unless Apple's word drops
    /// it; best-offer for the rank-1 offer; a held-out customer's rank-1 row in the holdout
    /// only. The lists in the order of the files: the catalog's offers, best-offer, the holdout.
    static func lists(
        audience: Audience, book: OfferBook, requireApple: AppleRequirement, threads: Int = 1
    ) -> [List] {
        let n = book.offers.count
        // Lists 0..<n are the offers', n best-offer's, n + 1 the rows best-offer would have held
        // for the customers the experiment holds out (docs/rules.md §9.1; in no other segment).
        // Each part of the results (in customer order) fills its own lists on a thread, a few
        // parts a thread so that none waits long for the last; the parts' lists are then joined
        // in order.
        let parts = chunks(audience.results.count, pieces: 4 * max(1, threads))
        let found = ResultSlots<[[Entry]]>(count: parts.count)
        try? parallelFor(count: parts.count, threads: threads) { p in
            var lists = [[Entry]](repeating: [], count: n + 2)
            // Results are read in place: a copy of one would retain its arrays.
            audience.results.withUnsafeBufferPointer { results in
                for ri in parts[p] {
                    let r = results.baseAddress! + ri
                    let leftOut = audience.isLeftOut(r.pointee)
                    for (rank, o) in r.pointee.eligible.enumerated()
                    where requireApple.keeps(r.pointee.apple(rank: rank + 1)) {
                        if leftOut {
                            if rank == 0 { lists[n + 1].append(Entry(result: ri, offer: Int(o), rank: 1)) }
                            continue
                        }
                        lists[Int(o)].append(Entry(result: ri, offer: Int(o), rank: rank + 1))
                        // The best-offer list follows the rank-1 offer's row.
                        if rank == 0 { lists[n].append(Entry(result: ri, offer: Int(o), rank: 1)) }
                    }
                }
            }
            found[p] = lists
        }
        var entries = [[Entry]](repeating: [], count: n + 2)
        for part in found.takeAll() {
            for i in entries.indices { entries[i] += part[i] }
        }
        var lists = book.offers.indices.map {
            List(name: book.offers[$0].offer.offerId, entries: entries[$0], offer: $0)
        }
        lists.append(List(name: "best-offer", entries: entries[n], offer: nil))
        if audience.experiment != nil {
            lists.append(List(name: SegmentWriter.holdout, entries: entries[n + 1], offer: nil))
        }
        return lists
    }

    /// Rows of a segment file formatted as one piece: the pieces of every file are formatted on
    /// any thread and written in order, so no one file holds a thread for all its rows.
    public static let defaultPieceRows = 4096

    /// Writes every segment into `directory/segments/`; returns the files written. With
    /// `sync`, files are made durable in the background (the caller waits on it).
    package func write(to directory: String, threads: Int, sync: DiskSync?) throws -> [OutputStats] {
        try OutputFile.makeFolder(directory + "/segments")
        let files = lists.flatMap { list in formats.map { (list: list, xml: $0 == "xml") } }
        // As many buffers as pieces can be formatted or waiting at once.
        let buffers = PieceBuffers(most: 3 * Swift.max(1, threads))
        let outputs = files.map { file in
            SegmentFileOutput(
                path: directory + "/segments/\(file.list.name).\(file.xml ? "xml" : "csv")",
                pieces: Swift.max(1, (file.list.entries.count + pieceRows - 1) / pieceRows), sync: sync,
                ahead: 2 * Swift.max(1, threads), buffers: buffers)
        }
        // Every file's pieces in order, largest files first (XML before CSV), so the pieces of a
        // file are taken one after another and few wait to be written.
        let bySize = files.indices.sorted {
            (files[$0].list.entries.count, files[$0].xml ? 1 : 0, -$0)
                > (files[$1].list.entries.count, files[$1].xml ? 1 : 0, -$1)
        }
        let units = bySize.flatMap { f in (0..<outputs[f].pieces).map { (file: f, piece: $0) } }
        let slots = ResultSlots<OutputStats>(count: files.count)
        try parallelFor(count: units.count, threads: threads) { u in
            let (f, piece) = units[u]
            let (list, xml) = files[f]
            // The run fails with that file's error; the rest of it is not formatted.
            if outputs[f].failed { return }
            let rows = list.entries[
                Swift.min(
                    list.entries.count, piece * pieceRows)..<Swift.min(list.entries.count, (piece + 1) * pieceRows)]
            // About what a line takes, so that the piece is not copied as it grows; every
            // buffer as large as an XML piece's, so that any buffer handed back fits any piece.
            var bytes = buffers.take(capacity: Swift.max(pieceRows * 512, rows.count * (xml ? 512 : 256)))
            if xml { appendXML(rows, offer: list.offer, to: &bytes) } else { appendCSV(rows, to: &bytes) }
            let finished = try outputs[f].put(piece, consume bytes) { place in
                xml ? .xml(try xmlHead(list, place)) : .csv(try csvHead(place))
            }
            if let (bytesWritten, sha) = finished {
                let rel = "segments/\(list.name).\(xml ? "xml" : "csv")"
                slots[f] = OutputStats(path: rel, bytes: bytesWritten, rows: list.entries.count, sha256: sha)
            }
        }
        return slots.all
    }

    /// Writes every segment into `directory/segments/`, each file synced before it is
    /// counted written; returns the files written.
    public func write(to directory: String, threads: Int) throws -> [OutputStats] {
        try write(to: directory, threads: threads, sync: nil)
    }

    /// A segment CSV opened, its header written.
    private func csvHead(_ place: SegmentFileOutput.Place) throws -> OutputFile {
        let file = try OutputFile(path: place.path, sync: place.sync)
        try file.write(CSVRecord.header(SegmentWriter.columns))
        return file
    }

    /// Appends the CSV lines of `entries`.
    func appendCSV(_ entries: ArraySlice<Entry>, to out: inout [UInt8]) {
        let s = customers.strings
        var rec = CSVRecord()
        var eligible: [UInt8] = []
        // Results are read in place: a copy of one would retain its arrays.
        audience.results.withUnsafeBufferPointer { results in
            for e in entries {
                let r = results.baseAddress! + e.result
                let k = Int(r.pointee.customer)
                rec.reset()
                s.withBytes(customers.groups[k]) { rec.field(raw: $0) }
                customers.originalTransactionIds[k].withBytes(in: s) { rec.field(raw: $0) }
                let token = r.pointee.timeline.appAccountToken
                if token.isNone { rec.empty() } else { token.withBytes(in: s) { rec.field(raw: $0) } }
                let storefront = r.pointee.timeline.storefront
                if storefront >= 0 { s.withBytes(storefront) { rec.field(raw: $0) } } else { rec.empty() }
                s.withBytes(r.pointee.timeline.productId) { rec.field(raw: $0) }
                rec.field(r.pointee.timeline.paidMonths)
                rec.field(timestamp: r.pointee.timeline.paidRunStart)
                rec.field(timestamp: r.pointee.timeline.lastSubscribedEnd)
                rec.field(r.pointee.timeline.monthsSinceLastSubscribed)
                csvOfferIds.with(e.offer) { rec.field(escapedRaw: $0) }
                rec.field(e.rank)
                eligible.removeAll(keepingCapacity: true)
                Self.appendEligibleIds(r, offerIds, separator: UInt8(ascii: ";"), to: &eligible)
                rec.field(bytes: eligible)
                csvOfferURLs.with(e.offer) { rec.field(escapedRaw: $0) }
                SegmentWriter.appleLabels.with(Int(r.pointee.apple(rank: e.rank).rawValue)) {
                    rec.field(escapedRaw: $0)
                }
                rec.end()
                out.append(contentsOf: rec.bytes)
            }
        }
    }

    /// A segment XML opened, its root element's start written: the customers follow it as
    /// ``appendXML(_:offer:to:)`` formats them.
    private func xmlHead(_ list: List, _ place: SegmentFileOutput.Place) throws -> XMLWriter {
        let x = try XMLWriter(path: place.path, sync: place.sync)
        if let offer = list.offer {
            let o = book.offers[offer].offer
            try x.start("segment")
            try x.attribute("xmlns", "urn:winback:segment:1")
            try x.attribute("offerId", o.offerId)
            try x.attribute("subscriptionGroupId", o.subscriptionGroupId)
            try x.attribute("productId", o.productId)
        } else {
            try x.start("audience")
            try x.attribute("xmlns", "urn:winback:segment:1")
        }
        try x.attribute("asOf", Timestamp.iso(audience.asOf))
        try x.attribute("customers", String(list.entries.count))
        // The start tag closed, each customer on a line of its own, indented as libxml2
        // indents a child element.
        if !list.entries.isEmpty { try x.raw([UInt8(ascii: "\n")]) }
        return x
    }

    /// Appends the `<customer …/>` lines of `entries`, one line each, as libxml2's writer
    /// indents them; values are escaped as it escapes them (``XMLWriter/appendAttribute(_:escaped:to:_:)``),
    /// the offers' ids and URLs once, when the writer is made.
    func appendXML(_ entries: ArraySlice<Entry>, offer: Int?, to out: inout [UInt8]) {
        // What the lines need, taken out of `self` once: a closure that reached them through
        // `self` would copy the writer on every line.
        let s = customers.strings
        let groups = customers.groups
        let originalTransactionIds = customers.originalTransactionIds
        let xmlOfferIds = xmlOfferIds
        let xmlOfferURLs = xmlOfferURLs
        func attribute(_ name: StaticString, escaped: Bool = false, _ body: (inout [UInt8]) -> Void) {
            XMLWriter.appendAttribute(name, escaped: escaped, to: &out, body)
        }
        // Results are read in place: a copy of one would retain its arrays.
        audience.results.withUnsafeBufferPointer { results in
            for e in entries {
                let r = results.baseAddress! + e.result
                let k = Int(r.pointee.customer)
                Self.customerStart.withUTF8Buffer { out.append(contentsOf: $0) }
                if offer == nil { attribute("subscriptionGroupId") { s.append(groups[k], to: &$0) } }
                attribute("originalTransactionId") { originalTransactionIds[k].append(in: s, to: &$0) }
                let token = r.pointee.timeline.appAccountToken
                if !token.isNone { attribute("appAccountToken") { token.append(in: s, to: &$0) } }
                let storefront = r.pointee.timeline.storefront
                if storefront >= 0 { attribute("storefront") { s.append(storefront, to: &$0) } }
                attribute("productId") { s.append(r.pointee.timeline.productId, to: &$0) }
                attribute("paidMonths") { CSVRecord.appendDecimal(Int64(r.pointee.timeline.paidMonths), to: &$0) }
                if let p = r.pointee.timeline.paidRunStart {
                    attribute("paidRunStart") { Timestamp.appendISO(p, to: &$0) }
                }
                attribute("lastSubscribedEnd") { Timestamp.appendISO(r.pointee.timeline.lastSubscribedEnd, to: &$0) }
                attribute("monthsSinceLastSubscribed") {
                    CSVRecord.appendDecimal(Int64(r.pointee.timeline.monthsSinceLastSubscribed), to: &$0)
                }
                if offer == nil {
                    attribute("offerId", escaped: true) { o in xmlOfferIds.with(e.offer) { o.append(contentsOf: $0) } }
                }
                attribute("offerRank") { CSVRecord.appendDecimal(Int64(e.rank), to: &$0) }
                attribute("eligibleOfferIds", escaped: true) {
                    Self.appendEligibleIds(r, xmlOfferIds, separator: UInt8(ascii: " "), to: &$0)
                }
                attribute("offerUrl", escaped: true) { o in xmlOfferURLs.with(e.offer) { o.append(contentsOf: $0) } }
                attribute("appleEligible") { o in
                    SegmentWriter.appleLabels.with(Int(r.pointee.apple(rank: e.rank).rawValue)) {
                        o.append(contentsOf: $0)
                    }
                }
                Self.customerEnd.withUTF8Buffer { out.append(contentsOf: $0) }
            }
        }
    }

    private static let customerStart: StaticString = "  <customer"
    private static let customerEnd: StaticString = "/>\n"
}

/// A run in memory hands its lists to the changes, the destinations and the audience table as
/// they are in memory, each field as ``writeCSV(_:path:sync:)`` writes it.
extension SegmentWriter: SegmentSource {
    package func forEachRow(of name: String, keysOnly: Bool, _ body: (SegmentRow) throws -> Void) throws {
        guard let list = lists.first(where: { $0.name == name }) else { return }
        let s = customers.strings
        var row = SegmentRow()
        func set(_ field: inout [UInt8], _ fill: (inout [UInt8]) -> Void) {
            field.removeAll(keepingCapacity: true)
            fill(&field)
        }
        // Results are read in place: a copy of one would retain its arrays.
        try audience.results.withUnsafeBufferPointer { results in
            for e in list.entries {
                let r = results.baseAddress! + e.result
                let k = Int(r.pointee.customer)
                set(&row.group) { s.append(customers.groups[k], to: &$0) }
                set(&row.original) { customers.originalTransactionIds[k].append(in: s, to: &$0) }
                set(&row.offer) { out in offerIds.with(e.offer) { out.append(contentsOf: $0) } }
                if keysOnly {
                    try body(row)
                    continue
                }
                set(&row.token) {
                    if !r.pointee.timeline.appAccountToken.isNone {
                        r.pointee.timeline.appAccountToken.append(in: s, to: &$0)
                    }
                }
                set(&row.storefront) {
                    if r.pointee.timeline.storefront >= 0 { s.append(r.pointee.timeline.storefront, to: &$0) }
                }
                set(&row.product) { s.append(r.pointee.timeline.productId, to: &$0) }
                set(&row.paidMonths) { CSVRecord.appendDecimal(Int64(r.pointee.timeline.paidMonths), to: &$0) }
                set(&row.paidRunStart) {
                    if let p = r.pointee.timeline.paidRunStart { Timestamp.appendISO(p, to: &$0) }
                }
                set(&row.lastSubscribedEnd) { Timestamp.appendISO(r.pointee.timeline.lastSubscribedEnd, to: &$0) }
                set(&row.monthsSince) {
                    CSVRecord.appendDecimal(Int64(r.pointee.timeline.monthsSinceLastSubscribed), to: &$0)
                }
                set(&row.rank) { CSVRecord.appendDecimal(Int64(e.rank), to: &$0) }
                set(&row.eligible) { Self.appendEligibleIds(r, offerIds, separator: UInt8(ascii: ";"), to: &$0) }
                set(&row.offerURL) { out in offerURLs.with(e.offer) { out.append(contentsOf: $0) } }
                set(&row.apple) { out in
                    SegmentWriter.appleLabels.with(Int(r.pointee.apple(rank: e.rank).rawValue)) {
                        out.append(contentsOf: $0)
                    }
                }
                try body(row)
            }
        }
    }
}

extension CSVRecord {
    /// A text field from the bytes a string table or id lends for the duration of a call.
    @inline(__always)
    fileprivate mutating func field(raw b: UnsafeRawBufferPointer) {
        field(bytes: b.assumingMemoryBound(to: UInt8.self).span)
    }

    /// A whole escaped field from bytes lent for the duration of a call.
    @inline(__always)
    fileprivate mutating func field(escapedRaw b: UnsafeRawBufferPointer) {
        field(escaped: b.assumingMemoryBound(to: UInt8.self).span)
    }
}
