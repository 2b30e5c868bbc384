import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport

/// The rows files of the next state, one a piece, written from several threads at once (one
/// thread a piece at a time), unsynced: a state cut short by a crash fails its checks and is
/// rebuilt (docs/rules.md §12).
package final class StateRowsWriter: @unchecked Sendable {
    private let folder: String
    private let name: @Sendable (Int) -> String
    private let lock = NSLock()
    /// Each piece's file and the strings written to it so far.
    private var pieces: [Int: (writer: PartWriter, strings: Int)] = [:]
    private var failure: Error?

    package init(folder: String, name: @escaping @Sendable (Int) -> String) {
        self.folder = folder
        self.name = name
    }

    /// Appends rows of `file` to piece `piece` (its strings first, those it lacks).
    @Sendable package func append(
        _ piece: Int, _ file: Int, _ rows: Span<Transaction>, _ strings: StringTable
    ) {
        let got: (writer: PartWriter, strings: Int)? = lock.withLock {
            if failure != nil { return nil }
            if let w = pieces[piece] { return w }
            do {
                let w = (try PartWriter(path: folder + "/" + name(piece)), 0)
                pieces[piece] = w
                return w
            } catch {
                failure = error
                return nil
            }
        }
        guard let (writer, from) = got else { return }
        do {
            try writer.append(file: file, table: strings, from: from, rows: rows)
            lock.withLock { pieces[piece]?.strings = strings.count }
        } catch {
            lock.withLock { failure = failure ?? error }
        }
    }

    /// Closes every piece; returns their names, sizes, rows and SHA-256, by piece.
    /// With `atLeastOne`, a writer that was handed no rows writes piece 0, empty.
    package func finish(atLeastOne: Bool = false) throws -> [OutputStats] {
        if let failure { throw failure }
        if atLeastOne && pieces.isEmpty { pieces[0] = (try PartWriter(path: folder + "/" + name(0)), 0) }
        var out: [OutputStats] = []
        for (k, (writer, _)) in pieces.sorted(by: { $0.key < $1.key }) {
            try writer.close(sync: false)
            out.append(
                OutputStats(path: name(k), bytes: writer.compressedBytes, rows: writer.rows, sha256: writer.sha256))
        }
        return out
    }
}
