// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactiveUV",
    products: [
        .library(name: "ReactiveUV", targets: ["ReactiveUV"]),
        .library(name: "ReactiveUVTesting", targets: ["ReactiveUVTesting"]),
        .executable(name: "timer", targets: ["timer"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            path: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        .target(name: "ReactiveUV", dependencies: ["CLibUV"]),
        .target(name: "ReactiveUVTesting", dependencies: ["ReactiveUV"]),
        .target(name: "SampleSupport", path: "samples/SampleSupport"),
        .executableTarget(name: "timer", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/timer"),
        .testTarget(name: "ReactiveUVTests", dependencies: ["ReactiveUV", "ReactiveUVTesting", "CLibUV"]),
        .testTarget(name: "ReactiveUVTestingTests", dependencies: ["ReactiveUV", "ReactiveUVTesting", "CLibUV"]),
    ],
    swiftLanguageModes: [.v6]
)
