import Crypto
import Foundation
import WinBackSupport

/// The files a published run's manifest recorded (docs/rules.md §4.4): their SHA-256, so that a
/// baseline's segment file is trusted only as it was published.
package struct BaselineFiles: Sendable {
    package let folder: String
    /// SHA-256 (hex) by path relative to the run's folder.
    package let sha256: [String: String]

    /// The files `baseline`'s manifest lists: as decoded when it was found in this process, or,
    /// for a baseline handed from another (an array job's fingerprint), its manifest read again
    /// (never through a link, bounded as when it was found: ``PublishedManifest``) and trusted
    /// only with the SHA-256 it had when found: a manifest changed or replaced since is bad data
    /// (65).
    package init(_ baseline: Baseline, memory: Int? = nil) throws {
        folder = baseline.folder
        // Found in this process: its manifest was read and decoded then, once (docs/rules.md §6.3).
        if let outputs = baseline.outputs {
            sha256 = outputs
            return
        }
        let path = folder + "/manifest.json"
        let bytes: [UInt8]
        do { bytes = try PublishedManifest.bytes(path, memory: memory) } catch {
            throw WinBackError(.badData, "the baseline's manifest can no longer be read", path: path)
        }
        guard Hex.string(SHA256.hash(data: bytes)) == baseline.manifestSHA256 else {
            throw WinBackError(
                .badData, "the baseline's manifest changed while this run used it: run again", path: path)
        }
        let manifest = try PublishedManifest.decode(bytes, path: path)
        var sha: [String: String] = [:]
        for o in manifest.outputs { sha[o.path] = o.sha256 }
        sha256 = sha
    }

    /// The baseline's file `rel`, or nil when the baseline has none (a segment new since); a
    /// file its manifest lists and that is gone is bad data (65).
    package func path(of rel: String) throws -> String? {
        let path = folder + "/" + rel
        if System.kind(path, followLinks: false) == .missing {
            if sha256[rel] != nil {
                throw WinBackError(
                    .badData, "the baseline's manifest lists this segment file, which is gone", path: path)
            }
            return nil
        }
        return path
    }
}
