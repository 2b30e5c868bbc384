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

@Suite("System calls: one wrapper, errno captured once")
struct SystemTests {
    @Test("a missing file fails to open with the call and the system's words, and maps to an exit code")
    func missingFile() {
        let path = Paths.temporary() + "/absent"
        do {
            _ = try System.openForReading(path)
            Issue.record("opened a missing file")
        } catch let e as SystemError {
            #expect(e.call == "open")
            #expect(e.errno == ENOENT)
            let w = e.winBack(.noInput, "cannot open", path: path)
            #expect(w.code.exitCode == 66)
            #expect("\(w)".contains("No such file or directory"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("bytes written in full are read back; the end of the file reads 0")
    func writeThenRead() throws {
        let path = Paths.temporary() + "/f"
        let fd = try System.createForWriting(path)
        let bytes = [UInt8]((0..<100_000).map { UInt8($0 & 0xFF) })
        try bytes.withUnsafeBytes { try System.writeAll(fd, $0) }
        #expect(System.fsync(fd) == 0)
        try System.close(fd)
        #expect(System.fileSize(path) == bytes.count)
        let rd = try System.openForReading(path)
        defer { System.closeQuietly(rd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        var back: [UInt8] = []
        while case let n = try System.read(rd, into: buffer), n > 0 { back += buffer[0..<n] }
        #expect(back == bytes)
    }

    @Test("a lock held through one descriptor is refused through another")
    func lockIsExclusive() throws {
        let path = Paths.temporary() + "/.lock"
        let a = try System.openOrCreate(path)
        let b = try System.openOrCreate(path)
        defer { System.closeQuietly(b) }
        #expect(try System.tryLock(a))
        #expect(try !System.tryLock(b))
        System.closeQuietly(a)  // the kernel releases the lock with the descriptor
        #expect(try System.tryLock(b))
    }

    @Test("kinds of paths: missing, file, folder, and a link seen with and without following it")
    func kinds() throws {
        let dir = Paths.temporary()
        #expect(System.kind(dir) == .directory)
        #expect(System.kind(dir + "/none") == .missing)
        #expect(FileManager.default.createFile(atPath: dir + "/file", contents: Data()))
        #expect(System.kind(dir + "/file") == .file)
        try System.symlink(".", at: dir + "/link")
        #expect(System.kind(dir + "/link") == .directory)
        #expect(System.kind(dir + "/link", followLinks: false) == .other)
    }
}
