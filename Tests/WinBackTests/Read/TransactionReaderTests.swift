import Foundation
import Synchronization
import Testing
import WinBackTestSupport

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

extension ReadStageTests {
    /// Reading several files and deduplicating by transactionId (docs/rules.md §3 rule 1), then counting
    /// sandbox and family-shared rows.
    @Suite struct TransactionReaderTests {
        /// Writes `files` (name → lines) as gzip into `dir`; returns their paths in sorted order.
        private func writeFiles(_ files: [(String, [String])], in dir: URL) throws -> [String] {
            try files.map { name, lines in
                let text = lines.joined(separator: "\n") + "\n"
                let url = dir.appendingPathComponent(name)
                return name.hasSuffix(".gz")
                    ? try ReadSupport.write(ReadSupport.gzip(text), to: url) : try ReadSupport.write(text, to: url)
            }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        }

        /// Each kept row as (transactionId, expiresDate), the date telling which version won.
        private func kept(_ set: TransactionSet) -> [String: Int64] {
            Dictionary(uniqueKeysWithValues: set.rows.map { (set.strings.string($0.transactionId), $0.expiresDate) })
        }

        private func line(_ id: String, signed: Int64?, version: Int64, env: String = "Production") -> String {
            TxLine(id: id, original: "o-\(id)", signed: signed, purchase: 1_000, expires: 1_000 + version)
                .with("environment", "\"\(env)\"").json
        }

        /// A set's customer filter (the renewal info a shard keeps is that of its customers)
        /// accepts every originalTransactionId among its rows, decimal or kept as a string
        /// (a leading zero, too many digits, letters), and no other: thousands of customers, so
        /// that its index grows several times.
        @Test func theCustomerFilterHoldsEveryCustomerOfTheSetAndNoOther() throws {
            try ReadSupport.withTempDir { dir in
                let odd = ["0", "0123", "1234567890123456789", "o-7", "123456789012345678"]
                let originals =
                    (0..<3_000).map { $0 % 3 == 0 ? "c-\($0)" : String(1_000_000_000_000_000 + $0 * 7) } + odd
                // Each customer with two transactions, one in each file.
                let lines = originals.enumerated().map { k, o in
                    TxLine(id: "t\(k)", original: o, signed: 100, purchase: 1_000, expires: 2_000).json
                }
                let later = originals.enumerated().map { k, o in
                    TxLine(id: "r\(k)", original: o, signed: 200, purchase: 1_000, expires: 3_000).json
                }
                let paths = try writeFiles([("a.jsonl.gz", lines), ("b.jsonl.gz", later)], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 2)
                let filter = set.customerFilter()
                #expect(originals.filter { !filter.contains($0) } == [])
                let absent = [
                    "1", "01234", "1234567890123456780", "o-8", "c-1", "c-3000", "1000000000000000001",
                    "12345678901234567890", "", "t0",
                ]
                #expect(absent.filter(filter.contains) == [])
            }
        }

        @Test(arguments: [1, 4])
        func theNewestSignedDateWinsAcrossFiles(threads: Int) throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        ("a.jsonl.gz", [line("x", signed: 300, version: 1), line("y", signed: 100, version: 1)]),
                        ("b.jsonl.gz", [line("x", signed: 200, version: 2), line("y", signed: 200, version: 2)]),
                        ("c.jsonl.gz", [line("x", signed: 299, version: 3)]),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: threads)
                #expect(kept(set) == ["x": 1_001, "y": 1_002])
                #expect(set.counters.duplicates == 3)
                #expect(set.counters.rowsRead == 5)
            }
        }

        /// Work given to be done beside the files (the renewal info) runs once, on one of the
        /// threads reading them, taken before any file (on one thread, done before any file is
        /// read): with files or none, and when a file fails; the rows read are the same.
        @Test(arguments: [1, 2, 3])
        func workBesideTheFilesRunsOnceBeforeAnyFile(threads: Int) throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        ("a.jsonl.gz", [line("x", signed: 300, version: 1), line("y", signed: 100, version: 1)]),
                        ("b.jsonl.gz", [line("x", signed: 200, version: 2)]),
                    ], in: dir)
                let seen = Mutex<[String]>([])
                let progress: @Sendable (Int) -> Void = { _ in seen.withLock { $0.append("file") } }
                let set = try TransactionReader.read(
                    inputs: paths.map(InputStores.lookUp), threads: threads, progress: progress,
                    beside: { seen.withLock { $0.append("beside") } })
                #expect(kept(set) == ["x": 1_001, "y": 1_001])
                let order = seen.withLock { $0 }
                #expect(order.filter { $0 == "beside" }.count == 1 && order.count > 1)
                if threads == 1 { #expect(order.first == "beside") }
                let none = Mutex(0)
                _ = try TransactionReader.read(inputs: [], threads: threads, beside: { none.withLock { $0 += 1 } })
                #expect(none.withLock { $0 } == 1)
                let broken = try ReadSupport.write("not gzip", to: dir.appendingPathComponent("c.jsonl.gz"))
                let failing = Mutex(0)
                #expect(throws: (any Error).self) {
                    _ = try TransactionReader.read(
                        inputs: (paths + [broken]).map(InputStores.lookUp), threads: threads,
                        beside: { failing.withLock { $0 += 1 } })
                }
                #expect(failing.withLock { $0 } == 1)
            }
        }

        @Test func aMissingSignedDateLosesToAnySignedOne() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        ("a.jsonl", [line("x", signed: -5, version: 1), line("y", signed: nil, version: 1)]),
                        ("b.jsonl", [line("x", signed: nil, version: 2), line("y", signed: 0, version: 2)]),
                        (
                            "c.jsonl",
                            [
                                line("x", signed: nil, version: 3), line("z", signed: nil, version: 1),
                                line("z", signed: nil, version: 2),
                            ]
                        ),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 2)
                // Two unsigned versions tie: the later line wins.
                #expect(kept(set) == ["x": 1_001, "y": 1_002, "z": 1_002])
                #expect(set.counters.duplicates == 4)
            }
        }

        @Test(arguments: [1, 4])
        func onATieTheLaterFileThenTheLaterLineWins(threads: Int) throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        ("2024-01.jsonl.gz", [line("x", signed: 500, version: 1), line("y", signed: 500, version: 1)]),
                        (
                            "2024-02.jsonl.gz",
                            [
                                line("x", signed: 500, version: 2), line("y", signed: 500, version: 2),
                                line("y", signed: 500, version: 3),
                            ]
                        ),
                        ("2024-03.jsonl.gz", [line("x", signed: 500, version: 4), line("x", signed: 400, version: 5)]),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: threads)
                #expect(kept(set) == ["x": 1_004, "y": 1_003])
            }
        }

        /// Versions of a transaction are rows of one customer (§3 rule 1): one transactionId
        /// under another originalTransactionId or another group is another transaction, kept
        /// beside it whatever the versions' dates, files and threads.
        @Test(arguments: [1, 3])
        func oneTransactionIdUnderTwoCustomersIsTwoTransactions(threads: Int) throws {
            try ReadSupport.withTempDir { dir in
                func row(_ original: String, group: String, signed: Int64, version: Int64) -> String {
                    TxLine(id: "x", original: original, signed: signed, purchase: 1_000, expires: 1_000 + version)
                        .with("subscriptionGroupIdentifier", "\"\(group)\"").json
                }
                let paths = try writeFiles(
                    [
                        (
                            "a.jsonl.gz",
                            [
                                row("o1", group: "g1", signed: 300, version: 1),
                                row("o2", group: "g1", signed: 100, version: 2),
                            ]
                        ),
                        (
                            "b.jsonl.gz",
                            [
                                row("o1", group: "g2", signed: 50, version: 3),
                                row("o1", group: "g1", signed: 200, version: 4),
                            ]
                        ),
                        (
                            "c.jsonl",
                            [
                                row("o2", group: "g1", signed: 400, version: 5),
                                row("o1", group: "g2", signed: 50, version: 6),
                            ]
                        ),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: threads)
                let kept = set.rows.map {
                    [
                        set.strings.string($0.subscriptionGroupId), set.strings.string($0.originalTransactionId),
                        set.strings.string($0.transactionId), "\($0.expiresDate)",
                    ].joined(separator: " ")
                }.sorted()
                // o1 in g1: signed 300 beats 200; o2 in g1: 400 beats 100; o1 in g2: a tie, the later file.
                #expect(kept == ["g1 o1 x 1001", "g1 o2 x 1005", "g2 o1 x 1006"])
                #expect(set.counters.duplicates == 3)
                #expect(set.counters.rowsRead == 6)
            }
        }

        @Test func sandboxRowsAreCountedAfterDeduplication() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        (
                            "a.jsonl",
                            [
                                // x: a newer Sandbox version wins, so x is gone.
                                line("x", signed: 100, version: 1),
                                // y: an older Sandbox version loses: a duplicate, not sandbox.
                                line("y", signed: 100, version: 1, env: "Sandbox"),
                                // z: only Sandbox.
                                line("z", signed: 100, version: 1, env: "Xcode"),
                            ]
                        ),
                        (
                            "b.jsonl",
                            [line("x", signed: 200, version: 2, env: "Sandbox"), line("y", signed: 200, version: 2)]
                        ),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 2)
                #expect(kept(set) == ["y": 1_002])
                #expect(set.counters.sandbox == 2)
                #expect(set.counters.duplicates == 2)
                #expect(set.counters.rowsRead == 5)
            }
        }

        @Test func familySharedWinnersAreCountedAndKept() throws {
            try ReadSupport.withTempDir { dir in
                let shared = #""FAMILY_SHARED""#
                let rows = [
                    TxLine(id: "f1", signed: 1).with("inAppOwnershipType", shared).json,
                    TxLine(id: "f2", signed: 1).with("inAppOwnershipType", shared).json,
                    // A family-shared version that loses is not counted.
                    TxLine(id: "p1", signed: 1).with("inAppOwnershipType", shared).json,
                    TxLine(id: "p1", signed: 2).json,
                    // Nor is a family-shared Sandbox row.
                    TxLine(id: "s1", signed: 1).with("inAppOwnershipType", shared).with("environment", #""Sandbox""#)
                        .json,
                ]
                let paths = try writeFiles([("a.jsonl", rows)], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 1)
                #expect(set.counters.familyShared == 2)
                #expect(set.counters.sandbox == 1)
                #expect(set.counters.duplicates == 1)
                #expect(set.rows.map { set.strings.string($0.transactionId) } == ["f1", "f2", "p1"])
                #expect(set.rows.map(\.ownership) == [.familyShared, .familyShared, .purchased])
            }
        }

        @Test func countersAndPerFileStatsAddUp() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        ("a.jsonl", [TxLine(id: "1").json, "", #"{"type":"Consumable"}"#, "{", TxLine(id: "2").json]),
                        (
                            "b.jsonl",
                            ["  ", #"{"transactionId":"3"}"#, TxLine(id: "1").json, #"{"type":"Non-Consumable"}"#]
                        ),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 2)
                #expect(set.counters.rowsRead == 7)
                #expect(set.counters.nonSubscription == 2)
                #expect(set.counters.rejected == 2)
                #expect(set.counters.duplicates == 1)
                #expect(set.inputs.map(\.path) == paths)
                #expect(set.inputs.map(\.rows) == [4, 3])
                #expect(set.inputs.map(\.rejected) == [1, 1])
                #expect(
                    set.rejects.map(\.reason) == [
                        "invalid JSON: expected a key string at column 2",
                        "missing required field originalTransactionId",
                    ])
            }
        }

        @Test func rejectsAreSortedByFileThenLine() throws {
            try ReadSupport.withTempDir { dir in
                // The big file is read first by the scheduler; the order must not show.
                let filler = (0..<3000).map { TxLine(id: "fill\($0)").json }
                let paths = try writeFiles(
                    [
                        ("a.jsonl", ["{1", TxLine(id: "a").json, "{2", "{3"]),
                        ("b.jsonl.gz", ["{4"] + filler + ["{5"]),
                        ("c.jsonl", [TxLine(id: "c").json, "{6"]),
                    ], in: dir)
                for threads in [1, 3] {
                    let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: threads)
                    #expect(set.rejects.map(\.file) == [paths[0], paths[0], paths[0], paths[1], paths[1], paths[2]])
                    #expect(set.rejects.map(\.line) == [1, 3, 4, 1, 3002, 2])
                    #expect(set.rejects.map(\.excerpt) == ["{1", "{2", "{3", "{4", "{5", "{6"])
                }
            }
        }

        /// A seeded world of overlapping versions across files, with sandbox and family rows.
        private func randomWorld(in dir: URL, seed: UInt64) throws -> [String] {
            var rng = SplitMix64(seed: seed)
            var files: [(String, [String])] = []
            for f in 0..<5 {
                var lines: [String] = []
                for _ in 0..<(200 + rng.below(300)) {
                    let n = rng.below(400)
                    let id = "tx\(n)"
                    let signed: Int64? = rng.below(5) == 0 ? nil : Int64(rng.below(20))
                    // A transaction's versions name its customer; one in eight names another
                    // (another transaction, §3 rule 1).
                    let original = rng.below(8) == 0 ? rng.below(50) : n % 50
                    var l = TxLine(
                        id: id, original: "o\(original)", signed: signed, purchase: 0,
                        expires: Int64(rng.below(1000)))
                    if rng.below(10) == 0 { l = l.with("environment", #""Sandbox""#) }
                    if rng.below(10) == 0 { l = l.with("inAppOwnershipType", #""FAMILY_SHARED""#) }
                    if rng.below(4) == 0 { l = l.with("storefront", "\"\(["FRA", "DEU", "JPN"][rng.below(3)])\"") }
                    lines.append(rng.below(30) == 0 ? "{broken" : l.json)
                }
                files.append(("part-\(f).\(f % 2 == 0 ? "jsonl.gz" : "ndjson")", lines))
            }
            return try writeFiles(files, in: dir)
        }

        /// Everything of a set in strings, so sets with different id numbering compare.
        private func snapshot(_ set: TransactionSet) -> [String] {
            let s = set.strings
            func str(_ id: Int32) -> String { id == Transaction.none ? "-" : s.string(id) }
            // Rows come in no particular order; rejects and inputs in file order.
            return set.rows.map {
                "\(s.string($0.transactionId)) \(s.string($0.originalTransactionId)) \(str($0.storefront)) \($0.expiresDate) \($0.signedDate) \($0.ownership)"
            }.sorted() + set.rejects.map { "\($0.file):\($0.line) \($0.reason)" } + set.inputs.map { "\($0)" } + [
                "\(set.counters)"
            ]
        }

        @Test func theResultIsTheSameWhateverTheThreadsAndTheGlobOrder() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try randomWorld(in: dir, seed: 42)
                let base = dir.path
                let globOrders = [
                    ["part-*"], ["part-4.jsonl.gz", "part-*.ndjson", "part-0.jsonl.gz", "part-2.jsonl.gz"],
                    ["./part-3.ndjson", "part-[0-2]*", "../\(dir.lastPathComponent)/part-4*", "part-1.ndjson"],
                ]
                let reference = snapshot(try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 1))
                #expect(reference.count > 400)
                for globs in globOrders {
                    let resolved = try InputFiles.resolve(globs, base: base)
                    #expect(resolved == paths.map { InputFiles.absolute($0, base: "/") })
                    for threads in [1, 2, 4] {
                        let got = snapshot(
                            try TransactionReader.read(inputs: resolved.map(InputStores.lookUp), threads: threads))
                        #expect(got == reference, "globs \(globs), threads \(threads)")
                    }
                }
            }
        }

        /// Files are merged in the order they finish reading; the set must not show it.
        @Test func mergingFilesInAnyOrderGivesTheSameSetAndIds() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try randomWorld(in: dir, seed: 7)
                func read(order: [Int]) throws -> TransactionSet {
                    let merger = try Merger(count: paths.count)
                    for i in order {
                        let f = FileRows(path: paths[i], store: merger.store)
                        try NDJSONFormat().read(
                            input: InputStores.lookUp(paths[i]), inflater: .zlib, into: f, progress: { _ in })
                        merger.add(f, index: i)
                    }
                    return merger.finish(threads: 2)
                }
                let inOrder = try read(order: Array(paths.indices))
                #expect(inOrder.counters.duplicates > 100)
                for order in [Array(paths.indices.reversed()), [2, 0, 4, 1, 3]] {
                    let got = try read(order: order)
                    #expect(snapshot(got) == snapshot(inOrder), "order \(order)")
                    // The same ids for the same rows, not only the same strings.
                    func ids(_ set: TransactionSet) -> [[Int64]] {
                        set.rows.map { [$0.transactionId.raw, $0.originalTransactionId.raw, Int64($0.productId)] }
                            .sorted { $0.lexicographicallyPrecedes($1) }
                    }
                    #expect(ids(got) == ids(inOrder))
                    #expect(got.strings.count == inOrder.strings.count)
                }
            }
        }

        /// Deduplication cuts the keys into parts by their hashes, each part on a thread of its
        /// own: with parts of sixteen rows (about a hundred parts) the set is that of one part,
        /// whatever the order the files are merged in and the threads, with the rows of a state
        /// (newer and older versions of the files' transactions) looking their keys up in every part.
        @Test(arguments: [UInt64(42), 7, 1_234])
        func deduplicatingInPartsGivesTheSetOfOnePart(seed: UInt64) throws {
            try ReadSupport.withTempDir { dir in
                let paths = try randomWorld(in: dir, seed: seed)
                func read(order: [Int], partRows: Int, threads: Int) throws -> TransactionSet {
                    let merger = try Merger(count: paths.count + 1, partRows: partRows)
                    for i in order {
                        let f = FileRows(path: paths[i], store: merger.store)
                        try NDJSONFormat().read(
                            input: InputStores.lookUp(paths[i]), inflater: .zlib, into: f, progress: { _ in })
                        merger.add(f, index: i)
                    }
                    // The state's rows: versions of the world's transactions (tx0…tx399 of
                    // customers o0…o49), said to come from files 1 and 3, some signed later
                    // than any file's (they win), some earlier (they lose), some as late (the
                    // later file wins).
                    var state = StateRows(store: merger.store)
                    let group = state.table.intern("21482345")
                    let product = state.table.intern("com.example.pass.monthly")
                    var rng = SplitMix64(seed: seed &+ 1)
                    for _ in 0..<300 {
                        let n = rng.below(400)
                        var t = Transaction(
                            transactionId: TransactionKey("tx\(n)", table: state.table),
                            originalTransactionId: TransactionKey("o\(n % 50)", table: state.table),
                            subscriptionGroupId: group, productId: product, purchaseDate: 0,
                            expiresDate: 5_000 + Int64(rng.below(1000)))
                        t.signedDate = [Int64(30), 10, 19][rng.below(3)]
                        try state.add(t)
                        state.ranks.append(rng.below(2) == 0 ? 1 : 3)
                    }
                    merger.add(state, index: paths.count)
                    return merger.finish(threads: threads)
                }
                let one = try read(order: Array(paths.indices), partRows: 1 << 18, threads: 1)
                #expect(one.counters.duplicates > 100)
                // Some of the state's versions won, some lost.
                #expect(one.rows.contains { $0.expiresDate >= 5_000 })
                #expect(one.rows.contains { $0.expiresDate < 5_000 && $0.signedDate == 19 })
                for (order, threads) in [
                    (Array(paths.indices), 1), (Array(paths.indices.reversed()), 4), ([2, 0, 4, 1, 3], 2),
                ] {
                    let got = try read(order: order, partRows: 16, threads: threads)
                    #expect(snapshot(got) == snapshot(one), "order \(order), threads \(threads)")
                }
            }
        }

        @Test func keptRowsAreTheWinnersOfEveryFile() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        (
                            "a.jsonl",
                            [
                                line("a1", signed: 1, version: 1), line("shared", signed: 9, version: 1),
                                line("a2", signed: 1, version: 1),
                            ]
                        ),
                        ("b.jsonl", [line("b1", signed: 1, version: 1), line("shared", signed: 1, version: 2)]),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 2)
                let byId = Dictionary(uniqueKeysWithValues: set.rows.map { (set.strings.string($0.transactionId), $0) })
                #expect(byId.keys.sorted() == ["a1", "a2", "b1", "shared"])
                #expect(byId["shared"]?.signedDate == 9 && byId["shared"]?.expiresDate == 1_001)
            }
        }

        @Test func idsAreMergedIntoOneTable() throws {
            try ReadSupport.withTempDir { dir in
                let paths = try writeFiles(
                    [
                        ("a.jsonl", [TxLine(id: "1", original: "o").with("storefront", #""FRA""#).json]),
                        ("b.jsonl", [TxLine(id: "2", original: "o").with("storefront", #""FRA""#).json]),
                    ], in: dir)
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 2)
                #expect(set.rows.count == 2)
                #expect(set.rows[0].originalTransactionId == set.rows[1].originalTransactionId)
                #expect(set.rows[0].storefront == set.rows[1].storefront)
                #expect(set.rows[0].productId == set.rows[1].productId)
                #expect(TransactionKey.lookup("o", in: set.strings) == set.rows[0].originalTransactionId)
            }
        }

        @Test func progressAddsUpToTheStoredBytesOfEveryFile() throws {
            try ReadSupport.withTempDir { dir in
                let big = (0..<20000).map { TxLine(id: "b\($0)", signed: Int64($0)).json }
                let paths = try writeFiles(
                    [("a.jsonl.gz", big), ("b.jsonl", Array(big.prefix(3000))), ("c.jsonl.gz", [TxLine().json])],
                    in: dir)
                final class Total: @unchecked Sendable {
                    let lock = NSLock()
                    var bytes = 0
                    var calls = 0
                }
                let total = Total()
                let set = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: 3) { n in
                    total.lock.lock()
                    total.bytes += n
                    total.calls += 1
                    total.lock.unlock()
                }
                #expect(total.bytes == paths.map(InputFiles.size).reduce(0, +))
                #expect(set.inputs.map(\.bytes) == paths.map(InputFiles.size))
                #expect(total.calls > 3)
            }
        }

        @Test func noFilesGiveAnEmptySet() throws {
            let set = try TransactionReader.read(inputs: [].map(InputStores.lookUp), threads: 4)
            #expect(set.rows.isEmpty)
            #expect(set.counters == ReadCounters())
        }

        @Test func aBadFileAmongGoodOnesFailsTheReadWhateverTheThreads() throws {
            try ReadSupport.withTempDir { dir in
                var paths = try writeFiles([("a.jsonl.gz", [TxLine().json]), ("c.jsonl.gz", [TxLine().json])], in: dir)
                let bad = try ReadSupport.write(Array("not gzip".utf8), to: dir.appendingPathComponent("b.jsonl.gz"))
                paths.insert(bad, at: 1)
                for threads in [1, 3] {
                    #expect {
                        _ = try TransactionReader.read(inputs: paths.map(InputStores.lookUp), threads: threads)
                    } throws: { e in
                        (e as? WinBackError)?.code == .badData && (e as? WinBackError)?.path == bad
                    }
                }
            }
        }

        /// `explain`'s filter: tokens in any case, ids as given (docs/rules.md §2.1).
        @Test(
            "explain's filter keeps a token's rows whatever the case of the token asked for and of the rows",
            arguments: [
                "6f1c2d3e-abcd-4000-8000-00000000000a", "6F1C2D3E-ABCD-4000-8000-00000000000A",
                "6f1C2d3E-aBcD-4000-8000-00000000000a",
            ])
        func filterTokensInAnyCase(asked: String) {
            let table = StringTable()
            func row(original: String, token: String?) -> Transaction {
                var t = Transaction(
                    transactionId: TransactionKey("t-" + original, table: table),
                    originalTransactionId: TransactionKey(original, table: table), subscriptionGroupId: 0, productId: 0,
                    purchaseDate: 0, expiresDate: 1)
                if let token { t.appAccountToken = AppAccountToken.parse(token, table: table)! }
                return t
            }
            let rows = [
                row(original: "1", token: "6f1c2d3e-abcd-4000-8000-00000000000a"),
                row(original: "2", token: "6F1C2D3E-ABCD-4000-8000-00000000000A"),
                row(original: "3", token: "6F1c2D3e-AbCd-4000-8000-00000000000A"),
                row(original: "4", token: "6f1c2d3e-abcd-4000-8000-00000000000b"),
                row(original: "5", token: "7F1C2D3E-ABCD-4000-8000-00000000000A"),
                row(original: "6", token: nil),
            ]
            #expect(rows[2].appAccountToken.kind == .interned)
            let keys = CustomerFilter.Keys([asked], table: table)
            #expect(rows.map(keys.keeps) == [true, true, true, false, false, false])
            // An originalTransactionId is matched as given; an id that is neither keeps nothing.
            #expect(
                rows.map(CustomerFilter.Keys(["5"], table: table).keeps) == [false, false, false, false, true, false])
            #expect(rows.map(CustomerFilter.Keys(["6F1C"], table: table).keeps).allSatisfy { !$0 })
        }
    }
}
