import ArgumentParser
import Foundation
import Synchronization
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

    @Option(name: .customLong("as-of"), help: "The world's present: YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ.")
    var asOf: String = "2026-11-22"

    @Option(help: "Export format (appstore-signed: signed by a test chain).")
    var format: InputFormat = .appstoreNDJSON

    @Option(
        help: ArgumentHelp(
            "Simulate a win-back campaign measured by a holdout experiment of this name, and write the experiment into the pipeline.",
            discussion:
                "From the experiment's start, a treatment customer eligible at a month's first instant is more likely to return with their best offer that month.",
            valueName: "name"))
    var experiment: String?

    @Option(
        help: ArgumentHelp("The share held out, e.g. 10% or 2.5% (with --experiment; default 10%).", valueName: "share")
    )
    var holdout: String?

    @Option(
        name: .customLong("experiment-start"),
        help: ArgumentHelp(
            "The first day the audiences left the holdout out, YYYY-MM-DD (with --experiment; default: the first day of the month six months before --as-of).",
            valueName: "date"))
    var experimentStart: String?

    @Option(
        help: ArgumentHelp(
            "Also load the world into this PostgreSQL database (a libpq connection string, no password: PGPASSWORD or ~/.pgpass) and write postgres-pipeline.yaml, which reads it there.",
            discussion:
                "Tables transactions and renewal_info (id bigserial, payload: text for appstore-signed, jsonb for appstore-ndjson) and identities, in --postgres-schema.",
            valueName: "connection"))
    var postgres: String?

    @Option(
        name: .customLong("postgres-schema"),
        help: ArgumentHelp(
            "The schema --postgres loads into (made if missing; its tables must not exist).", valueName: "name"))
    var postgresSchema: String = "winback_world"

    /// The experiment the options ask for; nil without --experiment.
    func resolvedExperiment(asOf t: Int64) throws -> Experiment? {
        guard let name = experiment else {
            if experimentStart != nil { throw ValidationError("--experiment-start needs --experiment NAME") }
            if holdout != nil { throw ValidationError("--holdout needs --experiment NAME") }
            return nil
        }
        guard Experiment.isValidName(name) else {
            throw ValidationError("--experiment '\(name)' must match [A-Za-z0-9._-]{1,64}")
        }
        let holdout = holdout ?? "10%"
        guard let bp = Experiment.basisPoints(holdout) else {
            throw ValidationError("--holdout '\(holdout)' is not a share from 0.01% to 50% (write 10%, 2.5% or 0.1)")
        }
        var start = MonthMath.monthStart(t, offset: -6)
        if let s = experimentStart {
            guard let d = Timestamp.parseDate(s) else {
                throw ValidationError("--experiment-start '\(s)' is not a date YYYY-MM-DD")
            }
            start = d * MonthMath.day
        }
        return Experiment(name: name, basisPoints: bp, start: start)
    }

    func validate() throws {
        if customers < 1 { throw ValidationError("--customers must be at least 1") }
        guard let v = PipelineConfig.AsOf.parse(asOf), case .instant = v else {
            throw ValidationError("--as-of must be a date YYYY-MM-DD or an instant YYYY-MM-DDTHH:MM:SSZ")
        }
        _ = try resolvedExperiment(asOf: 0)
        if postgres != nil && format != .appstoreSigned && format != .appstoreNDJSON {
            throw ValidationError("--postgres loads appstore-signed or appstore-ndjson worlds")
        }
        if postgresSchema.isEmpty || postgresSchema.utf8.count > 63 {
            throw ValidationError("--postgres-schema must be a name of 1 to 63 bytes")
        }
    }

    func run() throws {
        guard case .instant(let t) = PipelineConfig.AsOf.parse(asOf) else { return }
        var options = GenerateOptions(customers: customers, seed: seed, asOf: t, format: format)
        options.experiment = try resolvedExperiment(asOf: t)
        // A line at each tenth, on stderr: a large world takes a while.
        let total = customers
        let step = max(1, total / 10)
        let noted = Tenths()
        options.progress = { done in
            guard noted.advance(to: done / step) || done == total else { return }
            FileHandleStderr.write("winback: generate: \(done) of \(total) customers simulated\n")
        }
        let summary = try reportingErrors { try WorldGenerator.generate(options, to: out) }
        print(
            "wrote \(summary.files.count) files, \(summary.transactions) transactions of \(summary.customers) simulated people to \(out) "
                + "(a run counts customers: subscription group and originalTransactionId pairs with a period before the as-of)"
        )
        print("run it with: winback run \((out as NSString).appendingPathComponent("pipeline.yaml"))")
        if let postgres {
            let loaded = try reportingErrors {
                try WorldDatabase.load(folder: out, format: format, connection: postgres, schema: postgresSchema)
            }
            print(
                "loaded \(loaded.transactions) transaction rows, \(loaded.renewals) renewal rows and "
                    + "\(loaded.identities) identity rows into \(postgresSchema)")
            print(
                "run it from PostgreSQL with: winback run "
                    + (out as NSString).appendingPathComponent(WorldDatabase.pipelineName))
        }
    }
}

/// The last tenth of the world reported (the generator calls back from one thread at a time).
private final class Tenths: Sendable {
    private let last = Mutex(0)

    /// Records `tenth` as the last one reported; false if it is not past the last.
    func advance(to tenth: Int) -> Bool {
        last.withLock { last in
            guard tenth > last else { return false }
            last = tenth
            return true
        }
    }
}
