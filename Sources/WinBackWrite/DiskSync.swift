import Foundation
import Synchronization
import WinBackSupport

/// Makes finished output files durable on a thread of its own, so that the threads writing
/// outputs never wait for the disk: each file is synced and closed there while the next one
/// is being written, and ``wait()``, called before a run is published, returns once every file
/// handed over is on disk, or throws if one could not be synced.
package final class DiskSync: Sendable {
    private let queue = DispatchQueue(label: "winback.disk-sync")
    private let pending = DispatchGroup()
    /// Files that could not be synced: (path, the system's reason).
    private let failures = Mutex<[(path: String, reason: String)]>([])
    /// Syncs a file by its descriptor (injectable for tests); returns 0 or an errno.
    private let syncFile: @Sendable (Int32) -> Int32
    /// Files handed over and not yet closed, at most `limit`: a catalog of hundreds of offers
    /// must not run the process out of descriptors when the disk is slower than the writers.
    private let room: DispatchSemaphore

    /// The group every file handed over is given as it is made (`output.group`), nil: the user's.
    package let group: gid_t?

    package init(
        limit: Int = 64, group: gid_t? = nil, syncFile: @escaping @Sendable (Int32) -> Int32 = { System.fsync($0) }
    ) {
        self.syncFile = syncFile
        self.group = group
        room = DispatchSemaphore(value: max(1, limit))
    }

    /// Takes over `fd` (written in full): it is synced, then closed, in the background. Waits
    /// first while `limit` files are still waiting for the disk.
    func sync(_ fd: Int32, path: String) {
        room.wait()
        queue.async(group: pending) { [self] in
            var rc: Int32
            repeat { rc = syncFile(fd) } while rc == EINTR
            System.closeQuietly(fd)
            room.signal()
            if rc != 0 {
                let failure = (path: path, reason: SystemError("fsync", errno: rc).message)
                failures.withLock { $0.append(failure) }
            }
        }
    }

    /// Returns once every file handed over is synced; throws for the first path (in path
    /// order, whatever the order of syncing) that could not be.
    package func wait() throws {
        pending.wait()
        if let first = failures.withLock({ $0.min(by: { $0.path < $1.path }) }) {
            throw WinBackError(.cannotCreateOutput, "cannot sync: \(first.reason)", path: first.path)
        }
    }
}
