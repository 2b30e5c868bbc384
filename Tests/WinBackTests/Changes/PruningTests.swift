import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

/// output.keep read from the pipeline file; the pruning itself runs in the slow target.
@Suite("Keeping published runs (output.keep): the setting")
struct PruningTests {
    @Test("output.keep must be a whole number of days from 0")
    func keepValidated() throws {
        for (value, ok) in [("0", true), ("35", true), ("-1", false), ("ten", false), ("36501", false)] {
            let yaml = """
                name: k
                transactions: {format: csv, paths: ["t.csv"]}
                offers: offers.json
                output: {directory: out, keep: \(value)}

                """
            let (config, problems) = PipelineConfig.parse(yaml, path: "/tmp/k.yaml")
            #expect(problems.isEmpty == ok, "\(value): \(problems)")
            if ok { #expect(config?.keep == Int(value)) }
        }
        let (config, _) = PipelineConfig.parse(
            "name: k\ntransactions: {format: csv, paths: [t.csv]}\noffers: o.json\noutput: {directory: out}\n",
            path: "/tmp/k.yaml")
        #expect(config?.keep == 35)
    }
}
