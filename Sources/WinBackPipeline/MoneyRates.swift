import Foundation
import WinBackRead
import WinBackRules
import WinBackSupport

/// Reads the rates file of a pipeline's `money:` block (docs/rules.md §13.1), local or in S3.
package enum MoneyRates {
    /// The rates, nil without `money`. A missing file is missing input (66); a malformed one a
    /// configuration error (78) naming its line.
    package static func load(_ config: PipelineConfig) throws -> Rates? {
        guard let money = config.money else { return nil }
        let path = config.resolve(money.ratesPath)
        guard !InputStores.isObject(path) else {
            // An object is fetched whole: one larger than any rates file is refused unread (§6.3).
            if let size = InputStores.identity(path)?.size, size > Rates.maxObjectBytes {
                throw WinBackError(
                    .configuration,
                    "the rates file is \(size) bytes, more than the \(Rates.maxObjectBytes) any "
                        + "rates file needs (docs/rules.md §6.3)", path: path)
            }
            guard let data = try InputStores.contents(path) else {
                throw WinBackError(.noInput, "the rates file is missing or unreadable", path: path)
            }
            return try Rates.parse([UInt8](data), currency: money.currency, path: path)
        }
        // Line by line, never whole: a file of any size is read in bounded memory (§6.3).
        let source: PlainFileSource
        do { source = try PlainFileSource(path: path, hashed: false) } catch {
            throw WinBackError(.noInput, "the rates file is missing or unreadable", path: path)
        }
        let cursor = LineCursor(source: source, chunkSize: 1 << 16, maxLineBytes: Rates.maxLineBytes)
        var reader = Rates.Reader(currency: money.currency, path: path)
        var pendingEmpty = 0
        var number = 0
        while let line = try cursor.next() {
            number += 1
            if cursor.cut { throw reader.tooLong(line: number) }
            var n = line.count
            if n > 0 && line[n - 1] == 10 { n -= 1 }
            // Empty lines at the end are allowed: taken only once a line with content follows.
            if n == 0 || (n == 1 && line[0] == 13) {
                pendingEmpty += 1
                continue
            }
            for _ in 0..<pendingEmpty { try reader.take([UInt8]()) }
            pendingEmpty = 0
            try reader.take(line[0..<n])
        }
        return try reader.finish()
    }
}
