import Crypto
import Foundation
import WinBackModel
import WinBackSupport
import WinBackWrite

/// The published run tonight's is compared with (docs/rules.md §10.5): of the same pipeline,
/// the one with the greatest date earlier than tonight's that is still present locally (its
/// dated link and the folder it points at). None: everything tonight is `entered`.
public struct Baseline: Sendable, Equatable, Codable {
    /// `YYYY-MM-DD`.
    public var date: String
    /// The published folder (`<output>/<name>/<date>`, through its link).
    public var folder: String
    /// The SHA-256 of its `manifest.json`, hex.
    public var manifestSHA256: String
    /// Its as-of instant (ms since the epoch), from its manifest.
    public var asOf: Int64
    /// The files its manifest lists (path → SHA-256), as decoded when it was found: the manifest
    /// is read once per run. Nil in a baseline handed from another process (an array job's
    /// fingerprint), whose manifest is read again and checked against ``manifestSHA256``.
    package var outputs: [String: String]? = nil

    package enum CodingKeys: String, CodingKey { case date, folder, manifestSHA256, asOf }

    /// The same run: what every task of an array job must agree on (``outputs`` follows from it).
    public static func == (a: Baseline, b: Baseline) -> Bool {
        a.date == b.date && a.folder == b.folder && a.manifestSHA256 == b.manifestSHA256 && a.asOf == b.asOf
    }

    /// The baseline of a run of pipeline `name` publishing `date` under `root`
    /// (`<output>/<name>`), or nil when no earlier date stands. A dated link whose folder is
    /// gone is passed over (a run removed); a dated folder that stands is read as an input
    /// (docs/rules.md §6.3): its manifest damaged, empty, gone, too large, or naming another
    /// pipeline is bad data (65) naming it, never a reason to compare with an older run.
    public static func find(root: String, name: String, before date: String, memory: Int? = nil) throws -> Baseline? {
        let publisher = Publisher(root: root, date: date)
        for d in publisher.publishedDates().reversed() where d < date {
            if let run = try read(root: root, date: d, name: name, memory: memory) { return run }
        }
        return nil
    }

    /// The published runs whose destination files tonight's exited files cover (docs/rules.md
    /// §10.10): `baseline` first, then every other run of pipeline `name` under `root` dated
    /// from `days` days before `date` to the day before, newest first, each read as the
    /// baseline is (its manifest damaged or of another pipeline: 65). Empty without a baseline.
    package static func window(
        root: String, name: String, before date: String, days: Int, baseline: Baseline?, memory: Int? = nil
    ) throws -> [Baseline] {
        guard let baseline, let tonight = Timestamp.parseDate(date) else { return [] }
        var runs = [baseline]
        for d in Publisher(root: root, date: date).publishedDates().reversed() where d < baseline.date {
            guard let day = Timestamp.parseDate(d), day >= tonight - Int64(days) else { break }
            if let run = try read(root: root, date: d, name: name, memory: memory) { runs.append(run) }
        }
        return runs
    }

    /// The run dated `d` under `root`, nil when its folder no longer stands.
    package static func read(root: String, date d: String, name: String, memory: Int?) throws -> Baseline? {
        let folder = root + "/" + d
        guard System.kind(folder, followLinks: true) == .directory else { return nil }
        let path = folder + "/manifest.json"
        let (bytes, manifest) = try PublishedManifest.read(path, memory: memory)
        guard manifest.pipeline == name else {
            throw WinBackError(
                .badData,
                "the run dated \(d) is of the pipeline '\(ControlEscape.escaped(manifest.pipeline))', not "
                    + "'\(name)': it cannot be compared with this run (docs/rules.md §6.3); remove the link "
                    + "\(ControlEscape.name(folder))",
                path: path)
        }
        guard let asOf = Timestamp.parseDateTime(manifest.asOf) else {
            throw WinBackError(.badData, "the baseline's manifest has no valid asOf (docs/rules.md §6.3)", path: path)
        }
        var outputs: [String: String] = [:]
        for o in manifest.outputs { outputs[o.path] = o.sha256 }
        return Baseline(
            date: d, folder: folder, manifestSHA256: Hex.string(SHA256.hash(data: bytes)), asOf: asOf, outputs: outputs)
    }
}

/// What a run reads of a published run's `manifest.json` (docs/rules.md §4.4): its pipeline,
/// its as-of and the files it wrote with their SHA-256. Read as an input (docs/rules.md §6.3):
/// a regular file, never through a link, bounded, decoded once into these fields alone.
package struct PublishedManifest: Decodable, Sendable {
    package struct Output: Decodable, Sendable {
        package var path: String
        package var sha256: String
    }
    package var pipeline: String
    package var asOf: String
    package var outputs: [Output]

    /// The largest manifest a run reads: a run's manifest lists its inputs and outputs, a few
    /// hundred bytes each, so even 100,000 input files stay far below it.
    package static let maxBytes = 64 << 20

    /// The largest manifest a run under `memory` reads: an eighth of its limit (decoding takes
    /// about two and a half times the file's size), at most ``maxBytes``.
    package static func limit(memory: Int?) -> Int { min(maxBytes, memory.map { max($0 / 8, 1 << 20) } ?? maxBytes) }

    /// The bytes of the manifest at `path` and what they say. Missing, not a regular file, a
    /// link, larger than ``limit(memory:)``, empty, not JSON or without the fields: bad data
    /// (65) naming it.
    package static func read(_ path: String, memory: Int?) throws -> ([UInt8], PublishedManifest) {
        let bytes = try bytes(path, memory: memory)
        return (bytes, try decode(bytes, path: path))
    }

    /// What the manifest `bytes` (read from `path`) say; bad data (65) naming it when they are
    /// not a run's manifest.
    package static func decode(_ bytes: [UInt8], path: String) throws -> PublishedManifest {
        do {
            return try JSONDecoder().decode(PublishedManifest.self, from: Data(bytes))
        } catch {
            throw WinBackError(
                .badData,
                "the baseline's manifest is damaged (\(bytes.isEmpty ? "empty" : "not a run's manifest")): remove "
                    + "that run's dated link, or restore its manifest (docs/rules.md §6.3)", path: path)
        }
    }

    /// The bytes of the manifest at `path`, read as ``read(_:memory:)`` says.
    package static func bytes(_ path: String, memory: Int?) throws -> [UInt8] {
        let fd: Int32
        let size: Int
        do { (fd, size) = try System.openRegularFile(path, followLinks: false) } catch let e as System.NotRegularFile {
            throw WinBackError(
                .badData, "the baseline's manifest is \(e.what), not a regular file (docs/rules.md §6.3)", path: path)
        } catch {
            throw WinBackError(
                .badData,
                "the baseline's manifest is gone or unreadable while its dated folder stands: remove that run's "
                    + "dated link, or restore its manifest (docs/rules.md §6.3)", path: path)
        }
        defer { System.closeQuietly(fd) }
        let limit = limit(memory: memory)
        guard size <= limit else {
            throw WinBackError(
                .badData,
                "the baseline's manifest is \(size) bytes, more than the \(limit) a run reads "
                    + "(docs/rules.md §6.3): not a manifest this tool wrote", path: path)
        }
        guard let bytes = try? System.read(fd, upTo: size), bytes.count == size else {
            throw WinBackError(.badData, "the baseline's manifest could not be read whole", path: path)
        }
        return bytes
    }
}
