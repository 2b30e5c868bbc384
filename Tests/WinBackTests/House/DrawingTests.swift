import Foundation
import Testing

/// The drawing is true: Package.swift's internal dependencies are exactly what each target
/// imports, and docs/architecture.md names every file with unsafe code, every target and every
/// folder of Sources (docs/architecture.md, "Targets", "What is unsafe, and why"). Read from the
/// files themselves, in this process: no tool runs.
@Suite struct DrawingTests {
    /// The repository: the first folder above this file with a Package.swift.
    static let repo: String = {
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.path + "/Package.swift") && url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }()

    /// Modules of the toolchain and the system, which no target declares.
    static let systemModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "FoundationXML", "Glibc", "Musl",
        "Darwin", "Dispatch", "Testing", "XCTest", "Synchronization", "Observation", "_Concurrency",
    ]

    @Test("every target's dependencies are exactly the modules its sources import")
    func dependenciesAreImports() throws {
        let targets = try PackageDrawing.targets(of: Self.repo + "/Package.swift")
        #expect(targets.count >= 10, "Package.swift's targets were not found: \(targets.map(\.name))")
        for target in targets {
            let imported = try SourceScan.imports(below: Self.repo + "/" + target.path)
                .subtracting(Self.systemModules)
            let declared = Set(target.dependencies)
            #expect(
                imported.subtracting(declared).isEmpty,
                "\(target.name) imports \(imported.subtracting(declared).sorted()) without declaring them")
            #expect(
                declared.subtracting(imported).isEmpty,
                "\(target.name) declares \(declared.subtracting(imported).sorted()), imported nowhere in \(target.path)"
            )
        }
    }

    @Test("every Sources file with unsafe code is in architecture.md's list, and every file listed has some")
    func unsafeListIsComplete() throws {
        let doc = try String(contentsOfFile: Self.repo + "/docs/architecture.md", encoding: .utf8)
        let listed = ArchitectureDoc.unsafeFiles(doc)
        #expect(listed.count > 20, "the list of files with unsafe code was not found in docs/architecture.md")
        let withUnsafe = try SourceScan.swiftFiles(below: Self.repo + "/Sources")
            .filter { try SourceScan.usesUnsafe(String(contentsOfFile: Self.repo + "/Sources/" + $0, encoding: .utf8)) }
        for file in withUnsafe where !listed.contains(file) {
            Issue.record("Sources/\(file) uses unsafe code but docs/architecture.md does not list it")
        }
        for file in listed.subtracting(withUnsafe) {
            Issue.record("docs/architecture.md lists \(file), which is not a Sources file with unsafe code")
        }
    }

    @Test("architecture.md's target table and README's layout name every target and every folder of Sources")
    func tablesNameEveryTargetAndFolder() throws {
        let doc = try String(contentsOfFile: Self.repo + "/docs/architecture.md", encoding: .utf8)
        let readme = try String(contentsOfFile: Self.repo + "/README.md", encoding: .utf8)
        let table = ArchitectureDoc.section(doc, from: "## Targets", to: "## ")
        let layout = ArchitectureDoc.section(readme, from: "### Layout", to: "## ")
        let sources = Self.repo + "/Sources"
        for target in try FileManager.default.contentsOfDirectory(atPath: sources).sorted() {
            #expect(table.contains("`\(target)`"), "architecture.md's target table omits \(target)")
            #expect(layout.contains("Sources/\(target)"), "README's layout omits Sources/\(target)")
            for folder in try SourceScan.folders(in: sources + "/" + target) {
                #expect(table.contains("`\(folder)/`"), "architecture.md's row of \(target) omits \(folder)/")
                #expect(
                    layout.contains("Sources/\(target)/\(folder)"), "README's layout omits Sources/\(target)/\(folder)")
            }
        }
    }

    @Test("the checks find what they look for: imports outside string literals, unsafe code outside comments")
    func scannerFindsWhatItShould() {
        let quotes = String(repeating: "\"", count: 3)
        let source = [
            "import Foundation", "@_spi(Fixed) import X509", "#if canImport(Glibc)", "    import Glibc", "#endif",
            "@testable import WinBackRead", "let script = \(quotes)", "    import boto3", "    \(quotes)",
            "// an UnsafeRawBufferPointer, in a comment only",
        ]
        .joined(separator: "\n")
        #expect(SourceScan.imports(in: source) == ["Foundation", "X509", "Glibc", "WinBackRead"])
        #expect(!SourceScan.usesUnsafe(source))
        #expect(SourceScan.usesUnsafe("    @exclusivity(unchecked) var x = 0"))
        #expect(SourceScan.usesUnsafe("final class A: @unchecked Sendable {}"))
        #expect(SourceScan.usesUnsafe("nonisolated(unsafe) var y = 0"))
        #expect(SourceScan.usesUnsafe("a.withUnsafeBytes { _ in }"))
        let row = "| `WinBackModel/Int64Map.swift`, `RenewalIndex.swift` | reads | probing |"
        let doc = "Every file with unsafe code, by target:\n\n| file | what | why |\n|---|---|---|\n\(row)\n\n## Next\n"
        #expect(ArchitectureDoc.unsafeFiles(doc) == ["WinBackModel/Int64Map.swift", "WinBackModel/RenewalIndex.swift"])
    }
}

/// The targets of Package.swift as written: each one's name, folder and dependencies (target
/// names and product names, which are the modules they give).
enum PackageDrawing {
    struct Target {
        var name: String
        var path: String
        var dependencies: [String]
    }

    static func targets(of packageFile: String) throws -> [Target] {
        let text = try String(contentsOfFile: packageFile, encoding: .utf8)
        var found: [Target] = []
        for (kind, folder) in [(".target(", "Sources"), (".executableTarget(", "Sources"), (".testTarget(", "Tests")] {
            var rest = text[...]
            while let start = rest.range(of: kind) {
                let call = balanced(rest[start.upperBound...])
                rest = rest[start.upperBound...]
                guard let name = firstString(after: "name:", in: call) else { continue }
                let path = firstString(after: "path:", in: call) ?? folder + "/" + name
                var dependencies: [String] = []
                if let list = call.range(of: "dependencies:") {
                    let open = call[list.upperBound...].drop { $0 != "[" }.dropFirst()
                    let items = balanced(open, open: "[", close: "]")
                    // `.product(name: "X509", package: "swift-certificates")` gives the module X509.
                    let withoutPackages = items.replacingOccurrences(
                        of: #"package:\s*"[^"]*""#, with: "", options: .regularExpression)
                    dependencies = strings(in: withoutPackages[...])
                }
                found.append(Target(name: name, path: path, dependencies: dependencies))
            }
        }
        return found
    }

    /// The text up to the bracket that closes the one just before `text` began.
    static func balanced(_ text: Substring, open: Character = "(", close: Character = ")") -> Substring {
        var depth = 1
        var inString = false
        for i in text.indices {
            let c = text[i]
            if c == "\"" { inString.toggle() }
            if inString { continue }
            if c == open { depth += 1 }
            if c == close {
                depth -= 1
                if depth == 0 { return text[..<i] }
            }
        }
        return text
    }

    static func firstString(after label: String, in text: Substring) -> String? {
        guard let at = text.range(of: label) else { return nil }
        return strings(in: text[at.upperBound...]).first
    }

    static func strings(in text: Substring) -> [String] {
        text.split(separator: "\"", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }
}

/// What the Swift files of a folder import and whether they step outside Swift's checks.
enum SourceScan {
    /// Swift files below `folder`, relative to it, sorted.
    static func swiftFiles(below folder: String) throws -> [String] {
        guard let all = FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: folder])
        }
        return all.filter { $0.hasSuffix(".swift") }.sorted()
    }

    /// The folders directly in `folder`.
    static func folders(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder + "/" + $0, isDirectory: &isFolder)
                && isFolder.boolValue
        }
        .sorted()
    }

    static func imports(below folder: String) throws -> Set<String> {
        var modules: Set<String> = []
        for file in try swiftFiles(below: folder) {
            modules.formUnion(imports(in: try String(contentsOfFile: folder + "/" + file, encoding: .utf8)))
        }
        return modules
    }

    /// The modules `source` imports, in order, outside multi-line string literals (which hold
    /// scripts of other languages).
    static func imports(in source: String) -> [String] {
        let importLine =
            #/^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*import\s+(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?://.*)?$/#
        var modules: [String] = []
        for line in code(source) {
            if let match = line.wholeMatch(of: importLine) { modules.append(String(match.output.1)) }
        }
        return modules
    }

    /// Whether `source` uses a construct that steps outside Swift's checks: an unsafe pointer
    /// or buffer, `withUnsafe…`, `nonisolated(unsafe)`, `@unchecked Sendable`,
    /// `@exclusivity(unchecked)` or `Unmanaged`; comments do not count.
    static func usesUnsafe(_ source: String) -> Bool {
        code(source).contains { line in
            let text = line.components(separatedBy: "//").first ?? ""
            return text.contains("Unsafe") || text.contains("unsafe") || text.contains("@exclusivity(unchecked)")
                || text.contains("@unchecked") || text.contains("Unmanaged")
        }
    }

    /// The lines of `source` outside multi-line string literals and that are not whole-line comments.
    static func code(_ source: String) -> [Substring] {
        var inLiteral = false
        var lines: [Substring] = []
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            if (line.components(separatedBy: "\"\"\"").count - 1) % 2 == 1 {
                inLiteral.toggle()
                continue
            }
            if inLiteral { continue }
            if line.drop(while: { $0 == " " }).hasPrefix("//") { continue }
            lines.append(line)
        }
        return lines
    }
}

/// The parts of docs/architecture.md and README.md the drawing tests read.
enum ArchitectureDoc {
    /// The text from the line starting with `start` to the next line starting with `end`.
    static func section(_ text: String, from start: String, to end: String) -> String {
        var taking = false
        var out: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if taking && line.hasPrefix(end) && !line.hasPrefix(start) { break }
            if line.hasPrefix(start) { taking = true }
            if taking { out.append(line) }
        }
        return out.joined(separator: "\n")
    }

    /// The files of the table after "Every file with unsafe code", as paths below Sources: a
    /// cell's first name carries its folder, the names after it share that folder.
    static func unsafeFiles(_ doc: String) -> Set<String> {
        var files: Set<String> = []
        let table = section(doc, from: "Every file with unsafe code", to: "## ")
        for line in table.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.split(separator: "|").first ?? ""
            var folder = ""
            for (n, part) in cell.split(separator: "`", omittingEmptySubsequences: false).enumerated() where n % 2 == 1
            {
                if let slash = part.lastIndex(of: "/") {
                    folder = String(part[..<slash])
                    files.insert(String(part))
                } else {
                    files.insert(folder + "/" + part)
                }
            }
        }
        return files
    }
}
