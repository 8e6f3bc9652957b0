// swift-tools-version:6.0
// The benchmarks are a package of their own so that users of ReactiveUV never
// resolve SwiftNIO or OpenCombine. Run everything with `Benchmarks/run`.
import PackageDescription

let package = Package(
    name: "ReactiveUVBenchmarks",
    dependencies: [
        .package(name: "ReactiveUV", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/OpenCombine/OpenCombine.git", from: "0.14.0"),
        // The TLS scenarios' NIO anchor (BoringSSL, vendored).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        .target(name: "CBaselines", linkerSettings: [.linkedLibrary("uv"), .linkedLibrary("pthread"), .linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .target(name: "MallocCounter"),
        // The simulation speed workload, shared by the runner and Profile.
        .target(name: "SimulationWorkload", dependencies: [
            .product(name: "ReactiveUV", package: "ReactiveUV"), .product(name: "ReactiveUVTesting", package: "ReactiveUV"),
        ]),
        .executableTarget(
            name: "ReactiveUVBenchmarks",
            dependencies: [
                "CBaselines",
                "MallocCounter",
                "SimulationWorkload",
                .product(name: "ReactiveUV", package: "ReactiveUV"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ]
        ),
        .executableTarget(
            name: "ServeBenchServer",
            dependencies: [
                "CBaselines",
                .product(name: "ReactiveUV", package: "ReactiveUV"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(name: "Profile", dependencies: ["CBaselines", "SimulationWorkload", .product(name: "ReactiveUV", package: "ReactiveUV"), .product(name: "OpenCombine", package: "OpenCombine")]),
    ],
    swiftLanguageModes: [.v6]
)
