import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackS3
@testable import WinBackSupport

extension S3StorageTests {
    /// The credential chain (docs/rules.md §11) as a winback process finds it, each source on
    /// loopback: the shared files, the container endpoint, web identity through STS, IMDSv2
    /// (Tests/Reference/aws_credential_server.py). None of them is given keys in the
    /// environment. The doubles hand out the server's real test keys; without a session token
    /// unless said, because SeaweedFS refuses a token it did not issue.
    @Suite("Credentials: shared files, container endpoint, web identity, IMDSv2")
    struct S3StorageCredentialTests {
        static let roleARN = "arn:aws:iam::123456789012:role/winback-test"

        /// A run of `world` with every input in S3, through `proxy` when given, with no keys in
        /// the environment and `changes` on top.
        static func run(
            _ server: SeaweedServer, _ world: S3World, _ changes: [String: String], proxy: LoopbackDouble? = nil
        ) throws -> CLI.Result {
            var env = server.environment(endpoint: proxy?.url, accessKey: nil, secretKey: nil)
            env.merge(changes) { $1 }
            return try S3Run.run(
                world.pipeline(fromS3: Set(S3World.Input.allCases)), output: Paths.temporary(), env)
        }

        static func credentialServer(_ extra: [String] = []) throws -> LoopbackDouble {
            try LoopbackDouble.start(
                "aws_credential_server.py",
                ["--access-key", SeaweedServer.accessKey, "--secret-key", SeaweedServer.secretKey] + extra)
        }

        @Test("AWS_PROFILE with AWS_SHARED_CREDENTIALS_FILE, or a profile of AWS_CONFIG_FILE; an unknown profile is 77")
        func sharedFiles() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 79)
            let folder = Paths.temporary()
            try """
            [default]
            aws_access_key_id = NOTTHEDEFAULTKEY
            aws_secret_access_key = not-the-default-secret

            [winback-test]
            aws_access_key_id = \(SeaweedServer.accessKey)
            aws_secret_access_key = \(SeaweedServer.secretKey)

            """.write(toFile: folder + "/credentials", atomically: true, encoding: .utf8)
            try """
            [profile winback-test]
            region = us-east-1

            [profile from-config]
            region = us-east-1
            aws_access_key_id = \(SeaweedServer.accessKey)
            aws_secret_access_key = \(SeaweedServer.secretKey)

            """.write(toFile: folder + "/config", atomically: true, encoding: .utf8)
            let files = [
                "AWS_SHARED_CREDENTIALS_FILE": folder + "/credentials", "AWS_CONFIG_FILE": folder + "/config",
                "AWS_REGION": "",
            ]
            let proxy = try LoopbackDouble.proxy(server)
            defer { proxy.stop() }
            let r = try Self.run(server, world, files.merging(["AWS_PROFILE": "winback-test"]) { $1 }, proxy: proxy)
            #expect(r.status == 0, "\(r.stderr)")
            let keys = Set(proxy.requests().compactMap { $0["access_key"] as? String })
            #expect(keys == [SeaweedServer.accessKey])

            let c = try Self.run(server, world, files.merging(["AWS_PROFILE": "from-config"]) { $1 })
            #expect(c.status == 0, "\(c.stderr)")
            let unknown = try Self.run(server, world, files.merging(["AWS_PROFILE": "nobody"]) { $1 })
            #expect(unknown.status == 77, "\(unknown.stderr)")
            #expect(unknown.stderr.contains("no AWS credentials"), "\(unknown.stderr)")
            // No profile named: the default profile's keys, which the server does not know.
            let byDefault = try Self.run(server, world, files.merging(["AWS_PROFILE": ""]) { $1 }, proxy: proxy)
            #expect(byDefault.status == 77, "\(byDefault.stderr)")
            #expect(proxy.requests().last?["access_key"] as? String == "NOTTHEDEFAULTKEY")
        }

        @Test("the container endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI) with its authorization token, or its file")
        func containerEndpoint() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 83)
            let creds = try Self.credentialServer(["--authorization", "Bearer winback-test"])
            defer { creds.stop() }
            let uri = ["AWS_CONTAINER_CREDENTIALS_FULL_URI": creds.url + "/creds"]
            let r = try Self.run(
                server, world, uri.merging(["AWS_CONTAINER_AUTHORIZATION_TOKEN": "Bearer winback-test"]) { $1 })
            #expect(r.status == 0, "\(r.stderr)")
            let asked = creds.entries()
            #expect(asked.count == 1, "fetched once, then kept until it nears its expiry: \(asked)")
            #expect(asked.first?["path"] as? String == "/creds")
            #expect(asked.first?["authorization"] as? String == "Bearer winback-test")

            let tokenFile = Paths.temporary() + "/token"
            try "Bearer winback-test\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
            let f = try Self.run(
                server, world, uri.merging(["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile]) { $1 })
            #expect(f.status == 0, "\(f.stderr)")

            let refused = try Self.run(server, world, uri)
            #expect(refused.status == 77, "\(refused.stderr)")
            #expect(refused.stderr.contains("401"), "\(refused.stderr)")
        }

        @Test("a session token from the container endpoint goes with every request; SeaweedFS refuses it (77)")
        func containerSessionToken() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 89)
            let creds = try Self.credentialServer(["--session-token", "winback-session-token"])
            defer { creds.stop() }
            let proxy = try LoopbackDouble.proxy(server)
            defer { proxy.stop() }
            // Only the transactions in S3: the first request is a listing, whose refusal has a body.
            var env = server.environment(endpoint: proxy.url, accessKey: nil, secretKey: nil)
            env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = creds.url + "/creds"
            let r = try S3Run.run(world.pipeline(fromS3: [.transactions]), output: Paths.temporary(), env)
            // SeaweedFS takes a session token for one of its own STS sessions: it answers 403
            // InvalidAccessKeyId for the long-term key that comes with a token it never issued.
            #expect(r.status == 77, "\(r.stderr)")
            #expect(r.stderr.contains("InvalidAccessKeyId"), "\(r.stderr)")
            let requests = proxy.requests()
            #expect(!requests.isEmpty)
            #expect(requests.allSatisfy { $0["token"] as? String == "winback-session-token" })
            #expect(requests.allSatisfy { $0["access_key"] as? String == SeaweedServer.accessKey })
        }

        @Test(
            "web identity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN exchanged at AWS_ENDPOINT_URL_STS; refused, 77")
        func webIdentity() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 97)
            let creds = try Self.credentialServer([
                "--web-identity-token", "eyJ-winback-web-identity", "--role-arn", Self.roleARN,
            ])
            defer { creds.stop() }
            let tokenFile = Paths.temporary() + "/token"
            try "eyJ-winback-web-identity\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
            let env = [
                "AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": Self.roleARN,
                "AWS_ENDPOINT_URL_STS": creds.url + "/", "AWS_ROLE_SESSION_NAME": "winback-test-session",
            ]
            let r = try Self.run(server, world, env)
            #expect(r.status == 0, "\(r.stderr)")
            let asked = creds.entries()
            #expect(asked.count == 1, "\(asked)")
            let form = try #require(asked.first?["form"] as? [String: String])
            #expect(form["Action"] == "AssumeRoleWithWebIdentity")
            #expect(form["RoleArn"] == Self.roleARN)
            #expect(form["WebIdentityToken"] == "eyJ-winback-web-identity")
            #expect(form["RoleSessionName"] == "winback-test-session")

            let other = try Self.run(server, world, env.merging(["AWS_ROLE_ARN": Self.roleARN + "-other"]) { $1 })
            #expect(other.status == 77, "\(other.stderr)")
            #expect(other.stderr.contains("STS"), "\(other.stderr)")
        }

        @Test("IMDSv2: a session token first, then the role and its credentials, each asked with the token")
        func instanceMetadata() throws {
            let server = try #require(SeaweedServer.current)
            let world = try S3World.make(server, customers: 100, seed: 101)
            let creds = try Self.credentialServer(["--role-name", "winback-instance-role"])
            defer { creds.stop() }
            // The double is IMDSv2 only: metadata asked without a session token is refused.
            let probe = try Helper.run(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    """
                    import sys, urllib.request, urllib.error
                    try:
                        urllib.request.urlopen(sys.argv[1], timeout=5)
                        print(200)
                    except urllib.error.HTTPError as e:
                        print(e.code)
                    """,
                    creds.url + "/latest/meta-data/iam/security-credentials/",
                ])
            #expect(
                String(decoding: probe.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "401")
            let before = creds.entries().count

            let r = try Self.run(
                server, world,
                ["AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": creds.url])
            #expect(r.status == 0, "\(r.stderr)")
            let asked = Array(creds.entries().dropFirst(before))
            #expect(
                asked.map { "\($0["method"] ?? "") \($0["path"] ?? "") \($0["status"] ?? "")" } == [
                    "PUT /latest/api/token 200",
                    "GET /latest/meta-data/iam/security-credentials/ 200",
                    "GET /latest/meta-data/iam/security-credentials/winback-instance-role 200",
                ])
            #expect(asked.dropFirst().allSatisfy { $0["imds_token_valid"] as? Bool == true })
        }
    }
}
