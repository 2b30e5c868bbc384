import Foundation
import Synchronization
import WinBackSupport

/// Finds credentials and the region as AWS's own tools do (docs/rules.md §11): the environment,
/// web identity (EKS), the shared credentials and config files (`AWS_PROFILE`), the container
/// endpoint (ECS, AWS Batch), then the instance metadata service (IMDSv2). Temporary
/// credentials are fetched again shortly before they expire.
public final class CredentialChain: Sendable {
    private let environment: [String: String]
    /// The credentials found, while they last; the lock is held while they are looked for, so
    /// threads that ask at once look once.
    private let cached = Mutex<(credentials: AWSCredentials, expires: Date?, source: String)?>(nil)

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// The profile: `AWS_PROFILE`, else `default`.
    var profile: String { environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default" }

    /// The region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's, else us-east-1.
    public var region: String {
        if let r = environment["AWS_REGION"], !r.isEmpty { return r }
        if let r = environment["AWS_DEFAULT_REGION"], !r.isEmpty { return r }
        return configValue("region") ?? "us-east-1"
    }

    /// Forgets the credentials found, so the next request looks for them again (temporary ones
    /// that S3 said have expired).
    public func forget() {
        cached.withLock { $0 = nil }
    }

    /// The credentials, and where they came from; 77 when none is found.
    public func credentials() throws -> (AWSCredentials, source: String) {
        try cached.withLock { cached throws -> (AWSCredentials, source: String) in
            if let c = cached, c.expires.map({ $0.timeIntervalSinceNow > 300 }) ?? true {
                return (c.credentials, c.source)
            }
            for (source, find) in providers {
                if let (c, expires) = try find() {
                    cached = (c, expires, source)
                    return (c, source)
                }
            }
            throw WinBackError(
                .noPermission,
                "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE with "
                    + "~/.aws/credentials, or run where a container, web identity or instance role provides them")
        }
    }

    private var providers: [(String, () throws -> (AWSCredentials, Date?)?)] {
        [
            ("environment", fromEnvironment), ("web identity", fromWebIdentity), ("shared files", fromFiles),
            ("container", fromContainer), ("instance metadata", fromInstanceMetadata),
        ]
    }

    func fromEnvironment() -> (AWSCredentials, Date?)? {
        guard let id = environment["AWS_ACCESS_KEY_ID"], !id.isEmpty,
            let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty
        else { return nil }
        let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        return (AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: token), nil)
    }

    /// `[profile]` sections of an INI file: key = value lines.
    static func ini(_ text: String) -> [String: [String: String]] {
        var out: [String: [String: String]] = [:]
        var section = ""
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            out[section, default: [:]][key] = value
        }
        return out
    }

    private var home: String { environment["HOME"] ?? NSHomeDirectory() }

    private func file(_ variable: String, _ fallback: String) -> [String: [String: String]] {
        let path = environment[variable].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.aws/" + fallback
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        return CredentialChain.ini(text)
    }

    /// A key of the profile in the config file (`[profile NAME]`, or `[default]`).
    func configValue(_ key: String) -> String? {
        let config = file("AWS_CONFIG_FILE", "config")
        return (config[profile == "default" ? "default" : "profile \(profile)"] ?? config[profile])?[key]
    }

    func fromFiles() -> (AWSCredentials, Date?)? {
        let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials")
        let config = file("AWS_CONFIG_FILE", "config")
        for section in [credentials[profile], config[profile == "default" ? "default" : "profile \(profile)"]] {
            if let s = section, let id = s["aws_access_key_id"], let secret = s["aws_secret_access_key"] {
                return (
                    AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: s["aws_session_token"]), nil
                )
            }
        }
        return nil
    }

    /// EKS: a token file and a role, exchanged with STS's AssumeRoleWithWebIdentity.
    func fromWebIdentity() throws -> (AWSCredentials, Date?)? {
        guard let tokenFile = environment["AWS_WEB_IDENTITY_TOKEN_FILE"], let role = environment["AWS_ROLE_ARN"],
            !tokenFile.isEmpty, !role.isEmpty
        else { return nil }
        guard let token = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
            throw WinBackError(.noPermission, "cannot read the web identity token", path: tokenFile)
        }
        let endpoint =
            environment["AWS_ENDPOINT_URL_STS"] ?? environment["AWS_ENDPOINT_URL"]
            ?? "https://sts.\(region).amazonaws.com"
        let session = environment["AWS_ROLE_SESSION_NAME"] ?? "winback-\(ProcessInfo.processInfo.processIdentifier)"
        let form = [
            ("Action", "AssumeRoleWithWebIdentity"), ("Version", "2011-06-15"), ("RoleArn", role),
            ("RoleSessionName", session), ("WebIdentityToken", token.trimmingCharacters(in: .whitespacesAndNewlines)),
        ].map { "\($0.0)=\(SigV4.encodeQuery($0.1))" }.joined(separator: "&")
        guard let url = URL(string: endpoint) else {
            throw WinBackError(.configuration, "AWS_ENDPOINT_URL_STS is not a URL: \(endpoint)")
        }
        var request = HTTP.Request(url: url, method: "POST")
        request.setHeader("Content-Type", "application/x-www-form-urlencoded")
        request.body = Data(form.utf8)
        let r: HTTP.Response
        do { r = try HTTP.send(request, timeout: 10) } catch {
            throw WinBackError(.temporary, "cannot reach STS for web identity credentials: \(error)")
        }
        guard r.status == 200, let xml = S3XML.parse(r.body),
            let id = S3XML.first(
                xml, "AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials/AccessKeyId"),
            let secret = S3XML.first(
                xml, "AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials/SecretAccessKey")
        else {
            throw WinBackError(.noPermission, "STS refused the web identity (HTTP \(r.status)) for role \(role)")
        }
        let base = "AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials/"
        return (
            AWSCredentials(
                accessKeyId: id, secretAccessKey: secret, sessionToken: S3XML.first(xml, base + "SessionToken")),
            S3XML.first(xml, base + "Expiration").flatMap(CredentialChain.date)
        )
    }

    /// ECS and AWS Batch: the container credentials endpoint.
    func fromContainer() throws -> (AWSCredentials, Date?)? {
        let url: String
        if let relative = environment["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"], !relative.isEmpty {
            url = "http://169.254.170.2" + relative
        } else if let full = environment["AWS_CONTAINER_CREDENTIALS_FULL_URI"], !full.isEmpty {
            url = full
        } else {
            return nil
        }
        guard let u = URL(string: url) else { throw WinBackError(.configuration, "not a URL: \(url)") }
        var request = HTTP.Request(url: u)
        if let file = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"],
            let token = try? String(contentsOfFile: file, encoding: .utf8)
        {
            request.setHeader("Authorization", token.trimmingCharacters(in: .whitespacesAndNewlines))
        } else if let token = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN"] {
            request.setHeader("Authorization", token)
        }
        let r: HTTP.Response
        do { r = try HTTP.send(request, timeout: 5) } catch {
            throw WinBackError(.temporary, "cannot reach the container credentials endpoint \(url): \(error)")
        }
        guard r.status == 200 else {
            throw WinBackError(.noPermission, "the container credentials endpoint answered HTTP \(r.status)")
        }
        return try CredentialChain.json(r.body, what: "the container credentials endpoint")
    }

    /// EC2: IMDSv2 (a session token, then the role's credentials). Skipped with
    /// `AWS_EC2_METADATA_DISABLED=true`.
    func fromInstanceMetadata() throws -> (AWSCredentials, Date?)? {
        if environment["AWS_EC2_METADATA_DISABLED"]?.lowercased() == "true" { return nil }
        let base = environment["AWS_EC2_METADATA_SERVICE_ENDPOINT"] ?? "http://169.254.169.254"
        guard let tokenURL = URL(string: base + "/latest/api/token") else { return nil }
        var put = HTTP.Request(url: tokenURL, method: "PUT")
        put.setHeader("X-aws-ec2-metadata-token-ttl-seconds", "21600")
        guard let t = try? HTTP.send(put, timeout: 1), t.status == 200 else { return nil }
        let token = String(decoding: t.body, as: UTF8.self)
        func get(_ path: String) throws -> HTTP.Response {
            var r = HTTP.Request(url: URL(string: base + path)!)
            r.setHeader("X-aws-ec2-metadata-token", token)
            return try HTTP.send(r, timeout: 2)
        }
        // A service that stops answering part way gives no credentials, like none at all.
        guard let roles = try? get("/latest/meta-data/iam/security-credentials/"), roles.status == 200,
            let role = String(decoding: roles.body, as: UTF8.self).split(separator: "\n").first,
            let r = try? get("/latest/meta-data/iam/security-credentials/\(role)"), r.status == 200
        else { return nil }
        return try CredentialChain.json(r.body, what: "the instance metadata service")
    }

    /// `{"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}`.
    static func json(_ data: Data, what: String) throws -> (AWSCredentials, Date?) {
        guard let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let id = o["AccessKeyId"] as? String, let secret = o["SecretAccessKey"] as? String
        else { throw WinBackError(.noPermission, "\(what) gave no credentials") }
        return (
            AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: o["Token"] as? String),
            (o["Expiration"] as? String).flatMap(date)
        )
    }

    static func date(_ s: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        if let d = f.date(from: s) { return d }
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: s)
    }
}
