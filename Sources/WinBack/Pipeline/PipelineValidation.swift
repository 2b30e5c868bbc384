import Foundation
import WinBackDelivery
import WinBackModel
import WinBackPostgres
import WinBackRead
import WinBackS3
import WinBackSupport
import WinBackWrite

/// `winback validate`: every problem of a pipeline file, its catalog and its inputs, at once.
public enum PipelineValidation {
    public struct Report: Sendable {
        public var problems: [String] = []
        /// A short description of what was checked, when valid.
        public var summary = ""
        /// How many of `problems` are inputs that are missing or not readable regular files.
        public var inputProblems = 0
        /// How many of `problems` are output folders a run could not write (73).
        public var outputProblems = 0
        /// What is allowed but probably not meant (an offer without appleId); the exit code
        /// does not change.
        public var warnings: [String] = []

        /// The exit code: 0 when valid, 66 when only inputs are at fault (docs/rules.md §6.1:
        /// a FIFO, a device or a folder given as input), else 78.
        public var exitCode: Int32 {
            problems.isEmpty
                ? 0
                : problems.count == inputProblems
                    ? WinBackError.Code.noInput.exitCode
                    : problems.count == outputProblems
                        ? WinBackError.Code.cannotCreateOutput.exitCode : WinBackError.Code.configuration.exitCode
        }
    }

    public static func check(pipelinePath: String) -> Report {
        var report = Report()
        let abs = InputFiles.absolute(pipelinePath, base: System.currentDirectory)
        let text: String
        do {
            let bytes = try System.readConfiguration(
                abs, what: "pipeline file", naming: pipelinePath, limit: PipelineConfig.maxFileBytes)
            guard let t = String(validating: bytes, as: UTF8.self) else {
                report.problems.append("\(pipelinePath): pipeline file is not UTF-8 text")
                return report
            }
            text = t
        } catch {
            report.problems.append(SystemError.words(error))
            return report
        }
        let (config, problems) = PipelineConfig.parse(text, path: abs)
        report.problems += problems
        guard let config else { return report }
        settings(config, path: abs, into: &report)
        let offers = catalog(config, into: &report)
        identities(config, into: &report)
        ratesAndTables(config, into: &report)
        let files = inputs(config, into: &report)
        report.summary = "\(offers) offers, \(files) input files"
        if config.incremental, report.problems.isEmpty,
            let p = try? ResolvedPipeline.resolve(RunOptions(pipelinePath: pipelinePath), config: config)
        {
            report.summary += "; " + StateFolder.preview(p)
        }
        return report
    }

    /// The inflater, the `apple:` roots, the output folder and its group, as a run checks them.
    private static func settings(_ config: PipelineConfig, path abs: String, into report: inout Report) {
        do {
            _ = try ResolvedPipeline.inflater(asked: nil, file: config.inflater, path: abs)
        } catch {
            report.problems.append(SystemError.words(error))
        }

        if config.format == .appstoreSigned || !config.apple.roots.isEmpty {
            do {
                _ = try SignedReading.resolve(config.apple, folder: config.folder, now: 0)
            } catch {
                report.problems.append("\(abs): \(SystemError.words(error))")
            }
        }

        // The output folder as a run checks it before it writes (73, docs/rules.md §10.10): a
        // memory-bounded run's work folders are made inside it.
        if let problem = PrivateFolder.problem(
            config.resolve(config.outputDirectory) + "/" + config.name, what: "output folder")
        {
            report.problems.append("\(problem)")
            report.outputProblems += 1
        }
        // output.group as a run checks it before it makes the output folder (docs/rules.md §6.3).
        if let group = config.outputGroup, let problem = System.groupProblem(group) {
            report.problems.append("\(abs): \(problem)")
        }

    }

    /// The catalog, parsed as a run parses it; its offers without a link warned of. Returns the
    /// offers.
    private static func catalog(_ config: PipelineConfig, into report: inout Report) -> Int {
        let catalogPath = config.resolve(config.offersPath)
        var offers = 0
        // A catalog that is no regular file is named for what it is, and never read.
        var catalogBytes: Data?
        var catalogProblem: String?
        if !config.offersPath.isEmpty {
            do { catalogBytes = try InputStores.contents(catalogPath) } catch {
                catalogProblem = SystemError.words(error)
            }
        }
        if config.offersPath.isEmpty {
            // Already reported as a missing field.
        } else if let catalogProblem {
            report.problems.append(catalogProblem)
        } else if let data = catalogBytes {
            let (catalog, problems) = OfferCatalog.parse(
                data, folder: (catalogPath as NSString).deletingLastPathComponent)
            report.problems += problems.map { "\(catalogPath): \($0)" }
            offers = catalog.offers.count
            for o in catalog.offers where (o.appleId ?? "").isEmpty {
                report.warnings.append(
                    "\(catalogPath): offer '\(o.offerId)' has no appleId: its rows' offer_url will be empty "
                        + "and its customers left out of the destination files (the id is on the offer's page in "
                        + "App Store Connect)")
            }
        } else {
            report.problems.append("\(catalogPath): offer catalog is missing or unreadable")
        }
        return offers
    }

    /// The identities (a file or a table) and the columns the destinations need.
    private static func identities(_ config: PipelineConfig, into report: inout Report) {
        if let i = config.identities {
            let path = config.resolve(i.path)
            do {
                if try !InputStores.isReadableFile(path) {
                    report.problems.append("\(path): identities file is missing or not a readable file")
                    report.inputProblems += 1
                }
            } catch {
                report.problems.append(SystemError.words(error))
                if (error as? WinBackError)?.code == .noInput { report.inputProblems += 1 }
            }
            if report.problems.isEmpty || System.kind(path) == .file {
                // The columns the destinations need, as `run` checks them before reading.
                do { try Delivery.checkIdentities(config, inflater: .zlib) } catch let e as WinBackError {
                    if e.code != .noInput { report.problems.append("\(e)") }
                } catch {
                    report.problems.append(SystemError.words(error))
                }
            }
        }
    }

    /// The rates file of `money`, and PostgreSQL's sources and tables.
    private static func ratesAndTables(_ config: PipelineConfig, into report: inout Report) {
        // The rates file of `money`, parsed as `run` parses it (docs/rules.md §13.1).
        do { _ = try MoneyRates.load(config) } catch {
            report.problems.append(SystemError.words(error))
            if (error as? WinBackError)?.code == .noInput { report.inputProblems += 1 }
        }
        // PostgreSQL's sources and tables (docs/rules.md §14): the server reachable, what is read
        // there and readable (no row read); the identities' were checked above.
        for t in config.tables where t.label != config.identities?.path {
            do { try t.check(seconds: Double(config.networkSeconds)) } catch {
                report.problems.append(SystemError.words(error))
                if (error as? WinBackError)?.code == .noInput { report.inputProblems += 1 }
            }
        }
        if let out = config.postgres {
            do {
                _ = try PostgresConnection(
                    out.connection, field: "output.postgres.connection", seconds: Double(config.networkSeconds))
            } catch { report.problems.append(SystemError.words(error)) }
        }
    }

    /// The transaction and renewal inputs, each readable. Returns how many.
    private static func inputs(_ config: PipelineConfig, into report: inout Report) -> Int {
        var files = 0
        for pattern in config.transactionPaths + config.renewalInfoPaths {
            do {
                for path in try InputFiles.resolve([pattern], base: config.folder) {
                    if !InputStores.isObject(path) && !System.isReadable(path) {
                        report.problems.append("\(path): input is not readable")
                        report.inputProblems += 1
                    }
                    files += 1
                }
            } catch {
                report.problems.append(SystemError.words(error))
                if (error as? WinBackError)?.code == .noInput { report.inputProblems += 1 }
            }
        }
        return files
    }
}
