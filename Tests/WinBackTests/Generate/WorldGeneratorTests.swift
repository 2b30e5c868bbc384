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

/// The generator's gzip files read back; worlds are generated in the slow target.
@Suite("winback generate: its gzip writer")
struct WorldGeneratorTests {
    @Test("a gzip written by the generator reads back intact, across many writes")
    func gzipRoundTrip() throws {
        let dir = Paths.temporary()
        let w = try GzipWriter(path: dir + "/t.gz")
        var expected: [UInt8] = []
        var rng = SplitMix64(seed: 9)
        for i in 0..<2000 {
            let line = Array("line \(i) \(rng.next())\n".utf8)
            expected += line
            try w.write(line)
        }
        try w.close()
        let source = try openSource(path: dir + "/t.gz")
        var got: [UInt8] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        defer { buffer.deallocate() }
        while case let n = try source.read(into: buffer), n > 0 { got += buffer[0..<n] }
        #expect(got == expected)
    }
}
