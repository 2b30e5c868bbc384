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

extension ReadStageTests {
    /// Resolving input globs to files (docs/rules.md §2.5: relative to the pipeline's folder, each file
    /// once, absolute normalised paths sorted bytewise; §6: a glob matching nothing fails).
    @Suite struct InputFilesTests {
        static let normalisation: [(path: String, base: String, expected: String)] = [
            ("a/b.jsonl", "/x/y", "/x/y/a/b.jsonl"),
            ("a/b.jsonl", "/x/y/", "/x/y/a/b.jsonl"),
            ("../d/./e.gz", "/x/y", "/x/d/e.gz"),
            ("./f", "/", "/f"),
            ("/abs//p/../q", "/ignored", "/abs/q"),
            ("../../../../f", "/a", "/f"),
            ("a//b/./c/..", "/x", "/x/a/b"),
            ("*.gz", "/x/./y/../z", "/x/z/*.gz"),
        ]

        /// Resolving `patterns` from `base` fails with noInput (66), its message passing `says`.
        func expectNoInput(
            _ patterns: [String], base: String, sourceLocation: SourceLocation = #_sourceLocation,
            _ says: (String) -> Bool
        ) throws {
            let e = try expectWinBackError(exit: 66, sourceLocation: sourceLocation) {
                _ = try InputFiles.resolve(patterns, base: base)
            }
            #expect(e?.code == .noInput && e.map { says($0.description) } == true, sourceLocation: sourceLocation)
        }

        @Test(arguments: normalisation)
        func pathsAreMadeAbsoluteAndNormalised(path: String, base: String, expected: String) {
            #expect(InputFiles.absolute(path, base: base) == expected)
        }

        @Test func filesAreHandedOutLargestFirstWithTiesInPathOrder() throws {
            try ReadSupport.withTempDir { dir in
                let sizes = [3, 10, 0, 10, 7]
                let paths = sizes.enumerated().map { dir.path + "/f\($0.offset)" }
                for (p, n) in zip(paths, sizes) {
                    #expect(FileManager.default.createFile(atPath: p, contents: Data(repeating: 0x61, count: n)))
                }
                #expect(InputFiles.largestFirst(paths) == [1, 3, 4, 0, 2])
                #expect(InputFiles.largestFirst([]) == [])
            }
        }

        /// A world: `root/pipelines/` (the base) and `root/data/` with files and a folder.
        private func world(_ body: (_ root: String, _ base: String) throws -> Void) throws {
            try ReadSupport.withTempDir { dir in
                let fm = FileManager.default
                let root = dir.path
                try fm.createDirectory(atPath: root + "/pipelines", withIntermediateDirectories: true)
                try fm.createDirectory(atPath: root + "/data/sub.jsonl.gz", withIntermediateDirectories: true)
                try fm.createDirectory(atPath: root + "/data/a-b", withIntermediateDirectories: true)
                try fm.createDirectory(atPath: root + "/data/a", withIntermediateDirectories: true)
                for name in [
                    "data/t-2.jsonl.gz", "data/t-10.jsonl.gz", "data/T-3.jsonl.gz", "data/_t.jsonl.gz",
                    "data/é.jsonl.gz",
                    "data/r.jsonl", "data/a/z.jsonl", "data/a-b/y.jsonl",
                ] {
                    try ReadSupport.write("", to: URL(fileURLWithPath: root + "/" + name))
                }
                try body(root, root + "/pipelines")
            }
        }

        @Test func relativeGlobsResolveAgainstTheBaseAndSortBytewise() throws {
            try world { root, base in
                let files = try InputFiles.resolve(["../data/[!s]*.jsonl.gz"], base: base)
                // Bytewise: 'T' < '_' < 't', "10" < "2", 'é' (0xC3…) last.
                #expect(files == ["T-3", "_t", "t-10", "t-2", "é"].map { root + "/data/\($0).jsonl.gz" })
            }
        }

        @Test(arguments: ["../data/*.jsonl.gz", "../data/sub.*", "../data/*"])
        func aFolderAGlobMatchesIsNoInputNamingIt(pattern: String) throws {
            try world { root, base in
                try expectNoInput(["../data/t-2.jsonl.gz", pattern], base: base) {
                    $0.hasPrefix(root + "/data/") && $0.hasSuffix(": is a folder, not a regular file")
                }
            }
        }

        @Test func sortingIsBytewiseOnTheWholePath() throws {
            try world { root, base in
                // '-' (0x2D) sorts before '/' (0x2F): a-b/y before a/z.
                let files = try InputFiles.resolve(["../data/a/*.jsonl", "../data/a-b/*"], base: base)
                #expect(files == [root + "/data/a-b/y.jsonl", root + "/data/a/z.jsonl"])
            }
        }

        @Test func aFileMatchedByManyGlobsIsListedOnce() throws {
            try world { root, base in
                let files = try InputFiles.resolve(
                    [
                        "../data/t-2.jsonl.gz", "../data/t-*.jsonl.gz", root + "/data/t-2.jsonl.gz",
                        "../pipelines/../data/./t-2.jsonl.gz", root + "//data/../data/t-[0-9].jsonl.gz",
                    ], base: base)
                #expect(files == [root + "/data/t-10.jsonl.gz", root + "/data/t-2.jsonl.gz"])
            }
        }

        @Test func theGlobOrderDoesNotMatter() throws {
            try world { _, base in
                let a = try InputFiles.resolve(["../data/r.jsonl", "../data/t-*", "../data/T-*"], base: base)
                let b = try InputFiles.resolve(["../data/T-*", "../data/r.jsonl", "../data/t-*"], base: base)
                #expect(a == b)
                #expect(a.count == 4)
            }
        }

        @Test(arguments: ["../data/nothing-*.jsonl.gz", "../data/missing.jsonl.gz", "../nowhere/*.gz"])
        func aRelativeGlobMatchingNothingIsNoInputNamingIt(pattern: String) throws {
            try world { _, base in
                try expectNoInput(["../data/t-2.jsonl.gz", pattern], base: base) { $0.contains(pattern) }
            }
        }

        @Test func anAbsoluteGlobMatchingNothingIsNoInputNamingIt() throws {
            try world { root, base in
                let pattern = root + "/data/*.csv"
                #expect {
                    _ = try InputFiles.resolve([pattern], base: base)
                } throws: { e in
                    (e as? WinBackError)?.code == .noInput
                        && (e as? WinBackError)?.description.contains(pattern) == true
                }
            }
        }

        @Test func aFolderAGlobCannotListIsNamedWithTheSystemsReason() {
            let e = InputFiles.globFailure(
                SystemError("opendir", errno: EACCES, path: "/data/in"), pattern: "/data/in/*.jsonl.gz")
            #expect(e.code == .noInput)
            #expect(e.description == "/data/in/*.jsonl.gz: cannot list the folder /data/in: Permission denied")
        }

        /// Whether this process is refused a folder with mode 000 (not when it runs as root).
        static var permissionsApply: Bool {
            let dir = Paths.temporary() + "/closed"
            try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try? FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: dir)
            defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir) }
            return (try? FileManager.default.contentsOfDirectory(atPath: dir)) == nil
        }

        @Test(
            .enabled(
                if: permissionsApply,
                "this process can list a folder with mode 000 (it runs as root), so no folder is unreadable to it"))
        func aGlobInAnUnreadableFolderSaysPermissionDenied() throws {
            try world { root, base in
                try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: root + "/data")
                defer {
                    try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root + "/data")
                }
                #expect {
                    _ = try InputFiles.resolve(["../data/*.jsonl.gz"], base: base)
                } throws: { e in
                    "\(e)" == "\(root)/data/*.jsonl.gz: cannot list the folder \(root)/data: Permission denied"
                }
            }
        }

        @Test func aFolderNamedOrMatchedAloneIsNoInputNamedAlike() throws {
            try world { root, base in
                for pattern in ["../data/sub*", "../data/sub.jsonl.gz"] {
                    #expect {
                        _ = try InputFiles.resolve([pattern], base: base)
                    } throws: { e in
                        (e as? WinBackError)?.code == .noInput
                            && "\(e)" == "\(root)/data/sub.jsonl.gz: is a folder, not a regular file"
                    }
                }
            }
        }

        @Test(arguments: ["exports [2024]", "a*b", "what?", "back\\slash"])
        func aBaseFolderWithGlobCharactersIsTakenLiterally(folder: String) throws {
            try ReadSupport.withTempDir { dir in
                let root = dir.appendingPathComponent(folder).path
                let fm = FileManager.default
                try fm.createDirectory(atPath: root + "/pipelines", withIntermediateDirectories: true)
                try fm.createDirectory(atPath: root + "/data", withIntermediateDirectories: true)
                for name in ["t-1.jsonl.gz", "t-2.jsonl.gz"] {
                    try ReadSupport.write("", to: URL(fileURLWithPath: root + "/data/" + name))
                }
                let base = root + "/pipelines"
                let expected = [root + "/data/t-1.jsonl.gz", root + "/data/t-2.jsonl.gz"]
                #expect(try InputFiles.resolve(["../data/t-*.jsonl.gz"], base: base) == expected)
                #expect(
                    try InputFiles.resolve(["../data/t-1.jsonl.gz", "../data/t-2.jsonl.gz"], base: base) == expected)
                #expect {
                    _ = try InputFiles.resolve(["../data/none-*"], base: base)
                } throws: { e in
                    (e as? WinBackError)?.code == .noInput
                        && (e as? WinBackError)?.description.contains(root + "/data/none-*") == true
                }
            }
        }

        @Test func noGlobsGiveNoFiles() throws {
            #expect(try InputFiles.resolve([], base: "/") == [])
        }
    }
}
