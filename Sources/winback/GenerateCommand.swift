import ArgumentParser
import WinBack
import WinBackTesting

struct GenerateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Write a synthetic, realistic world: transaction exports, renewal info and an offer catalog.",
        discussion: """
            Deterministic: the same options give byte-identical files, except appstore-signed ones, \
            which are the same in content but not byte for byte (ECDSA signatures are randomised, \
            and each run makes its own test chain).
            """)

    @Option(help: "How many customers.")
    var customers: Int

    @Option(help: "Random seed.")
    var seed: UInt64 = 1

    @Option(help: "Folder to write into (created if missing).")
    var out: String

    @Option(name: .customLong("as-of"), help: "The world's present: YYYY-MM-DD (default 2026-11-22).")
    var asOf: String = "2026-11-22"

    @Option(help: "Export format (appstore-signed: signed by a test chain).")
    var format: InputFormat = .appstoreNDJSON

    func validate() throws {
        if customers < 1 { throw ValidationError("--customers must be at least 1") }
        guard let v = PipelineConfig.AsOf.parse(asOf), case .instant = v else {
            throw ValidationError("--as-of must be a date YYYY-MM-DD or an instant YYYY-MM-DDTHH:MM:SSZ")
        }
    }

    func run() throws {
        guard case .instant(let t) = PipelineConfig.AsOf.parse(asOf) else { return }
        let summary = try reportingErrors {
            try WorldGenerator.generate(
                GenerateOptions(customers: customers, seed: seed, asOf: t, format: format), to: out)
        }
        print(
            "wrote \(summary.files.count) files, \(summary.transactions) transactions, \(summary.customers) customers to \(out)"
        )
    }
}
