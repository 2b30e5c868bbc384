import Foundation
import WinBackSupport

/// Resolves the input globs of a pipeline to files: relative to the pipeline's folder, each
/// file once, in sorted path order (absolute, normalised paths compared by their bytes).
///
/// The files are ``FileName``s (docs/rules.md §6.2): a name that is not UTF-8 is held as the
/// bytes it is, so it is opened and read like any other.
public enum InputFiles {
    /// Makes `path` absolute against `base` and normalises it (`.`/`..`, repeated slashes).
    public static func absolute(_ path: String, base: String) -> String {
        InputStores.namingStore(for: path).absolute(path, base: base)
    }

    /// Files matching `patterns`; a pattern matching nothing fails with exit 66 naming it.
    /// (``InputStores/resolve(_:base:)`` gives each with its identity.)
    public static func resolve(_ patterns: [String], base: String) throws -> [String] {
        try InputStores.resolve(patterns, base: base).map(\.path)
    }

    /// The local files matching `pattern`, absolute and normalised.
    static func resolveLocal(_ pattern: String, base: String) throws -> [String] {
        // The pipeline file's paths are text; as names, they join the names glob(3) finds.
        let base = FileName.fromText(base)
        let pattern = FileName.fromText(pattern)
        let abs = FilePaths.absolute(pattern, base: base)
        // The base folder is a path, not a pattern: its `[`, `*`, `?` and `\` are literal.
        let isPattern = pattern.contains { "*?[".contains($0) }
        let matches = isPattern ? try glob(FilePaths.absolute(pattern, base: escapeGlob(base))) : try literal(abs)
        if matches.isEmpty {
            throw WinBackError(.noInput, "matches no file", path: pattern == abs ? pattern : "\(pattern) (\(abs))")
        }
        // Only regular files are input (docs/rules.md §6.1): a FIFO would block the read, a
        // device never end.
        for m in matches {
            if let what = System.notRegular(m) {
                throw WinBackError(.noInput, "is \(what), not a regular file", path: m)
            }
        }
        return matches.map { FilePaths.absolute($0, base: "/") }
    }

    /// `path` with glob(3)'s special characters escaped, so it matches only itself.
    static func escapeGlob(_ path: String) -> String {
        var out = ""
        for c in path {
            if c == "*" || c == "?" || c == "[" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out
    }

    static func glob(_ pattern: String) throws -> [String] {
        let hasMagic = pattern.contains { "*?[".contains($0) }
        if !hasMagic { return try literal(pattern) }
        let matches: [String]
        do { matches = try System.glob(pattern) } catch let e as SystemError { throw globFailure(e, pattern: pattern) }
        // Every match is an input, even a dangling link (so that an unreadable one fails the run
        // by name instead of vanishing) and a folder (an input error, as a folder named is).
        return matches
    }

    /// The error of a glob that failed: the folder it could not list and why (`cannot list the
    /// folder /data/in: Permission denied`), exit 66.
    static func globFailure(_ e: SystemError, pattern: String) -> WinBackError {
        if let folder = e.path {
            return WinBackError(.noInput, "cannot list the folder \(folder): \(e.message)", path: pattern)
        }
        return WinBackError(.noInput, "cannot expand the glob: \(e.message)", path: pattern)
    }

    /// `[path]` when it names a file, `[]` when nothing is there.
    static func literal(_ path: String) throws -> [String] {
        // A dangling link is still named, so that reading it fails with its name.
        guard System.kind(path, followLinks: false) != .missing else { return [] }
        // A folder is refused with any other file that is not regular, below.
        return [path]
    }

    /// Size in bytes of a file, 0 when it cannot be read (the read reports that).
    package static func size(_ path: String) -> Int {
        InputStores.identity(path)?.size ?? 0
    }

    /// The indices of `paths`, largest file first (ties in path order): the order to hand
    /// files to threads in, so that no thread is left with a large one at the end. Each file
    /// is measured once.
    package static func largestFirst(_ paths: [String]) -> [Int] {
        largestFirst(sizes: paths.map(size))
    }

    /// ``largestFirst(_:)`` of resolved inputs, by the sizes they were resolved with.
    package static func largestFirst(inputs: [Input]) -> [Int] {
        largestFirst(sizes: inputs.map(\.identity.size))
    }

    static func largestFirst(sizes: [Int]) -> [Int] {
        sizes.indices.sorted { sizes[$0] != sizes[$1] ? sizes[$0] > sizes[$1] : $0 < $1 }
    }
}
