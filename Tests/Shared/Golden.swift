import Foundation
import Testing

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// Paths of the repository and of the test fixtures.
enum Paths {
    static let repo: String = {
        // This file is shared by both test targets (each reaches it through its `Shared` link):
        // the repository is the first folder above it with a Package.swift.
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.path + "/Package.swift") && url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }()

    static let fixtures = repo + "/Tests/WinBackTests/Fixtures"
    static let segmentXSD = repo + "/Data/schemas/segment.xsd"

    /// A fresh folder under ``temporaryRoot``.
    static func temporary() -> String {
        let dir = temporaryRoot + "/" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// This test process's own folder under the system temporary directory, removed when the
    /// process exits. Folders of earlier test processes that are gone (killed before they could
    /// clean up) are removed when it is made.
    static let temporaryRoot: String = {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("winback-tests").path
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] {
            if let pid = Int32(entry), kill(pid, 0) != 0, errno == ESRCH {
                try? FileManager.default.removeItem(atPath: parent + "/" + entry)
            }
        }
        let root = parent + "/\(getpid())"
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        atexit {
            try? FileManager.default.removeItem(
                atPath: FileManager.default.temporaryDirectory.appendingPathComponent("winback-tests/\(getpid())").path)
        }
        return root
    }()

    /// Copies a fixture world into a fresh temporary folder (runs write next to the pipeline).
    static func copyFixture(_ name: String) throws -> String {
        let dir = temporary()
        let dest = dir + "/" + name
        try FileManager.default.copyItem(atPath: fixtures + "/" + name, toPath: dest)
        return dest
    }
}

/// Whether golden files are rewritten from the outputs (`WINBACK_UPDATE_GOLDEN=1 swift test`):
/// every changed golden line must then be checked by hand (`git diff`) before it is committed.
let updatingGolden = ProcessInfo.processInfo.environment["WINBACK_UPDATE_GOLDEN"] == "1"

/// Compares a file with its golden copy; on mismatch records `diff -U5` output. With
/// `WINBACK_UPDATE_GOLDEN=1`, a golden copy that differs is replaced by the file instead, and
/// the difference is still recorded, so that the run says what changed.
func expectSameFile(_ actual: String, golden: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let a = FileManager.default.contents(atPath: actual)
    let g = FileManager.default.contents(atPath: golden)
    if a != nil, a == g { return }
    defer {
        if updatingGolden, let a {
            try? FileManager.default.createDirectory(
                atPath: (golden as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            if !FileManager.default.createFile(atPath: golden, contents: a) {
                Issue.record("cannot update golden \(golden)", sourceLocation: sourceLocation)
            }
        }
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/diff")
    p.arguments = ["-U5", golden, actual]
    let pipe = Pipe()
    p.standardOutput = pipe
    try? p.run()
    p.waitUntilExit()
    let diff = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    Issue.record("\(actual) differs from golden \(golden):\n\(diff)", sourceLocation: sourceLocation)
}

/// Every file below `dir`, relative, sorted.
func filesBelow(_ dir: String) -> [String] {
    (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? [])
        .filter {
            var d: ObjCBool = false
            return FileManager.default.fileExists(atPath: dir + "/" + $0, isDirectory: &d) && !d.boolValue
        }
        .sorted()
}
extension Tag {
    /// Suites that start processes, generate worlds or fuzz: they live in the WinBackSlowTests
    /// target, so `swift test --filter WinBackTests` is the quick run (CI runs everything).
    @Tag static var slow: Self
}
