import CPQ
import Foundation
import WinBackSupport

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to PostgreSQL (docs/rules.md §14), on libpq loaded when a run first speaks to
/// a server (Sources/CPQ/shim.h). Every wait is bounded by the run's deadline: connecting
/// (`connect_timeout`), each statement (`statement_timeout` and a poll of the socket), and the
/// whole read; a server that is unreachable, silent or gone is 75, within the bound.
///
/// The password never comes from the pipeline file: a connection string holding one is 78
/// (``checkConnection(_:field:)``); libpq takes it from `PGPASSWORD`, `PGPASSFILE` or
/// `~/.pgpass`. No message names the connection string.
public final class PostgresConnection {
    private let pq: winback_pq_api
    private let conn: OpaquePointer
    /// When every wait must have ended.
    public let deadline: Date
    /// What messages call the server (`host:port/database`, never the connection string).
    public let server: String

    /// libpq could not be loaded.
    static func library() throws -> winback_pq_api {
        switch PostgresLibrary.loaded {
        case .success(let api): return api
        case .failure(let why):
            throw WinBackError(
                .configuration,
                "postgres: needs libpq (libpq.so.5), which could not be loaded (\(why)): install libpq5 (Debian, "
                    + "Ubuntu) or libpq (Fedora)")
        }
    }

    /// The keywords of a connection string (a URI or `key=value` pairs), as libpq reads it;
    /// a string libpq cannot read is 78 naming `field`.
    public static func parse(_ connection: String, field: String) throws -> [String: String] {
        let pq = try library()
        var error: UnsafeMutablePointer<CChar>?
        guard let options = pq.conninfoParse!(connection, &error) else {
            // libpq's message may repeat the string, password and all: never passed on.
            if let error { pq.freemem!(error) }
            throw WinBackError(
                .configuration,
                "field '\(field)': not a connection string libpq reads (a postgresql:// URI, its %-escapes "
                    + "well formed, or key=value pairs)")
        }
        defer { pq.conninfoFree!(options) }
        var out: [String: String] = [:]
        var o = options
        while let k = o.pointee.keyword {
            if let v = o.pointee.val { out[String(cString: k)] = String(cString: v) }
            o += 1
        }
        return out
    }

    /// A connection string a pipeline may hold: libpq reads it, and it carries no password (78
    /// naming `field`: the password belongs in `PGPASSWORD`, `PGPASSFILE` or `~/.pgpass`).
    public static func checkConnection(_ connection: String, field: String) throws {
        let keywords = try parse(connection, field: field)
        // A database name that is itself a connection string would carry its own settings,
        // a password among them, and be printed as a name.
        if let db = keywords["dbname"], db.contains("=") || db.contains("://") {
            throw WinBackError(
                .configuration, "field '\(field)': the database name is itself a connection string; give one string")
        }
        if let p = keywords["password"], !p.isEmpty {
            throw WinBackError(
                .configuration,
                "field '\(field)': the connection string holds a password; give it in PGPASSWORD, PGPASSFILE or "
                    + "~/.pgpass instead (a pipeline file is no place for a secret)")
        }
    }

    /// What messages call the server of `connection`: `host:port/database`.
    public static func describe(_ connection: String) -> String {
        guard let k = try? parse(connection, field: "connection") else { return "the server" }
        let host = k["host"] ?? k["hostaddr"] ?? ProcessInfo.processInfo.environment["PGHOST"] ?? "localhost"
        let port = k["port"] ?? ProcessInfo.processInfo.environment["PGPORT"] ?? "5432"
        let db = k["dbname"] ?? ProcessInfo.processInfo.environment["PGDATABASE"] ?? k["user"] ?? "postgres"
        return "postgres \(host):\(port)/\(db)"
    }

    /// Connects to `connection` (checked by ``checkConnection(_:field:)``) with at most
    /// `seconds` for everything this connection does.
    public init(_ connection: String, field: String, seconds: Double) throws {
        try Self.checkConnection(connection, field: field)
        pq = try Self.library()
        deadline = Date().addingTimeInterval(max(1, seconds))
        server = Self.describe(connection)
        let remainingMS = Int(max(1, seconds) * 1000)
        // Later keywords win over the string's own: the bounds are the run's.
        let keywords = [
            "dbname", "connect_timeout", "application_name", "client_encoding", "tcp_user_timeout", "keepalives",
            "keepalives_idle", "keepalives_interval", "keepalives_count",
        ]
        let values = [
            connection, String(max(2, min(Int(seconds.rounded(.up)), 30))), "winback", "UTF8",
            String(remainingMS), "1", "10", "5", "3",
        ]
        let api = pq
        let c = Self.withCStrings(keywords) { k in
            Self.withCStrings(values) { v in api.connectdbParams!(k, v, 1) }
        }
        guard let c else { throw WinBackError(.temporary, "cannot connect: out of memory", path: server) }
        conn = c
        guard pq.status!(c) == CONNECTION_OK else {
            // Every property is set: deinit finishes the connection.
            let why = Self.text(pq.errorMessage!(c)).split(separator: "\n").first.map(String.init) ?? ""
            throw Self.connectFailure(why, server: server)
        }
        // Text as PostgreSQL prints it, whatever the server's defaults: UTC, ISO dates.
        // The server's notices ("already exists, skipping") are not the run's to print.
        try execute("SET client_min_messages = warning")
        // Literals are quoted for this setting (``literal(_:)``): whatever the database's default.
        try execute("SET standard_conforming_strings = on")
        try execute("SET TimeZone = 'UTC'")
        try execute("SET DateStyle = 'ISO, YMD'")
        try execute("SET statement_timeout = \(Int(max(1, seconds) * 1000))")
    }

    deinit { pq.finish!(conn) }

    /// Why a connection failed, as the exit code says: a password refused or a database
    /// unknown is the pipeline's (78), anything else the server's for now (75).
    static func connectFailure(_ why: String, server: String) -> WinBackError {
        let refused = ["password authentication failed", "no password supplied", "does not exist", "no pg_hba.conf"]
        if refused.contains(where: why.contains) {
            return WinBackError(.configuration, "cannot connect: \(why)", path: server)
        }
        return WinBackError(.temporary, "cannot connect: \(why) (run again once the server answers)", path: server)
    }

    private static func text(_ p: UnsafeMutablePointer<CChar>?) -> String {
        p.map { String(cString: $0) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "no message"
    }

    private static func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
        let copies = strings.map { strdup($0) }
        defer { for c in copies { free(c) } }
        var pointers: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) }
        pointers.append(nil)
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    // MARK: - Names and values

    /// `name` quoted as an identifier (`"a""b"`): read as that name whatever it holds.
    public static func identifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// `value` as a string literal (`'it''s'`), with standard_conforming_strings (on since 9.1).
    public static func literal(_ value: String) -> String {
        "'" + value.replacingOccurrences(of: "'", with: "''") + "'"
    }

    // MARK: - Statements

    /// Waits until the socket can be read, or throws 75 once the deadline passed.
    private func waitReadable(_ what: String) throws {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { throw timedOut(what) }
        var fds = pollfd(fd: pq.socket!(conn), events: Int16(POLLIN), revents: 0)
        let n = poll(&fds, 1, Int32(min(left * 1000, Double(Int32.max)).rounded(.up)))
        if n == 0 { throw timedOut(what) }
        guard pq.consumeInput!(conn) == 1 else { throw gone(what) }
    }

    /// Waits until the socket can be written, or throws 75 once the deadline passed.
    private func waitWritable(_ what: String) throws {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { throw timedOut(what) }
        var fds = pollfd(fd: pq.socket!(conn), events: Int16(POLLOUT), revents: 0)
        if poll(&fds, 1, Int32(min(left * 1000, Double(Int32.max)).rounded(.up))) == 0 { throw timedOut(what) }
    }

    /// Sends what libpq holds of a non-blocking write, within the deadline.
    private func flushed(_ what: String) throws {
        while true {
            let r = pq.flush!(conn)
            if r == 0 { return }
            guard r == 1 else { throw gone(what) }
            try waitWritable(what)
            // The server may answer (a notice, an error) while it reads: take it in.
            _ = pq.consumeInput!(conn)
        }
    }

    private func timedOut(_ what: String) -> WinBackError {
        WinBackError(
            .temporary, "\(what): no answer within limits.networkSeconds (run again once the server answers)",
            path: server)
    }

    private func gone(_ what: String) -> WinBackError {
        let why = Self.text(pq.errorMessage!(conn)).split(separator: "\n").first.map(String.init) ?? ""
        return WinBackError(.temporary, "\(what): \(why) (the server went away)", path: server)
    }

    /// The failure of a statement, by its SQLSTATE: a relation or privilege missing is 66, a
    /// column or statement the pipeline got wrong 78, a server going away or a timeout 75.
    private func failure(_ result: OpaquePointer, _ what: String) -> WinBackError {
        let state = pq.resultErrorField!(result, winback_pq_diag_sqlstate).map { String(cString: $0) } ?? ""
        // The server's first line says it; the lines after quote the statement.
        let why = Self.text(pq.resultErrorMessage!(result)).split(separator: "\n").first.map(String.init) ?? ""

        let code: WinBackError.Code
        switch state {
        case "42P01", "3F000", "42501": code = .noInput
        case _ where state.hasPrefix("08") || state.hasPrefix("57") || state.hasPrefix("53") || state.isEmpty:
            code = .temporary
        case "40001", "40P01": code = .temporary
        default: code = .configuration
        }
        return WinBackError(code, "\(what): \(why)", path: server)
    }

    /// Sends `sql` with `parameters` ($1, $2, … as text) and gathers the results: the last one's
    /// rows as text (nil a NULL). Bounded by the deadline.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = [], what: String? = nil) throws -> [[String?]] {
        let what = what ?? "a statement failed"
        let copies = parameters.map { $0.map { strdup($0) } }
        defer { for c in copies { if let c { free(c) } } }
        let values: [UnsafePointer<CChar>?] = copies.map { $0.flatMap { UnsafePointer($0) } }
        let sent = values.withUnsafeBufferPointer {
            pq.sendQueryParams!(conn, sql, Int32(parameters.count), nil, $0.baseAddress, nil, nil, 0)
        }
        guard sent == 1 else { throw gone(what) }
        var rows: [[String?]] = []
        var problem: WinBackError?
        while true {
            while pq.isBusy!(conn) == 1 { try waitReadable(what) }
            guard let r = pq.getResult!(conn) else { break }
            defer { pq.clear!(r) }
            switch pq.resultStatus!(r) {
            case PGRES_TUPLES_OK:
                rows = (0..<pq.ntuples!(r)).map { i in
                    (0..<pq.nfields!(r)).map { j in
                        pq.getisnull!(r, i, j) == 1 ? nil : String(cString: pq.getvalue!(r, i, j)!)
                    }
                }
            case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY: break
            default: if problem == nil { problem = failure(r, what) }
            }
        }
        if let problem { throw problem }
        return rows
    }

    /// ``query(_:_:what:)`` of a statement that returns no rows.
    public func execute(_ sql: String, _ parameters: [String?] = [], what: String? = nil) throws {
        try query(sql, parameters, what: what)
    }

    // MARK: - COPY

    /// Takes every result left of a COPY that ended: the first that is no success, as an error
    /// (nil when all succeeded).
    private func endResults(_ what: String) throws -> WinBackError? {
        var problem: WinBackError?
        while true {
            while pq.isBusy!(conn) == 1 { try waitReadable(what) }
            guard let r = pq.getResult!(conn) else { return problem }
            if pq.resultStatus!(r) != PGRES_COMMAND_OK && problem == nil { problem = failure(r, what) }
            pq.clear!(r)
        }
    }

    /// Starts `COPY … TO STDOUT` (`sql`); rows then come from ``nextCopyRow(_:)``.
    public func startCopyOut(_ sql: String, what: String) throws {
        guard pq.sendQuery!(conn, sql) == 1 else { throw gone(what) }
        while pq.isBusy!(conn) == 1 { try waitReadable(what) }
        guard let r = pq.getResult!(conn) else { throw gone(what) }
        defer { pq.clear!(r) }
        guard pq.resultStatus!(r) == PGRES_COPY_OUT else { throw failure(r, what) }
    }

    /// The next row of a COPY started by ``startCopyOut(_:what:)``, handed to `row` (valid only
    /// during the call); false at its end. A server gone mid-read, a failed COPY or the deadline
    /// passing throws (75 for the first and last).
    public func nextCopyRow(_ what: String, _ row: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let n = pq.getCopyData!(conn, &buffer, 1)
            if n > 0, let buffer {
                defer { pq.freemem!(buffer) }
                try row(UnsafeRawBufferPointer(start: buffer, count: Int(n)))
                return true
            }
            if n == 0 {
                try waitReadable(what)
                continue
            }
            if n == -2 { throw gone(what) }
            // -1: the COPY ended; its result says whether it succeeded.
            if let problem = try endResults(what) { throw problem }
            return false
        }
    }

    /// `COPY … FROM STDIN` (`sql`), fed by `rows`: it calls `send` with each piece of the
    /// COPY's text. Ends the COPY and checks its result.
    public func copyIn(_ sql: String, what: String, _ rows: ((Span<UInt8>) throws -> Void) throws -> Void)
        throws
    {
        guard pq.sendQuery!(conn, sql) == 1 else { throw gone(what) }
        while pq.isBusy!(conn) == 1 { try waitReadable(what) }
        guard let r = pq.getResult!(conn) else { throw gone(what) }
        let status = pq.resultStatus!(r)
        if status != PGRES_COPY_IN {
            let e = failure(r, what)
            pq.clear!(r)
            throw e
        }
        pq.clear!(r)
        // Non-blocking while the rows go: a server that stops reading never holds a write past
        // the deadline (every wait is a poll of the socket).
        _ = pq.setnonblocking!(conn, 1)
        defer { _ = pq.setnonblocking!(conn, 0) }
        var sendError: Error?
        do {
            try rows { span in
                guard span.count > 0 else { return }
                try span.withUnsafeBufferPointer { bytes in
                    while true {
                        let n = pq.putCopyData!(
                            conn, UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self),
                            Int32(bytes.count))
                        if n == 1 { break }
                        guard n == 0 else { throw gone(what) }
                        try waitWritable(what)
                    }
                }
                try flushed(what)
            }
        } catch { sendError = error }
        while true {
            let ended = pq.putCopyEnd!(conn, sendError == nil ? nil : "winback stopped the copy")
            if ended == 1 { break }
            guard ended == 0 else { throw sendError ?? gone(what) }
            try waitWritable(what)
        }
        try flushed(what)
        let problem = try endResults(what)
        if let sendError { throw sendError }
        if let problem { throw problem }
    }
}

/// libpq's entry points, loaded on first use (Sources/CPQ/shim.h): a static `let` is
/// initialised once, thread-safely. A run that never speaks to PostgreSQL never loads it.
enum PostgresLibrary {
    static let loaded: Result<winback_pq_api, Unloadable> = {
        var api = winback_pq_api()
        var why = [CChar](repeating: 0, count: 512)
        guard winback_pq_load(&api, &why, why.count) == 1 else {
            let reason = why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            return .failure(Unloadable(reason: String(decoding: reason, as: UTF8.self)))
        }
        return .success(api)
    }()

    struct Unloadable: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }
}
