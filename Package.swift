// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactiveUV",
    products: [
        .library(name: "ReactiveUV", targets: ["ReactiveUV"]),
        .library(name: "ReactiveUVTesting", targets: ["ReactiveUVTesting"]),
        .executable(name: "timer", targets: ["timer"]),
        .executable(name: "echo", targets: ["echo"]),
        .executable(name: "echo-async", targets: ["echo-async"]),
        .executable(name: "filewatch", targets: ["filewatch"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            path: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // The per-thread current scheduler and loop, as C `__thread` variables (an inline read, no call).
        .target(name: "CReactiveUVThreadLocal"),
        .target(name: "ReactiveUV", dependencies: ["CLibUV", "CReactiveUVThreadLocal"]),
        .target(name: "ReactiveUVTesting", dependencies: ["ReactiveUV"]),
        .target(name: "SampleSupport", path: "samples/SampleSupport"),
        .executableTarget(name: "timer", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/timer"),
        // The echo server's logic, shared by the `echo` executable and the tests.
        .target(name: "EchoServerKit", dependencies: ["ReactiveUV"], path: "samples/EchoServerKit"),
        .executableTarget(name: "echo", dependencies: ["ReactiveUV", "EchoServerKit", "SampleSupport"], path: "samples/echo"),
        .executableTarget(name: "echo-async", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/echo-async"),
        .executableTarget(name: "filewatch", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/filewatch"),
        // Live-heap measurement for the memory-bound tests (mallinfo2 or the sanitizer allocator).
        .target(name: "CTestSupport", path: "Tests/CTestSupport"),
        .testTarget(name: "ReactiveUVTests", dependencies: ["ReactiveUV", "ReactiveUVTesting", "CLibUV", "EchoServerKit", "CTestSupport"]),
        // Long, heavy runs (scripts/sanitize skips them; scripts/test runs them).
        .testTarget(name: "StressTests", dependencies: ["ReactiveUV", "ReactiveUVTesting"]),
        .testTarget(name: "ReactiveUVTestingTests", dependencies: ["ReactiveUV", "ReactiveUVTesting", "CLibUV"]),
    ],
    swiftLanguageModes: [.v6]
)
