import ArgumentParser
import WinBack

struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Explain why a customer is or is not in each offer's audience.",
        discussion: """
            Shows the customer's periods (paid or free, refunds, upgrades, runs and gaps), the state at \
            the as-of instant, paid months, months since last subscribed, win-back history and, for every \
            offer of the customer's group, eligible with its rank or every failing criterion with the \
            numbers behind it. Reads the same inputs as `run`, with the same rules, so it always agrees \
            with the published segments. An id matching several groups shows each, and a value of the \
            identities file every customer it maps to. Exit 66 when no customer matches.
            """)

    @OptionGroup var pipeline: PipelineOptions

    @Option(
        help: """
            The customer's originalTransactionId or appAccountToken, or any value of the identities \
            file (an email, the team's user id): every customer that value maps to is explained.
            """)
    var customer: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        if customer.isEmpty {
            throw ValidationError(
                "--customer is empty: give an originalTransactionId, an appAccountToken or a value of the identities file"
            )
        }
    }

    func run() throws {
        let list = try reportingErrors {
            try Explainer.explain(
                RunOptions(pipelinePath: pipeline.pipeline, asOf: pipeline.asOf, threads: nil), customer: customer)
        }
        if json {
            print(Explanation.json(list), terminator: "")
        } else {
            print(list.map(\.text).joined(separator: "\n"), terminator: "")
        }
    }
}
