/// A failure that ends a run, with the sysexits code the operator's cron sees.
///
/// Rejected rows are not errors: they are data (see ``Reject``). This type is for what stops
/// the run: a bad configuration, a missing input, a corrupt file, a held lock.
public struct WinBackError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure, which decides the exit code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Kind: Hashable, Sendable {
            case usage, badData, noInput, cannotCreateOutput, locked, configuration, software, ioError, temporary,
                noPermission
        }
        fileprivate let kind: Kind

        /// 64: the command line was wrong.
        public static let usage = Code(kind: .usage)
        /// 65: the data is bad (reject budget exceeded, corrupt or truncated gzip).
        public static let badData = Code(kind: .badData)
        /// 66: an input is missing or unreadable, a glob matches nothing, an unknown customer.
        public static let noInput = Code(kind: .noInput)
        /// 73: the output cannot be created.
        public static let cannotCreateOutput = Code(kind: .cannotCreateOutput)
        /// 75: another run holds the lock.
        public static let locked = Code(kind: .locked)
        /// 78: the pipeline file or catalog is missing, unreadable or invalid.
        public static let configuration = Code(kind: .configuration)
        /// 70: a defect in the tool itself.
        public static let software = Code(kind: .software)
        /// 74: a read or write failed part way (an object whose bytes ended early).
        public static let ioError = Code(kind: .ioError)
        /// 75: a service failed for now (throttled, unreachable) after every retry: run again later.
        public static let temporary = Code(kind: .temporary)
        /// 77: credentials were refused or the request is not allowed.
        public static let noPermission = Code(kind: .noPermission)

        /// The sysexits(3) value.
        public var exitCode: Int32 {
            switch kind {
            case .usage: return 64
            case .badData: return 65
            case .noInput: return 66
            case .software: return 70
            case .cannotCreateOutput: return 73
            case .ioError: return 74
            case .locked, .temporary: return 75
            case .noPermission: return 77
            case .configuration: return 78
            }
        }

        public var description: String {
            switch kind {
            case .usage: return "usage"
            case .badData: return "bad data"
            case .noInput: return "input missing"
            case .software: return "internal error"
            case .cannotCreateOutput: return "cannot create output"
            case .locked: return "locked"
            case .ioError: return "i/o error"
            case .temporary: return "temporary failure"
            case .noPermission: return "permission denied"
            case .configuration: return "configuration"
            }
        }
    }

    public var code: Code
    public var message: String
    /// The file the failure is about, when there is one.
    public var path: String?
    /// Further lines: every problem found, when there are several.
    public var details: [String]
    /// Set when the run published its files and only a copy of them lags (`postgres`: the tables
    /// of output.postgres), for the metrics to say so.
    public var behind: String?

    public init(_ code: Code, _ message: String, path: String? = nil, details: [String] = []) {
        self.code = code
        self.message = message
        self.path = path
        self.details = details
    }

    /// The message as printed: `path: message`, then one line per detail. Control characters
    /// in any of them (a path or a value quoted from input) are escaped (``ControlEscape``),
    /// so a message is never split or hidden by what it quotes (docs/rules.md §6).
    public var description: String {
        var s = ControlEscape.escaped(path.map { "\($0): \(message)" } ?? message)
        for d in details { s += "\n  - " + ControlEscape.escaped(d) }
        return s
    }
}

extension WinBackError {
    /// An error no stage turned into a ``WinBackError``, as one: a defect of the tool (70), its
    /// cause in words (``SystemError/words(_:)``), never a Foundation error domain and code.
    public static func unexpected(_ error: Error) -> WinBackError {
        if let e = error as? WinBackError { return e }
        return WinBackError(.software, SystemError.words(error))
    }
}
