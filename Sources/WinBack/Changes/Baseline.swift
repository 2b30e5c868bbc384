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

    /// The baseline of a run publishing `date` under `root` (`<output>/<name>`), or nil. A
    /// dated folder whose manifest is missing or unreadable is passed over (a run half-removed
    /// by hand is no baseline).
    public static func find(root: String, before date: String) -> Baseline? {
        let publisher = Publisher(root: root, date: date)
        for d in publisher.publishedDates().reversed() where d < date {
            let folder = root + "/" + d
            guard let bytes = manifestBytes(folder + "/manifest.json"),
                let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                let asOfText = object["asOf"] as? String, let asOf = Timestamp.parseDateTime(asOfText)
            else { continue }
            return Baseline(
                date: d, folder: folder, manifestSHA256: Hex.string(SHA256.hash(data: bytes)), asOf: asOf)
        }
        return nil
    }

    /// The largest manifest a baseline may have.
    static let maxManifestBytes = 64 << 20

    /// The bytes of a published run's manifest: a regular file opened without following a link
    /// in its last component, under ``maxManifestBytes``, read whole; nil otherwise.
    static func manifestBytes(_ path: String) -> [UInt8]? {
        guard let (fd, size) = try? System.openRegularFile(path, followLinks: false), size < maxManifestBytes else {
            return nil
        }
        defer { System.closeQuietly(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        let read: Bool = bytes.withUnsafeMutableBytes { p in
            while filled < size {
                guard let n = try? System.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: p[filled...])), n > 0
                else { return false }
                filled += n
            }
            return true
        }
        return read ? bytes : nil
    }
}
