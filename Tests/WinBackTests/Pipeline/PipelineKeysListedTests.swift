import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack

/// `Pipelines/nightly.yaml` and docs/rules.md §2.5 say they list every key of a pipeline file:
/// both are compared with the keys the parser itself accepts, found by asking it (an unknown key
/// at every level makes it name the keys it knows), so a key added to the parser and not to the
/// template or the table fails here. Read from the files, in this process: no tool runs.
@Suite("Every pipeline key is listed (docs/rules.md §2.5)")
struct PipelineKeysListedTests {
    @Test("the parser's keys are found by asking it, at every level")
    func parserKeysAreFound() {
        let keys = ParserKeys.all()
        // A few keys of every kind, so that a change of the parser's message is noticed here
        // rather than comparing two empty sets.
        for key in [
            "name", "transactions.paths", "output.destinations", "output.destinations[].maxBytes",
            "limits.memory", "apple.appAppleId", "experiment.holdout", "identities.key", "products",
        ] {
            #expect(keys.contains(key), "\(key) not found among \(keys.sorted())")
        }
        #expect(!keys.contains("products.com"))
    }

    @Test("Pipelines/nightly.yaml lists every key, commented-out keys included, and nothing else")
    func nightlyTemplateListsEveryKey() throws {
        let text = try String(contentsOfFile: Paths.repo + "/Pipelines/nightly.yaml", encoding: .utf8)
        let listed = Set(ListedKeys.inYAML(text, comments: true))
        let known = ParserKeys.all()
        #expect(known.subtracting(listed).sorted() == [], "keys the parser knows and nightly.yaml does not list")
        #expect(listed.subtracting(known).sorted() == [], "keys nightly.yaml lists and the parser does not know")
        // The template as it stands is a valid pipeline file.
        let (_, problems) = PipelineConfig.parse(text, path: "/srv/winback/Pipelines/nightly.yaml")
        #expect(problems == [])
    }

    @Test("docs/rules.md §2.5 lists every key in its example and in its table")
    func rulesSectionListsEveryKey() throws {
        let rules = try String(contentsOfFile: Paths.repo + "/docs/rules.md", encoding: .utf8)
        let section = try #require(ListedKeys.section(rules, from: "### 2.5 ", to: "### 2.6 "))
        let known = ParserKeys.all()
        let example = try #require(ListedKeys.firstYAMLBlock(section))
        let inExample = Set(ListedKeys.inYAML(example, comments: false))
        #expect(known.subtracting(inExample).sorted() == [], "keys missing from §2.5's example")
        #expect(inExample.subtracting(known).sorted() == [], "keys in §2.5's example the parser does not know")
        // The table lists values: every key without keys below it (a block such as `limits` may
        // be left out when its keys are listed).
        let leaves = known.filter { k in !known.contains { $0.hasPrefix(k + ".") || $0.hasPrefix(k + "[]") } }
        #expect(leaves.contains("limits.memory") && !leaves.contains("limits"))
        let inTable = Set(ListedKeys.inTable(section))
        #expect(leaves.subtracting(inTable).sorted() == [], "keys missing from §2.5's table")
        #expect(inTable.subtracting(known).sorted() == [], "keys in §2.5's table the parser does not know")
    }

    @Test("the template reader follows nesting, list entries and commented-out keys, not prose")
    func listedKeysReader() {
        let text = """
            # Names the output folder: prose, not a key
            name: x
            output:
              directory: /o
              # group: growth
              destinations:
                - type: braze
                  maxRows: 10
                # - type: klaviyo
            # identities:
            #   path: /i.csv
            #   key: original_transaction_id
            products:
              com.example.monthly: "1"
            limits:
              maxLineBytes: 16MiB   # a comment: after a key
            """
        #expect(
            ListedKeys.inYAML(text, comments: true) == [
                "name", "output", "output.directory", "output.group", "output.destinations",
                "output.destinations[].type", "output.destinations[].maxRows", "output.destinations[].type",
                "identities", "identities.path", "identities.key", "products", "limits", "limits.maxLineBytes",
            ])
        #expect(!ListedKeys.inYAML(text, comments: false).contains("identities"))
        #expect(ListedKeys.inTable("| `a.b` | yes |\n| key | required |\n|---|---|\n| `c` | no |") == ["a.b", "c"])
    }
}

/// The keys the pipeline parser accepts, as dotted paths (`limits.memory`; entries of a list as
/// `output.destinations[].type`). Each level is found from the parser's own message for an unknown
/// key ("…; known keys: a, b"), so nothing here repeats the parser's lists.
enum ParserKeys {
    static let probe = "zzzProbe"

    static func all() -> Set<String> {
        var out: Set<String> = []
        explore(path: [], into: &out)
        return out
    }

    /// Adds the keys under `path` (a mapping, or a list of mappings when its last part is "[]")
    /// and, for each, what lies under it.
    private static func explore(path: [String], into out: inout Set<String>) {
        // Entries of a list are mappings of plain values here: nothing is looked for below them.
        guard path.count < 4, !path.dropLast().contains("[]"), let keys = known(under: path) else { return }
        for key in keys {
            let p = path + [key]
            out.insert(dotted(p))
            explore(path: p, into: &out)
            explore(path: p + ["[]"], into: &out)
        }
    }

    /// The keys the parser names for an unknown key under `path`, or nil when it names none
    /// (the value there is not a mapping it checks).
    private static func known(under path: [String]) -> [String]? {
        var yaml = ""
        var indent = ""
        for part in path where part != "[]" {
            yaml += indent + part + ":\n"
            indent += "  "
        }
        let entry = path.last == "[]"
        yaml += indent + (entry ? "- " : "") + probe + ": 1\n"
        let file = "/srv/p/probe.yaml"
        // Each problem begins with the file's path.
        let problems = PipelineConfig.parse(yaml, path: file).1.map { $0.dropFirst(file.count + 2) }
        let at = entry ? dotted(path.dropLast()) + "[0]" : dotted(path)
        let unknown = "unknown key '" + (at.isEmpty ? "" : at + ".") + probe + "'"
        guard let message = problems.first(where: { $0.hasPrefix(unknown) }),
            let list = message.range(of: "known keys: ")
        else { return nil }
        return message[list.upperBound...].split(separator: ", ").map(String.init)
    }

    private static func dotted(_ path: some Collection<String>) -> String {
        var s = ""
        for part in path {
            if part == "[]" {
                s += "[]"
            } else {
                s += (s.isEmpty ? "" : ".") + part
            }
        }
        return s
    }
}

/// Keys listed in a YAML text or a Markdown table, read from the text itself.
enum ListedKeys {
    /// The dotted paths of the keys in `text`, in order. A key is a lowerCamelCase word followed by
    /// a colon at the start of a line (after the indentation, and after `- ` for a list entry);
    /// with `comments`, lines `# key: …` count too, their indentation being the `#`'s plus the
    /// spaces after `# ` (so a commented-out block nests as it would uncommented). Prose comments
    /// begin with a capital or with words before any colon, so they are not keys.
    static func inYAML(_ text: String, comments: Bool) -> [String] {
        var stack: [(indent: Int, name: String)] = []
        var out: [String] = []
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = Substring(raw)
            var indent = line.prefix(while: { $0 == " " }).count
            line = line.dropFirst(indent)
            if line.hasPrefix("#") {
                guard comments, line.hasPrefix("# ") else { continue }
                line = line.dropFirst(2)
                let more = line.prefix(while: { $0 == " " }).count
                indent += more
                line = line.dropFirst(more)
            }
            var entry = false
            if line.hasPrefix("- ") {
                entry = true
                line = line.dropFirst(2)
            }
            guard let key = leadingKey(line) else { continue }
            if entry {
                while let top = stack.last, top.indent >= indent { stack.removeLast() }
                stack.append((indent, "[]"))
                indent += 2
            }
            while let top = stack.last, top.indent >= indent { stack.removeLast() }
            var path = ""
            for part in stack.map(\.name) + [key] {
                path += part == "[]" ? "[]" : (path.isEmpty ? "" : ".") + part
            }
            out.append(path)
            stack.append((indent, key))
        }
        return out
    }

    /// `key` when `line` begins with `key:` followed by a space or the end, key being a
    /// lowerCamelCase word.
    private static func leadingKey(_ line: Substring) -> String? {
        guard let first = line.first, first.isASCII, first.isLowercase else { return nil }
        let word = line.prefix(while: { $0.isASCII && ($0.isLetter || $0.isNumber) })
        let rest = line.dropFirst(word.count)
        guard rest.hasPrefix(":"), rest.count == 1 || rest.dropFirst().first == " " else { return nil }
        return String(word)
    }

    /// The first column of every table row whose first cell is one code span: `| \`a.b\` | …`.
    static func inTable(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("| `") else { return nil }
            let cell = line.dropFirst(3).prefix(while: { $0 != "`" })
            let after = line.dropFirst(3 + cell.count)
            return after.hasPrefix("` |") ? String(cell) : nil
        }
    }

    /// The text from the line beginning with `from` to the next line beginning with `to`.
    static func section(_ text: String, from: String, to: String) -> String? {
        guard let start = text.range(of: "\n" + from) else { return nil }
        let rest = text[start.upperBound...]
        let end = rest.range(of: "\n" + to)?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }

    /// The body of the first ```yaml block.
    static func firstYAMLBlock(_ text: String) -> String? {
        guard let open = text.range(of: "```yaml\n") else { return nil }
        let rest = text[open.upperBound...]
        guard let close = rest.range(of: "```") else { return nil }
        return String(rest[..<close.lowerBound])
    }
}
