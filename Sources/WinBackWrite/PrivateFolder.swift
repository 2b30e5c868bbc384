import Foundation
import WinBackSupport

/// A folder a run writes into and trusts what it finds there (docs/rules.md §6.1): the output
/// folder of a pipeline, the work folder of a run past one machine. Nobody but the run's user
/// may be able to write in it, plant a link in it, or move it away.
package enum PrivateFolder {
    /// Makes `path` (its missing parents 0755, never open to all whatever the umask), or checks
    /// the one there, and sets it to `mode` (and `group`). Exit 73, naming `what` ("output
    /// folder"), when a folder above it could be written by another user without the sticky
    /// bit, when it is not a folder or is a link (`ownLink`: a link of this user's own is
    /// followed), or when it is another user's (unless this process has just made it: on a
    /// filesystem that maps root to another user, root's own new folder is that user's).
    /// Without `create`, a missing folder is left missing: false is returned.
    @discardableResult
    package static func make(
        _ path: String, mode: mode_t, group: gid_t? = nil, what: String, create: Bool = true, ownLink: Bool = false
    ) throws -> Bool {
        let parent = (path as NSString).deletingLastPathComponent
        if create {
            do { try System.makeDirectories(parent, mode: 0o755) } catch {
                throw WinBackError(
                    .cannotCreateOutput, "cannot create the \(what): \(OutputFile.folderProblem(path, error))",
                    path: path)
            }
        }
        // Whoever may rename what is in a folder above could move this one away while a run
        // writes and put their own in its place.
        if let why = System.swappableAncestor(parent) {
            throw WinBackError(
                .cannotCreateOutput, "\(why): another user could swap the \(what) while a run writes into it",
                path: path)
        }
        var folder = path
        var madeNow = false
        if let kind = System.linkKind(path) {
            if kind == System.symbolicLinkType {
                guard ownLink, System.linkOwner(path) == geteuid(), let target = System.resolved(path) else {
                    throw WinBackError(
                        .cannotCreateOutput, "is a symbolic link; the \(what) must be a real folder", path: path)
                }
                folder = target
                if let why = System.swappableAncestor((target as NSString).deletingLastPathComponent) {
                    throw WinBackError(
                        .cannotCreateOutput,
                        "\(why): another user could swap the \(what) (\(target)) while a run writes into it", path: path
                    )
                }
            }
            if System.kind(folder) != .directory {
                throw WinBackError(
                    .cannotCreateOutput,
                    "is \(System.describe(System.linkKind(folder) ?? 0)), not a folder; the \(what) must be a folder",
                    path: path)
            }
        } else {
            guard create else { return false }
            do {
                try System.makeDirectory(path, mode: 0o700)
                madeNow = true
            } catch let e as SystemError where e.errno == EEXIST {
                // Made in between by another task of the same run: checked below as any other.
            } catch let e as SystemError {
                throw WinBackError(
                    .cannotCreateOutput, "cannot create the \(what): \(OutputFile.folderProblem(path, e))", path: path)
            }
        }
        do { try System.secureDirectory(folder, mode: mode, group: group, anyOwner: madeNow) } catch let e
            as SystemError
        {
            throw e.winBack(.cannotCreateOutput, "cannot make the \(what) private", path: path)
        } catch let e as System.OwnedByAnother {
            throw WinBackError(.cannotCreateOutput, "the \(what) \(e); a run writes only into its own", path: path)
        }
        return true
    }

    /// What ``make(_:mode:group:what:create:ownLink:)`` would refuse (73) at `path`, found
    /// without creating or changing anything: a part of the path that is a file, a folder above
    /// that another user could swap, a link or another user's folder where the folder belongs
    /// (`winback validate`, docs/rules.md §10.10). Nil when a run could make or use it.
    package static func problem(_ path: String, what: String) -> WinBackError? {
        var existing = path
        while System.linkKind(existing) == nil {
            let up = (existing as NSString).deletingLastPathComponent
            if up == existing || up.isEmpty { break }
            existing = up
        }
        if existing != path && System.kind(existing) != .directory {
            return WinBackError(
                .cannotCreateOutput,
                "cannot create the \(what): \(existing) is \(System.describe(System.linkKind(existing) ?? 0)), not "
                    + "a folder", path: path)
        }
        let parent = existing == path ? (path as NSString).deletingLastPathComponent : existing
        if let why = System.swappableAncestor(parent) {
            return WinBackError(
                .cannotCreateOutput, "\(why): another user could swap the \(what) while a run writes into it",
                path: path)
        }
        guard existing == path else { return nil }
        if System.linkKind(path) == System.symbolicLinkType {
            return WinBackError(
                .cannotCreateOutput, "is a symbolic link; the \(what) must be a real folder", path: path)
        }
        if System.kind(path) != .directory {
            return WinBackError(
                .cannotCreateOutput,
                "is \(System.describe(System.linkKind(path) ?? 0)), not a folder; the \(what) must be a folder",
                path: path)
        }
        if let owner = System.linkOwner(path), owner != geteuid() {
            return WinBackError(
                .cannotCreateOutput,
                "the \(what) is owned by another user (uid \(owner)), not by this run's (uid \(geteuid())); a run "
                    + "writes only into its own", path: path)
        }
        return nil
    }
}
