import Foundation
import Testing
import WinBackTestSupport

@testable import WinBack

/// The segment changes against an independent computation (`Tests/Reference/changes.py`, Python's
/// standard library only, from docs/rules.md §3 and §10.5) on a world `winback generate` did not
/// make (`Tests/Reference/make_world.py`), two nights a month apart, some customers gone from
/// the second night's inputs.
@Suite("Segment changes against an independent computation", .serialized, .tags(.slow))
struct ChangesReferenceTests {
    static let python = CLI.python

    /// Runs python3 with `arguments`; returns its output, expecting exit 0.
    @discardableResult
    static func python(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let r = try CLI.output(python!, arguments)
        #expect(r.status == 0, "\(r.text)", sourceLocation: sourceLocation)
        return r.text
    }

    /// Removes from every transaction file of `world` the lines of one customer in 40 (by a
    /// digest of the originalTransactionId): they are gone from the inputs.
    static let dropCustomers = """
        import glob, gzip, hashlib, json, sys
        for path in glob.glob(sys.argv[1] + "/transactions-*.jsonl.gz"):
            kept = []
            with gzip.open(path, "rb") as fh:
                for line in fh:
                    try:
                        o = json.loads(line).get("originalTransactionId")
                    except Exception:
                        o = None
                    if o is not None and hashlib.sha256(str(o).encode()).digest()[0] % 40 == 0:
                        continue
                    kept.append(line)
            with gzip.GzipFile(path, "wb", mtime=0) as fh:
                fh.writelines(kept)
        """

    @Test(
        "the changes files equal the reference's: sets, order, offers and reasons",
        .enabled(if: python != nil, "needs python3 (Debian: python3) to run the reference computation"),
        arguments: [(4, 3000), (9, 1500)])
    func equalsReference(seed: Int, customers: Int) throws {
        let world = Paths.temporary() + "/world"
        let reference = Paths.repo + "/Tests/Reference/"
        try Self.python([reference + "make_world.py", world, "--customers", "\(customers)", "--seed", "\(seed)"])
        let pipeline = world + "/pipeline.yaml"
        let quiet = Progress(mode: .quiet)
        var first = RunOptions(pipelinePath: pipeline, asOf: "2026-10-22", threads: 2)
        first.now = ms("2026-11-22")
        let baseline = try PipelineRun.run(first, progress: quiet).published
        try Self.python(["-c", Self.dropCustomers, world])
        var second = first
        second.asOf = "2026-11-22"
        let tonight = try PipelineRun.run(second, progress: quiet).published
        let expected = Paths.temporary() + "/expected"
        try Self.python([reference + "changes.py", pipeline, baseline, "2026-11-22", expected])
        let names = try FileManager.default.contentsOfDirectory(atPath: expected).sorted()
        #expect(names.count >= 3 && names.contains("best-offer.csv") && names.contains("holdout.csv"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: tonight + "/segments/changes").sorted() == names)
        var all = ""
        for name in names {
            let mine = try String(contentsOfFile: tonight + "/segments/changes/" + name, encoding: .utf8)
            let theirs = try String(contentsOfFile: expected + "/" + name, encoding: .utf8)
            #expect(mine == theirs, "\(name) differs from the reference")
            all += mine
        }
        // Rows of each kind and the reasons that matter were compared.
        for word in ["entered,", "exited,", "changed,", ",returned\n", ",unknown_customer\n", ",too_long_ago\n"] {
            #expect(all.contains(word), "no \(word) row")
        }
    }
}
