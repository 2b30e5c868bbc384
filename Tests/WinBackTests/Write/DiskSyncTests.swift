import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Output files synced in the background before publishing (docs/rules.md §4, §6)")
struct DiskSyncTests {
    func temporaryFolder() throws -> String {
        let dir = Paths.temporary()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test("wait returns only once every file handed over has been synced, with its bytes complete")
    func waitsForEverySync() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let synced = SyncCounter()
        let sync = DiskSync(syncFile: { fd in
            usleep(20_000)  // a slow disk: the writers go on meanwhile
            synced.add(Int(lseek(fd, 0, SEEK_END)))
            return fsync(fd) == 0 ? 0 : errno
        })
        var sizes = 0
        for k in 0..<5 {
            let f = try OutputFile(path: "\(dir)/file\(k).csv", sync: sync)
            let bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 1000 * (k + 1))
            try f.write(bytes)
            let (n, _) = try f.finish()
            #expect(n == bytes.count)
            sizes += n
        }
        try sync.wait()
        #expect(synced.calls == 5)
        #expect(synced.total == sizes)
    }

    @Test("no more files than the limit wait for the disk at once, however slow it is")
    func boundsOpenFiles() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let synced = SyncCounter()
        let sync = DiskSync(
            limit: 3,
            syncFile: { fd in
                usleep(5_000)  // a slow disk
                let rc = fsync(fd) == 0 ? Int32(0) : errno
                synced.add(0)
                return rc
            })
        var most = 0
        for k in 0..<12 {
            let f = try OutputFile(path: "\(dir)/f\(k)", sync: sync)
            try f.write([UInt8(k)])
            _ = try f.finish()
            // Handed over, less those whose sync has returned: an upper bound of the files
            // still open.
            most = max(most, k + 1 - synced.calls)
        }
        try sync.wait()
        #expect(synced.calls == 12)
        #expect(most <= 3)
        #expect(most >= 2)  // the disk was slow enough for files to wait at all
    }

    @Test("a file that cannot be synced fails the wait with code 73, naming the first such file by path")
    func reportsFailure() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sync = DiskSync(syncFile: { _ in EIO })
        for name in ["b.csv", "a.csv", "c.csv"] {
            let f = try OutputFile(path: "\(dir)/\(name)", sync: sync)
            try f.write(Array("x\n".utf8))
            _ = try f.finish()
        }
        do {
            try sync.wait()
            Issue.record("wait did not throw")
        } catch let e as WinBackError {
            #expect(e.code == .cannotCreateOutput)
            #expect(e.code.exitCode == 73)
            #expect(e.path == "\(dir)/a.csv")
            #expect("\(e)".contains("cannot sync"))
        }
    }
}

/// Counts calls and adds up values from any thread.
final class SyncCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0, sum = 0
    func add(_ v: Int) {
        lock.lock()
        n += 1
        sum += v
        lock.unlock()
    }
    var calls: Int {
        lock.lock()
        defer { lock.unlock() }
        return n
    }
    var total: Int {
        lock.lock()
        defer { lock.unlock() }
        return sum
    }
}
