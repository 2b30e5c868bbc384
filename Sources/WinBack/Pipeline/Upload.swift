import Crypto
import Foundation
import Synchronization
import WinBackDelivery
import WinBackHistory
import WinBackS3
import WinBackSupport

/// `output.upload` and `winback upload` (docs/rules.md §11): a published run copied to
/// `<prefix>/<name>/<date>/`, every file with its SHA-256 for the server to check (multipart
/// above ``multipartAbove``), then `_SUCCESS` listing the files and their SHA-256, then
/// `<prefix>/<name>/latest` holding the date. A reader that waits for `_SUCCESS` never sees
/// half a run.
public enum Upload {
    /// Files larger than this go up in parts.
    public static let multipartAbove = 64 << 20

    /// Uploads the published folder `folder` (the run of `date`).
    public static func run(
        folder: String, to prefix: S3Location, name: String, date: String, threads: Int, progress: Progress
    ) throws {
        let client = try S3Client.shared()
        let root = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        let files = try listFiles(root)
        let base = (prefix.key.isEmpty ? "" : (prefix.key.hasSuffix("/") ? prefix.key : prefix.key + "/")) + name + "/"
        let started = Date()
        // A run of this date uploaded before: its `_SUCCESS` goes first, so no reader takes the
        // mix of old and new files for a whole run; what it had and this run lacks goes after.
        let success = S3Location(bucket: prefix.bucket, key: base + date + "/_SUCCESS")
        let before = try client.list(bucket: prefix.bucket, prefix: base + date + "/")
        if before.contains(where: { $0.location == success }) { try client.delete(success) }
        let digests = ResultSlots<(String, Int, String)>(count: files.count)
        // A few at once: each file up to 64 MiB is held while it goes up.
        @Sendable func upload(_ i: Int) throws {
            let rel = files[i]
            let path = root + "/" + rel
            let size = System.fileSize(path) ?? 0
            let target = S3Location(bucket: prefix.bucket, key: base + date + "/" + rel)
            let sha: String
            if size > multipartAbove {
                sha = try digest(path)
                try client.putMultipart(target, file: path, size: size)
            } else {
                guard let data = System.contents(path) else {
                    throw WinBackError(.noInput, "cannot read the published file", path: path)
                }
                sha = Hex.string(SHA256.hash(data: data))
                try client.put(target, data, contentType: contentType(rel))
            }
            digests[i] = (rel, size, sha)
        }
        let failed = Flag()
        try parallelFor(count: files.count, threads: max(1, min(threads * 2, 4))) { i in
            // Once one file could not go up, the run's answer is known: the rest are not tried.
            guard !failed.isSet else { return }
            do { try upload(i) } catch {
                failed.set()
                throw error
            }
        }
        let uploaded = Set(files.map { base + date + "/" + $0 })
        for old in before where old.location != success && !uploaded.contains(old.location.key) {
            try client.delete(old.location)
        }
        let listed = digests.all.map { ["path": $0.0, "bytes": $0.1, "sha256": $0.2] as [String: Any] }
        let marker = try JSONSerialization.data(
            withJSONObject: ["files": listed, "date": date, "pipeline": name] as [String: Any],
            options: [.prettyPrinted, .sortedKeys])
        try client.put(success, marker, contentType: "application/json")
        // `latest` names the newest run, as the local `latest` link does: an older run uploaded
        // again leaves it alone.
        let local = (folder as NSString).deletingLastPathComponent + "/latest"
        if URL(fileURLWithPath: local).resolvingSymlinksInPath().path == root {
            try client.put(
                S3Location(bucket: prefix.bucket, key: base + "latest"), Data((date + "\n").utf8),
                contentType: "text/plain")
        }
        let runURI = S3Location(bucket: prefix.bucket, key: "\(base)\(date)/").uri
        progress.event(
            "uploaded", "uploaded \(files.count) files to \(runURI)",
            fields: [
                "uri": runURI, "files": files.count,
                "seconds": (Date().timeIntervalSince(started) * 1000).rounded() / 1000,
            ])
    }

    /// Every file below `root`, relative, in bytewise order.
    static func listFiles(_ root: String) throws -> [String] {
        guard let out = System.filesBelow(root) else {
            throw WinBackError(.noInput, "cannot list the published run", path: root)
        }
        return out.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    static func digest(_ path: String) throws -> String {
        guard let h = FileHandle(forReadingAtPath: path) else {
            throw WinBackError(.noInput, "cannot read the published file", path: path)
        }
        defer { try? h.close() }
        var hasher = SHA256()
        while true {
            let chunk = h.readData(ofLength: 8 << 20)
            if chunk.isEmpty { break }
            hasher.update(data: chunk)
        }
        return Hex.string(hasher.finalize())
    }

    static func contentType(_ path: String) -> String {
        if path.hasSuffix(".csv") { return "text/csv" }
        if path.hasSuffix(".xml") { return "application/xml" }
        if path.hasSuffix(".json") { return "application/json" }
        if path.hasSuffix(".html") { return "text/html" }
        return "application/octet-stream"
    }

    /// `winback upload`: the run of the pipeline's as-of, published before, uploaded again.
    public static func again(_ options: RunOptions, progress: Progress) throws -> String {
        let p = try ResolvedPipeline.resolve(options)
        progress.pipeline = p.config.name
        guard let upload = p.config.upload else {
            throw WinBackError(.configuration, "the pipeline has no output.upload", path: options.pipelinePath)
        }
        let publisher = p.publisher()
        // The run's lock: no run replaces the folder while it goes up.
        try publisher.begin()
        defer {
            System.removeTreeQuietly(publisher.staging)
            publisher.unlock()
        }
        let folder = publisher.root + "/" + publisher.date
        guard System.exists(folder + "/manifest.json") else {
            throw WinBackError(.noInput, "no published run for \(publisher.date): run it first", path: folder)
        }
        try run(
            folder: folder, to: upload, name: p.config.name, date: publisher.date, threads: p.threads,
            progress: progress)
        // A removal from the prefix that failed on an earlier night, tried again (docs/rules.md §6.3).
        if let plan = Pruning.plan(
            root: publisher.root, date: publisher.date, keep: p.config.keep, baseline: try Changes.baseline(p)?.date)
        {
            let removed = try Pruning.removeRemote(plan, from: upload, name: p.config.name)
            if !removed.isEmpty {
                progress.event(
                    "pruned", "removed from the upload prefix " + removed.joined(separator: ", "),
                    fields: ["remote": removed, "keepDays": plan.keepDays])
            }
        }
        let key = "\(upload.key.isEmpty ? "" : upload.key + "/")\(p.config.name)/\(publisher.date)/"
        return S3Location(bucket: upload.bucket, key: key).uri
    }
}

/// A flag set once, read from any thread.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() { value.store(true, ordering: .releasing) }
}
