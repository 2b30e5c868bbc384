import Foundation
import Testing
import WinBackTestSupport

@testable import WinBackSupport

/// Between the stages of a memory-bounded run, read-only file mappings are unmapped and the
/// heap trimmed (docs/rules.md §8): resident memory falls, and no page's contents change.
@Suite("Resident memory: what a bounded run lets go of between stages")
struct ResidentMemoryTests {
    /// A /proc/self/smaps of nine mappings: each one's line, its sizes in kB and its flags.
    static let smaps = [
        mapping(
            "55d0a0000000-55d0a1000000 r-xp 00000000 fe:00 1234                       /usr/bin/winback",
            [("Size", 16384), ("Rss", 8192), ("Anonymous", 0), ("Locked", 0)], flags: "rd ex mr mw me sd"),
        mapping(
            "55d0a1000000-55d0a1100000 r--p 01000000 fe:00 1234                       /usr/bin/winback",
            [("Size", 1024), ("Rss", 1024), ("Anonymous", 800), ("Locked", 0)], flags: "rd mr mw me ac sd"),
        mapping(
            "55d0a1100000-55d0a1200000 rw-p 01100000 fe:00 1234                       /usr/bin/winback",
            [("Size", 1024), ("Rss", 300), ("Anonymous", 200)], flags: "rd wr mr mw me ac sd"),
        mapping(
            "55d0a2000000-55d0a2400000 rw-p 00000000 00:00 0                          [heap]",
            [("Size", 4096), ("Rss", 4096), ("Anonymous", 4096)], flags: "rd wr mr mw me ac sd"),
        mapping(
            "7f0000000000-7f0000100000 r--p 00000000 fe:00 99                         /usr/lib/libc.so.6",
            [("Size", 1024), ("Rss", 512), ("Anonymous", 0)], flags: "rd mr mw me sd"),
        mapping(
            "7f0000100000-7f0000200000 r-xp 00100000 fe:00 99                         /usr/lib/libc.so.6",
            [("Size", 1024), ("Rss", 0), ("Anonymous", 0)], flags: "rd ex mr mw me sd"),
        mapping(
            "7f0000200000-7f0000300000 r-xp 00000000 fe:00 77                         /usr/lib/liblocked.so",
            [("Size", 1024), ("Rss", 1024), ("Anonymous", 0), ("Locked", 1024)], flags: "rd ex mr mw me lo sd"),
        mapping(
            "7f0000300000-7f0000400000 r--s 00000000 fe:00 55                         /tmp/shared map",
            [("Size", 1024), ("Rss", 64), ("Anonymous", 0)], flags: "rd sh mr mw me ms sd"),
        mapping(
            "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]",
            [("Size", 8), ("Rss", 4), ("Anonymous", 0)], flags: "rd ex mr mw me de sd"),
    ].joined()

    /// One mapping as smaps writes it: the line that names it, `Name:  N kB` lines (the numbers
    /// ending in one column) and its VmFlags.
    static func mapping(_ line: String, _ sizes: [(String, Int)], flags: String) -> String {
        let rows = sizes.map { name, kB in
            let label = name + ":"
            return label + String(repeating: " ", count: 24 - label.count - String(kB).count) + "\(kB) kB"
        }
        return ([line] + rows + ["VmFlags: " + flags]).map { $0 + "\n" }.joined()
    }

    /// Resident bytes of the mapping holding `address` (its `Rss:` line in /proc/self/smaps).
    static func resident(_ address: UnsafeRawPointer) -> Int? {
        guard let smaps = System.readGenerated("/proc/self/smaps") else { return nil }
        let a = UInt(bitPattern: address)
        var inside = false
        for line in String(decoding: smaps, as: UTF8.self).split(separator: "\n") {
            let first = line.split(separator: " ", maxSplits: 1).first ?? ""
            let bounds = first.split(separator: "-")
            if bounds.count == 2, let lo = UInt(bounds[0], radix: 16), let hi = UInt(bounds[1], radix: 16) {
                inside = lo <= a && a < hi
            } else if inside, line.hasPrefix("Rss:") {
                return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }.map { $0 * 1024 }
            }
        }
        return nil
    }

    @Test("only resident, read-only mappings of a file with no private page and no lock are chosen")
    func choosesReadOnlyFileMappings() {
        let chosen = ResidentMemory.releasable(Array(Self.smaps.utf8))
        #expect(
            chosen == [
                .init(start: 0x55d0_a000_0000, end: 0x55d0_a100_0000),  // the binary's code
                .init(start: 0x7f00_0000_0000, end: 0x7f00_0010_0000),  // libc's constants
                .init(start: 0x7f00_0030_0000, end: 0x7f00_0040_0000),  // a shared read-only map
            ])
        // Not the relocated constants (Anonymous 800 kB), writable data, the heap, code with
        // nothing resident, locked code nor the vDSO (no file).
        #expect(ResidentMemory.releasable([]) == [])
        #expect(ResidentMemory.releasable(Array("garbage\n1-2\nRss: x kB\n".utf8)) == [])
    }

    @Test("this process's resident memory falls; code runs on and no page changes")
    func releasesAndKeeps() throws {
        // A file mapped read-only (its pages read back unchanged), and a file mapped writable
        // then made read-only after one page was changed (a private copy: never unmapped, so
        // the change stays), as the loader does with relocated constants.
        let dir = Paths.temporary()
        let path = dir + "/mapped"
        let pattern = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try Data(pattern).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        let size = pattern.count
        let plain = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0))
        #expect(plain != MAP_FAILED)
        defer { munmap(plain, size) }
        let copied = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        #expect(copied != MAP_FAILED)
        defer { munmap(copied, size) }
        var sum = 0
        for i in stride(from: 0, to: size, by: 4096) { sum &+= Int(plain.load(fromByteOffset: i, as: UInt8.self)) }
        copied.storeBytes(of: 0xEE, toByteOffset: 8192, as: UInt8.self)
        #expect(mprotect(copied, size, PROT_READ) == 0)
        // Writable memory of the process's own: never unmapped.
        var heap = [UInt8](repeating: 0x5A, count: 1 << 20)
        heap[12345] = 0xA5

        // The read-only mapping's own resident bytes, which no test running beside this one
        // touches (the process's total moves with what they load and run).
        let before = try #require(Self.resident(plain))
        let released = ResidentMemory.releaseUnused()
        let after = try #require(Self.resident(plain))
        #expect(released > 0)
        #expect(
            before >= size / 2 && after < before / 2, "the mapping's resident bytes: \(before) before, \(after) after")

        #expect(Array(UnsafeRawBufferPointer(start: plain, count: size)) == pattern)
        var expected = pattern
        expected[8192] = 0xEE
        #expect(Array(UnsafeRawBufferPointer(start: copied, count: size)) == expected)
        #expect(heap[12345] == 0xA5 && heap[0] == 0x5A && heap[(1 << 20) - 1] == 0x5A)
        #expect(sum > 0)
        // Code unmapped runs again: a hash, formatting and a sort.
        #expect(String(describing: [3, 1, 2].sorted()) == "[1, 2, 3]")
        #expect(ControlEscape.escaped("a\nb") == "a\\x0Ab")
    }
}
