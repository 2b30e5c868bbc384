import Foundation
import Testing

@testable import WinBack
@testable import WinBackIncremental
@testable import WinBackModel
@testable import WinBackSupport

/// The `incremental` key, and the settings that make a state's rows valid (docs/rules.md §12).
@Suite("Incremental settings (docs/rules.md §12)")
struct IncrementalSettingsTests {
    static let minimal = PipelineConfigTests.minimal

    @Test("incremental: off by default, true or false, anything else a named problem")
    func key() {
        #expect(PipelineConfig.parse(Self.minimal, path: "/p/nightly.yaml").0?.incremental == false)
        let on = PipelineConfig.parse(Self.minimal + "\nincremental: true\n", path: "/p/nightly.yaml")
        #expect(on.1 == [])
        #expect(on.0?.incremental == true)
        #expect(
            PipelineConfig.parse(Self.minimal + "\nincremental: false\n", path: "/p/nightly.yaml").0?.incremental
                == false)
        let bad = PipelineConfig.parse(Self.minimal + "\nincremental: yes please\n", path: "/p/nightly.yaml").1
        #expect(bad.count == 1)
        #expect(bad.first?.contains("incremental") == true)
        #expect(bad.first?.contains("expected true or false") == true)
    }

    static let settings = StateSettings(
        toolVersion: ToolVersion.current, format: "appstore-signed", environment: "Production", products: [:],
        verify: true, roots: ["aa"], bundleId: "com.example", appAppleId: 1, consecutiveGapDays: 60,
        maxLineBytes: 16 << 20, maxRejectsListed: 100_000, shards: nil)

    @Test("every setting that makes rows valid is named when it changes; equal settings change nothing")
    func changes() {
        let s = Self.settings
        #expect(s.changes(from: s) == [])
        func changed(_ edit: (inout StateSettings) -> Void) -> [String] {
            var t = s
            edit(&t)
            return t.changes(from: s)
        }
        #expect(changed { $0.toolVersion = "9.9.9" } == ["winback \(ToolVersion.current) wrote it, this is 9.9.9"])
        #expect(changed { $0.format = "csv" } == ["the format changed from appstore-signed to csv"])
        #expect(changed { $0.environment = "Sandbox" } == ["the environment changed from Production to Sandbox"])
        #expect(changed { $0.products = ["p": "g"] } == ["the product map changed"])
        #expect(changed { $0.verify = false } == ["signatures are no longer verified"])
        #expect(changed { $0.roots = ["aa", "bb"] } == ["the apple roots changed"])
        #expect(changed { $0.bundleId = "com.other" } == ["the apple app checks changed"])
        #expect(changed { $0.appAppleId = 2 } == ["the apple app checks changed"])
        #expect(changed { $0.consecutiveGapDays = 30 } == ["consecutiveGapDays changed from 60 to 30"])
        #expect(changed { $0.maxLineBytes = 1024 } == ["limits.maxLineBytes changed"])
        #expect(changed { $0.maxRejectsListed = 3 } == ["limits.maxRejectsListed changed"])
        #expect(changed { $0.shards = 1 } == ["a run in memory kept the state; this run is memory-bounded (1 shard)"])
        var sharded = s
        sharded.shards = 4
        var more = sharded
        more.shards = 5
        #expect(more.changes(from: sharded) == ["the state was kept in 4 shards; this run uses 5"])
        #expect(
            s.changes(from: sharded) == ["a memory-bounded run kept the state in 4 shards; this run is in memory"])
        // Several at once, all named.
        #expect(
            changed {
                $0.format = "csv"
                $0.consecutiveGapDays = 1
            }.count == 2)
    }
}
