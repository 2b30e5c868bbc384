import Foundation
import WinBackModel
import WinBackRead
import WinBackSupport
import WinBackWrite

extension StateFolder {
    /// Reads a rows file of the state into `rows` (of the state: merged after the files read
    /// now), each row's rank the index in the run's paths of the file it came from. Anything
    /// wrong with it (size, SHA-256, a section, a count) is ``StateDamaged``.
    static func load(_ rows: StateRows, from path: String, _ expected: OutputStats, pathOf: [Int]) throws {
        var ranks: [UInt32] = []
        ranks.reserveCapacity(min(expected.rows, expected.bytes / 2))
        do {
            let reader = try PartReader(path: path, bytes: expected.bytes, sha256: expected.sha256)
            while let li = try reader.next(into: rows) {
                guard li < pathOf.count else {
                    throw StateDamaged(why: "a section names a file the ledger does not list")
                }
                let rank = UInt32(pathOf[li])
                for _ in ranks.count..<rows.rows.count { ranks.append(rank) }
            }
        } catch let e as WinBackError {
            throw StateDamaged(why: "\((path as NSString).lastPathComponent): \(e.message)")
        }
        guard ranks.count == expected.rows else {
            throw StateDamaged(why: "it holds \(ranks.count) rows where its ledger says \(expected.rows)")
        }
        rows.ranks = ranks
    }
}

/// The rows files of the next state, one a piece, written from several threads at once (one
/// thread a piece at a time), unsynced: a state cut short by a crash fails its checks and is
/// rebuilt (docs/rules.md §12).
final class StateRowsWriter: @unchecked Sendable {
    private let folder: String
    private let name: @Sendable (Int) -> String
    private let lock = NSLock()
    /// Each piece's file and the strings written to it so far.
    private var pieces: [Int: (writer: PartWriter, strings: Int)] = [:]
    private var failure: Error?

    init(folder: String, name: @escaping @Sendable (Int) -> String) {
        self.folder = folder
        self.name = name
    }

    /// Appends rows of `file` to piece `piece` (its strings first, those it lacks).
    @Sendable func append(_ piece: Int, _ file: Int, _ rows: UnsafeBufferPointer<Transaction>, _ strings: StringTable) {
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
    func finish(atLeastOne: Bool = false) throws -> [OutputStats] {
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
