import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackSupport

/// `winback explain --customer` given a value of the identities file (docs/rules.md §10.7):
/// an email or the team's user id explains every customer it maps to, exactly as the
/// originalTransactionId would.
@Suite("Explain by any identities value", .tags(.slow))
struct ExplainIdentityTests {
    static let sample = Paths.repo + "/Pipelines/sample.yaml"

    /// The sample's identities rows, by column: (originalTransactionId, token, external_id, email).
    static func rows() throws -> [[String]] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
        p.arguments = ["-dc", Paths.repo + "/Data/sample/identities.csv.gz"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst().map {
            $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        }
    }

    @Test("an email and a user id explain the same customer as its originalTransactionId, in text and JSON")
    func byEmailAndUserId() throws {
        let rows = try Self.rows()
        let row = try #require(rows.first { $0[3] == "user8@example.com" })
        let byId = try CLI.run(["explain", Self.sample, "--customer", row[0], "--json"])
        #expect(byId.status == 0, "\(byId.stderr)")
        for value in [row[3], row[2]] {
            let r = try CLI.run(["explain", Self.sample, "--customer", value, "--json"])
            #expect(r.status == 0, "\(value): \(r.stderr)")
            #expect(r.stdout == byId.stdout, "\(value)")
            let text = try CLI.run(["explain", Self.sample, "--customer", value])
            #expect(text.status == 0)
            #expect(text.stdout.contains(row[0]), "\(value)")
        }
    }

    @Test("a value no identities row holds is 66, saying so")
    func unknownValue() throws {
        let r = try CLI.run(["explain", Self.sample, "--customer", "nobody@example.com"])
        #expect(r.status == 66)
        #expect(r.stderr.contains("nor a row of the identities file holding it"), "\(r.stderr)")
    }

    @Test("a value shared by two identities rows explains both customers")
    func sharedValue() throws {
        let dir = Paths.temporary()
        let rows = try Self.rows()
        let a = rows[0]
        let b = rows[1]
        var text = "original_transaction_id,app_account_token,external_id,email\n"
        text += "\(a[0]),\(a[1]),team-7,shared@example.com\n\(b[0]),\(b[1]),team-8,shared@example.com\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: dir + "/ids.csv"))
        var yaml = try String(contentsOfFile: Self.sample, encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "../Data/sample/identities.csv.gz", with: dir + "/ids.csv")
        yaml = yaml.replacingOccurrences(of: "../", with: Paths.repo + "/")
        yaml = yaml.replacingOccurrences(of: "metrics: sample.prom", with: "metrics: \(dir)/m.prom")
        try yaml.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let r = try CLI.run(["explain", dir + "/p.yaml", "--customer", "shared@example.com", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains(a[0]) && r.stdout.contains(b[0]), "\(r.stdout.prefix(300))")
    }
}
