import Crypto
import Foundation
import Synchronization
import WinBackModel
import X509

/// Apple's signed data (`appstore-signed`): each transaction of the NDJSON world signed by a
/// test chain, in every line form a team keeps — bare JWS, JSON strings, notifications,
/// history pages, status responses, notification data — with some customers' renewal info
/// carried beside their last transaction, the rest in a signed renewal-info file.
///
/// Rows signed before ``cutoff`` are signed by a leaf that expired at the cutoff, the others
/// by its successor, as happens when Apple rotates its signing certificate. ECDSA signatures
/// are randomised: the files are the same in content from run to run, not byte for byte.
struct SignedWorldFormat: WorldFormat {
    static let bundleId = "com.example.streamingpass"
    static let appAppleId: Int64 = 1_234_567_890
    /// Lines of this form are gathered into history pages once a month's lines are known.
    static let pageMarker: UInt8 = 0x01
    static let pageSize = 20

    let chain: Chain
    private let earlySigners: Signers
    private let lateSigners: Signers
    let cutoff: Int64

    /// What the world keeps of its test chain: the root its readers trust (`test-root.pem`).
    struct Chain {
        let root: Certificate
    }

    /// The signer of the rows before ``cutoff``.
    var early: JWSSigner { earlySigners.made() }
    /// The signer of the rows from ``cutoff``.
    var late: JWSSigner { lateSigners.made() }
    private let decoded = NDJSONWorldFormat()

    /// - Parameter asOf: the world's present; the first leaf expires two years before it.
    init(asOf: Int64) throws {
        let date = { (ms: Int64) in Date(timeIntervalSince1970: Double(ms) / 1000) }
        let year = 366 * MonthMath.day
        let chain = try TestChain(from: date(asOf - 10 * year), until: date(asOf + 10 * year))
        self.chain = Chain(root: chain.root)
        cutoff = asOf - 2 * year
        earlySigners = Signers(try chain.signer(chain.leaf(from: date(asOf - 10 * year), until: date(cutoff))))
        lateSigners = Signers(
            try chain.signer(chain.leaf(from: date(cutoff - MonthMath.day), until: date(asOf + 5 * year))))
    }

    func fileName(month: String) -> String { "transactions-\(month).jsonl.gz" }
    var header: String? { nil }

    /// The JWS of a payload signed at `signedDate`.
    func sign(_ json: [UInt8], signedDate: Int64) -> String {
        (signedDate < cutoff ? earlySigners : lateSigners).sign(json)
    }

    /// One leaf's signers. A signing key is not `Sendable`, so each signer is used under a lock
    /// of its own, and there are as many as the generator has threads: a thread signs with the
    /// first that is free.
    private final class Signers: Sendable {
        private let key: Data
        private let header: String
        private let slots: [Slot]

        private final class Slot: Sendable {
            let signer: Mutex<JWSSigner>
            init(_ signer: sending JWSSigner) { self.signer = Mutex(signer) }
        }

        init(_ signer: JWSSigner) {
            key = signer.key.rawRepresentation
            header = signer.header
            slots = (0..<max(1, ProcessInfo.processInfo.activeProcessorCount)).map { [key, header] _ in
                Slot(Signers.made(key: key, header: header))
            }
        }

        /// A signer made from the key's bytes.
        private static func made(key: Data, header: String) -> sending JWSSigner {
            // The bytes of a key just made are a key.
            JWSSigner(key: try! P256.Signing.PrivateKey(rawRepresentation: key), header: header)
        }

        /// A signer of this leaf, made anew.
        func made() -> JWSSigner { Signers.made(key: key, header: header) }

        func sign(_ json: [UInt8]) -> String {
            // Signing with a key just made cannot fail.
            for slot in slots {
                if let jws = slot.signer.withLockIfAvailable({ try! $0.sign(json) }) { return jws }
            }
            return slots[Int.random(in: slots.indices)].signer.withLock { try! $0.sign(json) }
        }
    }

    /// The decoded payload of a transaction, without its newline.
    func payload(_ t: GeneratedTransaction, variant: Int) -> [UInt8] {
        var line: [UInt8] = []
        decoded.append(t, variant: variant, to: &line)
        return Array(line.dropLast())
    }

    func append(_ t: GeneratedTransaction, variant: Int, to out: inout [UInt8]) {
        append(t, renewal: nil, variant: variant, to: &out)
    }

    /// A transaction, with its customer's renewal info (decoded JSON) when given.
    func append(
        _ t: GeneratedTransaction, renewal: (json: [UInt8], signedDate: Int64)?, variant: Int, to out: inout [UInt8]
    ) {
        let jws = sign(payload(t, variant: variant), signedDate: t.signedDate)
        let renewalJWS = renewal.map { sign($0.json, signedDate: $0.signedDate) }
        let environment = t.sandbox ? "Sandbox" : "Production"
        if let renewalJWS {
            if variant % 2 == 0 {
                out.add(#"{"signedTransactionInfo":"\#(jws)","signedRenewalInfo":"\#(renewalJWS)"}"#)
            } else {
                out.add(
                    #"{"data":[{"subscriptionGroupIdentifier":"\#(t.groupId)","lastTransactions":[{"#
                        + #""originalTransactionId":"\#(t.originalTransactionId)","status":2,"#
                        + #""signedTransactionInfo":"\#(jws)","signedRenewalInfo":"\#(renewalJWS)"}]}],"#
                        + #""environment":"\#(environment)","bundleId":"\#(Self.bundleId)","appAppleId":\#(Self.appAppleId)}"#
                )
            }
            out.add("\n")
            return
        }
        switch variant % 6 {
        case 0: out.add(jws)
        case 1: out.add("\"\(jws)\"")
        case 2:
            var data = #"{"bundleId":"\#(Self.bundleId)","#
            if !t.sandbox { data += #""appAppleId":\#(Self.appAppleId),"# }
            data += #""environment":"\#(environment)","signedTransactionInfo":"\#(jws)"}"#
            let notification =
                #"{"notificationType":"\#(t.renewal ? "DID_RENEW" : "SUBSCRIBED")","notificationUUID":"#
                + #""\#(t.transactionId)-n","data":\#(data),"version":"2.0","signedDate":\#(t.signedDate)}"#
            out.add(#"{"signedPayload":"\#(sign(Array(notification.utf8), signedDate: t.signedDate))"}"#)
        case 3: out.add(#"{"signedTransactionInfo":"\#(jws)"}"#)
        case 4:
            out.append(Self.pageMarker)
            out.add(jws)
        default:
            out.add(
                #"{"environment":"\#(environment)","appAppleId":\#(Self.appAppleId),"bundleId":"\#(Self.bundleId)","#
                    + #""data":[{"subscriptionGroupIdentifier":"\#(t.groupId)","lastTransactions":[{"#
                    + #""originalTransactionId":"\#(t.originalTransactionId)","status":1,"signedTransactionInfo":"\#(jws)"}]}]}"#
            )
        }
        out.add("\n")
    }

    /// A line of the renewal-info file: the renewal info signed, in one of three forms.
    func renewalLine(_ json: [UInt8], signedDate: Int64, variant: Int) -> [UInt8] {
        let jws = sign(json, signedDate: signedDate)
        switch variant % 3 {
        case 0: return Array((jws + "\n").utf8)
        case 1: return Array("\"\(jws)\"\n".utf8)
        default: return Array(#"{"signedRenewalInfo":"\#(jws)"}"#.utf8) + [0x0A]
        }
    }

    /// A month's lines as written: those marked as page members gathered into history pages
    /// of up to twenty transactions, where the first of them stood.
    func pages(_ lines: [[UInt8]]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var members: [[UInt8]] = []
        var at: Int?
        for line in lines {
            if line.first == Self.pageMarker {
                if at == nil {
                    at = out.count
                    out.append([])
                }
                members.append(Array(line.dropFirst().dropLast()))
                if members.count == Self.pageSize {
                    out[at!] = page(members, last: false)
                    members = []
                    at = nil
                }
            } else {
                out.append(line)
            }
        }
        if let at { out[at] = page(members, last: true) }
        return out
    }

    private func page(_ members: [[UInt8]], last: Bool) -> [UInt8] {
        var line = Array(
            #"{"revision":"r\#(members.count)","bundleId":"\#(Self.bundleId)","appAppleId":\#(Self.appAppleId),"#.utf8)
        line += Array(#""environment":"Production","hasMore":\#(!last),"signedTransactions":["#.utf8)
        for (i, m) in members.enumerated() {
            if i > 0 { line.append(UInt8(ascii: ",")) }
            line.append(UInt8(ascii: "\""))
            line += m
            line.append(UInt8(ascii: "\""))
        }
        line += Array("]}\n".utf8)
        return line
    }
}
