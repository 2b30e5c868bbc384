// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "winback",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "winback", targets: ["winback"]),
        .library(name: "WinBack", targets: ["WinBack"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(
            name: "CLibXML2", path: "Sources/CLibXML2", pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(name: "CSystem", path: "Sources/CSystem"),
        // ISA-L's inflater, optional: used when its header (libisal-dev) is there at build time
        // and libisal loads at run time.
        .systemLibrary(name: "CIsal", path: "Sources/CIsal"),
        .target(
            name: "WinBack",
            dependencies: [
                "CZlib", "CLibXML2", "CSystem", "CIsal",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: [
                // The hot loops touch class storage (scanner, string tables) millions of times;
                // dynamic exclusivity checks there cost about 7% of a run. Debug builds keep them.
                .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
            ]),
        .executableTarget(
            name: "winback",
            dependencies: [
                "WinBack",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .testTarget(
            name: "WinBackTests",
            dependencies: ["WinBack", "CLibXML2"],
            resources: [.copy("Fixtures")]),
    ],
    swiftLanguageModes: [.v5]
)
