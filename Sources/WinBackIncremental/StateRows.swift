import Foundation
import WinBackModel
import WinBackPipeline
import WinBackRead
import WinBackSupport
import WinBackWrite

extension StateFolder {
    /// Reads a rows file of the state into `rows` (of the state: merged after the files read
    /// now), each row's rank the index in the run's paths of the file it came from. Anything
    /// wrong with it (size, SHA-256, a section, a count) is ``StateDamaged``.
    package static func load(_ rows: inout StateRows, from path: String, _ expected: OutputStats, pathOf: [Int]) throws
    {
        var ranks: [UInt32] = []
        ranks.reserveCapacity(min(expected.rows, expected.bytes / 2))
        do {
            let reader = try PartReader(path: path, bytes: expected.bytes, sha256: expected.sha256)
            while let li = try reader.next(into: &rows) {
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
