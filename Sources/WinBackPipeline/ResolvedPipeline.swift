import WinBackModel
import WinBackRead
import WinBackRules

/// Everything a run needs, resolved from the pipeline file and the command line.
public struct ResolvedPipeline: Sendable {
    public var config: PipelineConfig
    public var catalog: OfferCatalog
    public var asOf: Int64
    public var threads: Int
    public var inflater: Inflater = .zlib
    public var outputDirectory: String
    public var transactionFiles: [String]
    public var renewalFiles: [String]
    /// How signed inputs are verified; nil unless the format is `appstore-signed`.
    public var signed: SignedReading?
    /// `money`'s rates (docs/rules.md §13.1); nil without `money`.
    public var rates: Rates? = nil
    /// ``transactionFiles`` as resolved, each with its identity (docs/rules.md §11, §12): what
    /// the readers open, the ledger records and the manifest lists.
    public var transactionInputs: [Input] = []
    /// ``renewalFiles`` as resolved, each with its identity.
    public var renewalInputs: [Input] = []
    /// The run's memory limit (`--memory` or `limits.memory`), nil in memory: what it reads of
    /// earlier runs is bounded by it too (docs/rules.md §6.3).
    public var memoryLimit: Int? = nil

    public init(
        config: PipelineConfig, catalog: OfferCatalog, asOf: Int64, threads: Int, inflater: Inflater = .zlib,
        outputDirectory: String, transactionFiles: [String], renewalFiles: [String], signed: SignedReading? = nil,
        rates: Rates? = nil, transactionInputs: [Input] = [], renewalInputs: [Input] = [], memoryLimit: Int? = nil
    ) {
        self.config = config
        self.catalog = catalog
        self.asOf = asOf
        self.threads = threads
        self.inflater = inflater
        self.outputDirectory = outputDirectory
        self.transactionFiles = transactionFiles
        self.renewalFiles = renewalFiles
        self.signed = signed
        self.rates = rates
        self.transactionInputs = transactionInputs
        self.renewalInputs = renewalInputs
        self.memoryLimit = memoryLimit
    }

    /// The transaction files as resolved (``transactionInput(_:)``).
    package var inputs: [Input] { transactionFiles.indices.map(transactionInput) }

    /// Transaction file `i` as resolved; a pipeline made without its inputs (a test's) has each
    /// looked up now.
    package func transactionInput(_ i: Int) -> Input {
        if transactionInputs.count == transactionFiles.count { return transactionInputs[i] }
        return InputStores.lookUp(transactionFiles[i])
    }

    /// Bounds on what bad input may cost (`limits.maxLineBytes`, `limits.maxRejectsListed`).
    package var limits: ReadLimits {
        ReadLimits(maxLineBytes: config.maxLineBytes, maxRejectsListed: config.maxRejectsListed)
    }
}
