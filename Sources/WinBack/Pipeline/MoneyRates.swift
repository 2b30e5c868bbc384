import Foundation
import WinBackRead
import WinBackRules
import WinBackSupport

/// Reads the rates file of a pipeline's `money:` block (docs/rules.md §13.1), local or in S3.
enum MoneyRates {
    /// The rates, nil without `money`. A missing file is missing input (66); a malformed one a
    /// configuration error (78) naming its line.
    static func load(_ config: PipelineConfig) throws -> Rates? {
        guard let money = config.money else { return nil }
        let path = config.resolve(money.ratesPath)
        guard let data = try InputStores.contents(path) else {
            throw WinBackError(.noInput, "the rates file is missing or unreadable", path: path)
        }
        return try Rates.parse([UInt8](data), currency: money.currency, path: path)
    }
}
