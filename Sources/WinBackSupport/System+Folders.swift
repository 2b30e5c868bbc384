import Foundation

/// The file system's folders and names as the layers above ask for them: the one place
/// `FileManager` is called outside the command line and the test-only code.
extension System {
    /// The working directory.
    package static var currentDirectory: String { FileManager.default.currentDirectoryPath }

    /// The names in `folder`; none when it cannot be listed.
    package static func entries(_ folder: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    }

    /// The names in `folder`; throws when it cannot be listed.
    package static func listing(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder)
    }

    /// Removes `path` and, for a folder, everything below it (a link is removed, not followed).
    package static func removeTree(_ path: String) throws { try FileManager.default.removeItem(atPath: path) }

    /// ``removeTree(_:)``, whatever it finds: what is already gone, or cannot go, is left.
    package static func removeTreeQuietly(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    /// Whether anything is at `path`, a link followed.
    package static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Whether something other than a folder is at `path`, a link followed.
    package static func existsAsFile(_ path: String) -> Bool {
        var isFolder: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && !isFolder.boolValue
    }

    /// The target `link` holds; nil when it is no link.
    package static func linkTarget(_ link: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: link)
    }

    /// The whole of a small file; nil when it cannot be read.
    package static func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// Makes `path` and the folders above it that are missing.
    package static func makeFolders(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The files below `root` (links not followed), as paths relative to it; nil when it cannot
    /// be walked.
    package static func filesBelow(_ root: String) -> [String]? {
        guard let walk = FileManager.default.enumerator(atPath: root) else { return nil }
        var out: [String] = []
        while let rel = walk.nextObject() as? String {
            if existsAsFile(root + "/" + rel) { out.append(rel) }
        }
        return out
    }
}
