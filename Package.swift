// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "winback",
    // Linux only: the library calls Glibc (mmap, posix_spawn, mallopt) behind
    // Sources/WinBackSupport/System.swift.
    products: [
        .executable(name: "winback", targets: ["winback"]),
        // What users link: WinBack, which re-exports the layers below it.
        .library(name: "WinBack", targets: ["WinBack"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        // Up to the next minor only: ChainVerifier imports the `FixedExpiryValidationTime` SPI
        // (`RFC5280Policy(fixedExpiryValidationTime:)`, new in 1.21), which a minor release may change.
        .package(url: "https://github.com/apple/swift-certificates", .upToNextMinor(from: "1.21.0")),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(
            name: "CLibXML2", path: "Sources/CLibXML2", pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]),
        // libcurl's header only: the library is loaded when a run first speaks to S3.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // libpq's header only: the library is loaded when a run first speaks to PostgreSQL.
        .systemLibrary(name: "CPQ", path: "Sources/CPQ", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CWinBackShims", path: "Sources/CWinBackShims"),
        // ISA-L's inflater, optional: used when its header (libisal-dev) is there at build time
        // and libisal loads at run time.
        .systemLibrary(name: "CIsal", path: "Sources/CIsal"),
        // The layers, lowest first: a target imports only those above it in this list, so a
        // reach back up does not compile (docs/architecture.md, "Targets").
        .target(name: "WinBackSupport", dependencies: ["CWinBackShims"]),
        .target(name: "WinBackModel", dependencies: ["WinBackSupport", "CWinBackShims"]),
        // Object storage: AWS Signature Version 4, credentials, and an S3 client on libcurl
        // (docs/architecture.md, "Object storage").
        .target(
            name: "WinBackS3",
            dependencies: ["WinBackSupport", "CCurl", .product(name: "Crypto", package: "swift-crypto")]),
        // PostgreSQL: a client on libpq, for the tables pipelines read and write (docs/rules.md §14).
        .target(name: "WinBackPostgres", dependencies: ["WinBackSupport", "CPQ"]),
        .target(
            name: "WinBackRead",
            dependencies: [
                "WinBackS3", "WinBackPostgres", "WinBackModel", "WinBackSupport", "CZlib", "CIsal", "CWinBackShims",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]),
        .target(
            name: "WinBackRules",
            dependencies: [
                "WinBackModel", "WinBackSupport", "CWinBackShims", .product(name: "Crypto", package: "swift-crypto"),
            ]),
        .target(
            name: "WinBackWrite",
            dependencies: [
                "WinBackRules", "WinBackRead", "WinBackModel", "WinBackSupport", "CZlib", "CLibXML2",
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // What a run is given: the pipeline file parsed and checked (docs/rules.md §2.5), the rates it
        // names, the pipeline resolved with the command line, and the progress a run reports.
        .target(
            name: "WinBackPipeline",
            dependencies: [
                "WinBackRules", "WinBackRead", "WinBackS3", "WinBackPostgres", "WinBackModel",
                "WinBackSupport", .product(name: "Yams", package: "Yams"),
            ]),
        // Why a customer is or is not eligible, step by step (`winback explain`, docs/rules.md §5).
        .target(
            name: "WinBackExplain",
            dependencies: ["WinBackRules", "WinBackRead", "WinBackModel", "WinBackSupport"]),
        // Incremental state (docs/rules.md §12): the folder a run keeps between nights, its
        // ledger, the rows it absorbed and the next state written as the merge hands them over.
        .target(
            name: "WinBackIncremental",
            dependencies: [
                "WinBackPipeline", "WinBackWrite", "WinBackRead", "WinBackS3", "WinBackModel", "WinBackSupport",
            ]),
        // Run history: the runs published before, the baseline a run compares with and the files
        // its manifest lists, pruning (docs/rules.md §6.3, §10.5).
        .target(
            name: "WinBackHistory",
            dependencies: [
                "WinBackPipeline", "WinBackWrite", "WinBackS3", "WinBackModel", "WinBackSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // Delivery: the segment changes against the baseline, the identities joined to the segment
        // lists (in memory or split on disk), every destination's files and who exited them.
        .target(
            name: "WinBackDelivery",
            dependencies: [
                "WinBackHistory", "WinBackPipeline", "WinBackWrite", "WinBackRules", "WinBackRead", "WinBackModel",
                "WinBackSupport", .product(name: "Crypto", package: "swift-crypto"),
            ]),
        .target(
            name: "WinBack",
            dependencies: [
                "WinBackDelivery", "WinBackHistory", "WinBackIncremental", "WinBackExplain", "WinBackPipeline",
                "WinBackWrite",
                "WinBackRules", "WinBackRead", "WinBackS3", "WinBackPostgres", "WinBackModel", "WinBackSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // Test-only code: the world generator, the test chain and its signer. Used by the tests
        // and by `winback generate`/`bench`; not in the library product. It writes worlds with the
        // layers' own writers, so it sits beside WinBack, not above it.
        .target(
            name: "WinBackTesting",
            dependencies: [
                "WinBackWrite", "WinBackRules", "WinBackRead", "WinBackPostgres", "WinBackModel", "WinBackSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]),
        .executableTarget(
            name: "winback",
            dependencies: [
                "WinBack", "WinBackTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        // The helpers both test targets use (test worlds, paths, golden files, the read, signed and
        // report helpers): one module, not in a product. It starts no process; what does
        // (`CLI`) is in the slow target only.
        .target(
            name: "WinBackTestSupport",
            dependencies: [
                "WinBackTesting", "WinBackWrite", "WinBackRules", "WinBackRead", "WinBackModel", "WinBackSupport",
                "CZlib", .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/Shared"),
        .testTarget(
            name: "WinBackTests",
            dependencies: [
                "WinBackTestSupport", "WinBack", "WinBackTesting", "WinBackDelivery", "WinBackHistory",
                "WinBackIncremental", "WinBackPipeline", "WinBackWrite",
                "WinBackRules", "WinBackRead", "WinBackS3", "WinBackPostgres", "WinBackModel", "WinBackSupport",
                "CZlib",
                .product(name: "X509", package: "swift-certificates"),
            ],
            resources: [.copy("Fixtures")]),
        // End to end, generated worlds, fuzz, the command line, hostile input: `swift test` runs
        // both targets, `swift test --filter WinBackTests` only the quick one, which starts no
        // process. The fixtures stay in WinBackTests/Fixtures, found by path.
        .testTarget(
            name: "WinBackSlowTests",
            dependencies: [
                "WinBackTestSupport", "WinBack", "WinBackTesting", "WinBackDelivery", "WinBackWrite", "WinBackRules",
                "WinBackRead", "WinBackS3", "WinBackModel", "WinBackSupport",
                .product(name: "X509", package: "swift-certificates"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
