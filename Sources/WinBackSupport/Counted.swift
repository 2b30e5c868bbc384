/// `n` and the noun, plural unless `n` is 1: "1 shard", "3 shards", "0 files".
package func counted(_ n: some BinaryInteger, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
