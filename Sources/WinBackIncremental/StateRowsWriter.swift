import Foundation
import Synchronization
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport
import WinBackWrite

/// The rows files of the next state, one a piece, written from several threads at once (one
/// thread a piece at a time), unsynced: a state cut short by a crash fails its checks and is
/// rebuilt (docs/rules.md §12).
package final class StateRowsWriter: Sendable {
    private let folder: String
    private let name: @Sendable (Int) -> String
    private struct State {
        /// Each piece's file and the strings written to it so far.
        var pieces: [Int: (writer: PartWriter, strings: Int)] = [:]
        var failure: Error?
    }
    private let state = Mutex(State())

    package init(folder: String, name: @escaping @Sendable (Int) -> String) {
        self.folder = folder
        self.name = name
    }

    /// Appends rows of `file` to piece `piece` (its strings first, those it lacks).
    @Sendable package func append(
        _ piece: Int, _ file: Int, _ rows: Span<Transaction>, _ strings: StringTable
    ) {
        let got: (writer: PartWriter, strings: Int)? = state.withLock { s in
            if s.failure != nil { return nil }
            if let w = s.pieces[piece] { return w }
            do {
                let w = (try PartWriter(path: folder + "/" + name(piece)), 0)
                s.pieces[piece] = w
                return w
            } catch {
                s.failure = error
                return nil
            }
        }
        guard let (writer, from) = got else { return }
        do {
            try writer.append(file: file, table: strings, from: from, rows: rows)
            state.withLock { $0.pieces[piece]?.strings = strings.count }
        } catch {
            state.withLock { $0.failure = $0.failure ?? error }
        }
    }

    /// Closes every piece; returns their names, sizes, rows and SHA-256, by piece.
    /// With `atLeastOne`, a writer that was handed no rows writes piece 0, empty.
    package func finish(atLeastOne: Bool = false) throws -> [OutputStats] {
        let (pieces, failure) = state.withLock { ($0.pieces, $0.failure) }
        if let failure { throw failure }
        var all = pieces
        if atLeastOne && all.isEmpty { all[0] = (try PartWriter(path: folder + "/" + name(0)), 0) }
        var out: [OutputStats] = []
        for (k, (writer, _)) in all.sorted(by: { $0.key < $1.key }) {
            try writer.close(sync: false)
            out.append(
                OutputStats(path: name(k), bytes: writer.compressedBytes, rows: writer.rows, sha256: writer.sha256))
        }
        return out
    }
}
