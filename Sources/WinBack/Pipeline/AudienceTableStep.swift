import Crypto
import Foundation
import WinBackDelivery
import WinBackModel
import WinBackPipeline
import WinBackPostgres
import WinBackRead
import WinBackSupport
import WinBackWrite

extension AfterPublish {
    /// `output.postgres` (docs/rules.md §14.2): the published segments, with the identity columns
    /// the destinations use, written to `<schema>.audience` and the run to `<schema>.runs`, in
    /// one transaction, under the run's lock (no other run replaces the folder meanwhile). Rows
    /// whose offer has no link are left out, as from the destination files (§10.10). A failure
    /// leaves the tables as they were and fails the run, its files published: 75 when the
    /// server cannot be reached or answer, 73 otherwise.
    static func postgres(_ p: ResolvedPipeline, progress: Progress) -> AfterPublish? {
        guard let out = p.config.postgres else { return nil }
        return AfterPublish(name: "postgres", underLock: true) { published in
            let started = Date()
            do {
                let written = try AudienceTableStep.write(p, out, published)
                progress.event(
                    "postgres",
                    "postgres: \(out.schema).audience: \(written.rows) rows tonight; \(written.entered) entered, "
                        + "\(written.changed) changed, \(written.exited) exited "
                        + "(\(String(format: "%.2f", Date().timeIntervalSince(started))) s)",
                    fields: [
                        "rows": String(written.rows), "entered": String(written.entered),
                        "changed": String(written.changed), "exited": String(written.exited),
                    ])
            } catch let e as WinBackError {
                let code: WinBackError.Code = e.code == .temporary ? .temporary : .cannotCreateOutput
                var behind = WinBackError(
                    code, "the run is published, but \(out.schema).audience is behind it: " + e.message, path: e.path)
                behind.behind = "postgres"
                throw behind
            }
        }
    }
}

/// The rows of `output.postgres` (docs/rules.md §14.2): the published segment lists as the run
/// holds them.
enum AudienceTableStep {
    static func write(_ p: ResolvedPipeline, _ out: PostgresOutput, _ published: PublishedFolder) throws
        -> AudienceTable.Written
    {
        // The lists the run wrote, as its manifest lists them, and their rows as the run holds them.
        let written = Set(published.manifest.outputs.map(\.path))
        let lists = (["best-offer"] + p.catalog.offers.map(\.offerId)).filter {
            written.contains("segments/" + $0 + ".csv")
        }
        let tonight: SegmentSource
        if let held = published.lists {
            tonight = held
        } else if lists.isEmpty {
            tonight = NoSegments()
        } else {
            throw WinBackError(.software, "the run's segment lists are not at hand for the audience table")
        }
        // The identity columns the destinations use, joined as for their files.
        var join: IdentityJoin?
        var columns: [String] = []
        if let source = p.config.identities, !p.config.destinations.isEmpty {
            var rejects = RejectList(limit: 0)
            let bounds = p.memoryLimit.map {
                IdentityJoin.Bounds(
                    folder: p.outputDirectory + "/" + p.config.name + "/.postgres-identities-\(System.processID)",
                    memory: $0)
            }
            join = try Delivery.joinIdentities(p, source: source, rejects: &rejects, bounds: bounds)
            try join!.prepare(lists: lists, from: tonight)
            for d in p.config.destinations where !columns.contains(d.type.identityColumn) {
                columns.append(d.type.identityColumn)
            }
        }
        defer { join?.discard() }
        let positions = columns.map { c in
            join.flatMap { $0.position(of: p.config.identities!.fileColumn(c)) }
        }
        let run = AudienceTable.Run(
            pipeline: p.config.name, date: published.date, asOf: Timestamp.iso(p.asOf),
            publishedAt: Manifest.iso(published.manifest.finished),
            // The manifest as published (its bytes are these), and best-offer's rows as it counts them.
            manifestSHA256: Hex.string(SHA256.hash(data: published.manifest.json())),
            eligible: published.manifest.outputs.first { $0.path == "segments/best-offer.csv" }?.rows ?? 0)
        return try AudienceTable.write(
            connection: out.connection, schema: out.schema, run: run, identityColumns: columns,
            seconds: Double(p.config.networkSeconds)
        ) { row0 in
            try withoutActuallyEscaping(row0) { row in
                for segment in lists {
                    let each: (SegmentRow, [String]?) throws -> Void = { r, values in
                        // A row never carries an empty link (§10.10).
                        guard !r.offerURL.isEmpty else { return }
                        let ids = positions.map { i in i.flatMap { values?[$0] } ?? "" }
                        try row(segment, r.fields.map { String(decoding: $0, as: UTF8.self) }, ids)
                    }
                    if let join {
                        try join.rows(of: segment, from: tonight, each)
                    } else {
                        try tonight.forEachRow(of: segment) { try each($0, nil) }
                    }
                }
            }
        }
    }
}

/// No segment list (a run that wrote none).
private struct NoSegments: SegmentSource {
    func forEachRow(of name: String, keysOnly: Bool, _ body: (SegmentRow) throws -> Void) throws {}
}
