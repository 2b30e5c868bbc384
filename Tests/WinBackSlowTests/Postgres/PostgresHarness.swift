import Foundation
import Testing
import WinBackTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A failure of the PostgreSQL harness itself (a server that does not start, psql failing).
struct PostgresHarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A PostgreSQL server from Debian's packages (`postgresql`) on loopback: its own data folder,
/// initialised and run as a user other than root (`postgres`, else `nobody`: the server refuses
/// root), on a free port, its superuser ``user`` reached by password over TCP (scram-sha-256),
/// so that a run's password comes from `PGPASSWORD` or a `PGPASSFILE` as the docs say.
/// Stopped by its pid.
final class PostgresServer: @unchecked Sendable {
    static let user = "winback"
    static let password = "winback-test-password"

    /// The server of the suite running now (set by ``PostgresScope``).
    @TaskLocal static var current: PostgresServer?

    /// The folder of the server's programs (`initdb`, `postgres`, `pg_isready`), the newest
    /// version installed.
    static let bin: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init)
            .sorted()
        for v in versions.reversed() {
            let b = "\(root)/\(v)/bin"
            if FileManager.default.isExecutableFile(atPath: b + "/postgres")
                && FileManager.default.isExecutableFile(atPath: b + "/initdb")
            {
                return b
            }
        }
        return nil
    }()

    /// psql, the independent client the tests read and change tables with.
    static let psql: String? = {
        ["/usr/bin/psql", (bin ?? "") + "/psql"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    static var available: Bool { bin != nil && psql != nil }

    /// The user the server runs as when the tests run as root.
    static let serverUser: String? = {
        guard geteuid() == 0 else { return nil }
        return getpwnam("postgres") != nil ? "postgres" : "nobody"
    }()

    let process: Process
    let folder: String
    let port: Int

    private init(process: Process, folder: String, port: Int) {
        self.process = process
        self.folder = folder
        self.port = port
    }

    /// The connection string of database `db` (no password: it comes from the environment).
    func uri(_ db: String = "postgres", port: Int? = nil) -> String {
        "postgresql://\(Self.user)@127.0.0.1:\(port ?? self.port)/\(db)"
    }

    /// The environment of a winback process speaking to this server: the password in
    /// `PGPASSWORD`, no password file; libpq's other variables (``unset``) are removed.
    var environment: [String: String] {
        ["PGPASSWORD": Self.password, "PGPASSFILE": folder + "/no-such-pgpass"]
    }

    /// libpq's variables a test process never passes on (an empty one is an error to libpq).
    static let unset = [
        "PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE", "PGSERVICE", "PGSERVICEFILE", "PGSSLMODE",
        "PGCONNECT_TIMEOUT", "PGOPTIONS", "PGAPPNAME",
    ]

    /// A program run as the server's user (itself when the tests are not root).
    private static func asServerUser(_ program: String, _ args: [String]) -> (String, [String]) {
        guard let user = serverUser else { return (program, args) }
        return ("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user)", "--init-groups", program] + args)
    }

    /// Initialises a data folder and starts a server on a free port, retried on another port
    /// when it does not come up; returns once it accepts connections.
    static func start() throws -> PostgresServer {
        guard let bin else { throw PostgresHarnessError("no PostgreSQL server (Debian: apt-get install postgresql)") }
        // A folder of its own the server's user owns (the tests' folders are root's).
        var template = Array("/tmp/winback-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PostgresHarnessError("mkdtemp failed") }
        let folder = String(cString: made)
        if let user = serverUser, let pw = getpwnam(user) {
            chown(folder, pw.pointee.pw_uid, pw.pointee.pw_gid)
        }
        chmod(folder, 0o700)
        let pwfile = folder + "/pwfile"
        try (password + "\n").write(toFile: pwfile, atomically: false, encoding: .utf8)
        if let user = serverUser, let pw = getpwnam(user) { chown(pwfile, pw.pointee.pw_uid, pw.pointee.pw_gid) }
        let (initdb, initArgs) = asServerUser(
            bin + "/initdb",
            [
                "-D", folder + "/data", "-U", user, "--pwfile=" + pwfile, "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
            ])
        let r = try Helper.run(initdb, initArgs)
        guard r.status == 0 else {
            throw PostgresHarnessError("initdb failed (\(r.status)): \(r.stderr)")
        }
        var problems: [String] = []
        for _ in 0..<3 {
            let port = SeaweedServer.freePorts(1)[0]
            let (program, args) = asServerUser(
                bin + "/postgres",
                [
                    "-D", folder + "/data", "-k", folder, "-h", "127.0.0.1", "-p", String(port), "-c", "fsync=off",
                    "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=40",
                ])
            let p = Process()
            p.executableURL = URL(fileURLWithPath: program)
            p.arguments = args
            let logPath = folder + "/server-\(port).log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
            p.standardOutput = log
            p.standardError = log
            p.standardInput = FileHandle.nullDevice
            try p.run()
            try? log.close()
            let server = PostgresServer(process: p, folder: folder, port: port)
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline && p.isRunning {
                if (try? server.sql("SELECT 1"))?.trimmingCharacters(in: .whitespacesAndNewlines) == "1" {
                    return server
                }
                usleep(200_000)
            }
            let tail = (try? String(contentsOfFile: logPath, encoding: .utf8))?.suffix(2000) ?? ""
            problems.append("port \(port): \(tail)")
            server.stop(removing: false)
        }
        throw PostgresHarnessError("PostgreSQL did not start:\n" + problems.joined(separator: "\n"))
    }

    /// Stops the server by its pid (SIGINT: a fast shutdown; SIGKILL after 20 s), then removes
    /// its folder unless `removing` is false.
    func stop(removing: Bool = true) {
        let pid = process.processIdentifier
        if process.isRunning { kill(pid, SIGINT) }
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning && Date() < deadline { usleep(100_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        if removing { try? FileManager.default.removeItem(atPath: folder) }
    }

    /// Runs `sql` with psql in database `db`; its output unaligned, tuples only. Fails on any
    /// error.
    @discardableResult
    func sql(_ sql: String, db: String = "postgres") throws -> String {
        let r = try Helper.run(
            Self.psql!, ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", uri(db), "-c", sql],
            environment: environment, removing: Self.unset)
        guard r.status == 0 else { throw PostgresHarnessError("psql: \(sql): \(r.stderr)") }
        return String(decoding: r.stdout, as: UTF8.self)
    }

    /// A new, empty database; its name.
    func database() throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        try sql("CREATE DATABASE \(name)")
        return String(name)
    }
}

/// Starts one PostgreSQL server for the suite it is given to, hands it to the suite's tests
/// through ``PostgresServer/current`` and stops it when the last of them ends.
struct PostgresScope: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard PostgresServer.available else { return try await function() }
        let server = try PostgresServer.start()
        defer { server.stop() }
        try await PostgresServer.$current.withValue(server) { try await function() }
    }
}

extension Trait where Self == PostgresScope {
    /// One PostgreSQL server for the whole suite.
    static var postgresServer: Self { Self() }
}

/// A generated world in files and in a database of the server (`winback generate --postgres`).
struct PostgresWorld {
    let folder: String
    let db: String
    let server: PostgresServer
    static let schema = "winback_world"

    static func make(
        _ server: PostgresServer, customers: Int = 300, seed: Int = 7, format: String = "appstore-ndjson"
    ) throws -> PostgresWorld {
        let folder = Paths.temporary() + "/world"
        let db = try server.database()
        let r = try CLI.run(
            [
                "generate", "--customers", String(customers), "--seed", String(seed), "--format", format, "--out",
                folder, "--postgres", server.uri(db),
            ], environment: server.environment)
        guard r.status == 0 else { throw PostgresHarnessError("generate --postgres: \(r.status): \(r.stderr)") }
        return PostgresWorld(folder: folder, db: db, server: server)
    }

    var files: String { folder + "/pipeline.yaml" }
    var tables: String { folder + "/postgres-pipeline.yaml" }

    @discardableResult
    func sql(_ s: String) throws -> String { try server.sql(s, db: db) }

    /// `winback ARGS` with the server's environment (and `more`).
    func winback(_ args: [String], _ more: [String: String] = [:]) throws -> CLI.Result {
        try CLI.run(args, environment: server.environment.merging(more) { $1 })
    }

    /// `winback run PIPELINE --output OUTPUT` (and `extra`).
    func run(_ pipeline: String, output: String, _ extra: [String] = []) throws -> CLI.Result {
        try winback(["run", pipeline, "--output", output, "--threads", "2"] + extra)
    }

    /// A copy of the tables' pipeline file with `edit` made to its text; its path.
    func pipeline(_ name: String, _ edit: (String) -> String) throws -> String {
        let text = try String(contentsOfFile: tables, encoding: .utf8)
        let path = folder + "/" + name
        try edit(text).write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
