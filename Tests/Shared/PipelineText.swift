/// The text of the smallest pipeline file the configuration tests parse: the sample's exports
/// and catalog, published to `../Output`.
package enum PipelineText {
    /// The minimal pipeline, ending in a newline, with `output` lines added under `output:`.
    package static func minimal(output: [String] = []) -> String {
        let lines = [
            "name: nightly", "transactions:", "  paths: [\"../Data/sample/transactions-*.jsonl.gz\"]",
            "offers: ../Data/sample/offers.json", "output:", "  directory: ../Output",
        ]
        return (lines + output.map { "  " + $0 }).map { $0 + "\n" }.joined()
    }
}
