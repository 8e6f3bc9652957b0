// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactiveUV",
    products: [
        .library(name: "ReactiveUV", targets: ["ReactiveUV"]),
        .library(name: "ReactiveUVTesting", targets: ["ReactiveUVTesting"]),
        // EventLoop and EventLoopGroup as swift-service-lifecycle services: a product of its own,
        // so programs that only use ReactiveUV do not build or link ServiceLifecycle.
        .library(name: "ReactiveUVServiceLifecycle", targets: ["ReactiveUVServiceLifecycle"]),
        .executable(name: "timer", targets: ["timer"]),
        .executable(name: "echo", targets: ["echo"]),
        .executable(name: "echo-async", targets: ["echo-async"]),
        .executable(name: "server", targets: ["server"]),
        .executable(name: "server-await", targets: ["server-await"]),
        .executable(name: "filewatch", targets: ["filewatch"]),
        .executable(name: "lines", targets: ["lines"]),
        .executable(name: "tail", targets: ["tail"]),
        .executable(name: "chaos", targets: ["chaos"]),
    ],
    dependencies: [
        // Loop metrics (opt-in, see Loop/LoopMetrics.swift) and signal event logging.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),  // `swift package generate-documentation` (scripts/docs); a command plugin, nothing linked
        // Only the ReactiveUVServiceLifecycle product depends on it.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            path: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // TLS on the streams: Debian's OpenSSL 3, so its security updates reach users through the system.
        .systemLibrary(
            name: "COpenSSL",
            path: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // The per-thread current scheduler and loop, as C `__thread` variables (an inline read, no call).
        .target(name: "CReactiveUVThreadLocal"),
        // Separators found 64 bytes at a time (AVX2 or SSE2) and a short line copied inline: `lines()`, `split(separator:)`.
        .target(name: "CReactiveUVByteScan"),
        // The signal algebra: signals, subscriptions, subjects, operators, disposables, schedulers,
        // properties. Plain Swift: it cannot import CLibUV (the compiler enforces the layering).
        .target(name: "ReactiveUVCore", dependencies: [
            "CReactiveUVThreadLocal",
            "CReactiveUVByteScan",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Loops, I/O families and the async bridges on libuv; re-exports ReactiveUVCore.
        .target(name: "ReactiveUV", dependencies: [
            "ReactiveUVCore",
            "CLibUV",
            "COpenSSL",
            "CReactiveUVThreadLocal",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "ReactiveUVTesting", dependencies: ["ReactiveUVCore", "ReactiveUV"]),
        .target(name: "ReactiveUVServiceLifecycle", dependencies: [
            "ReactiveUV",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // What every sample does alike: argument parsing, unbuffered output, the main-thread loop, Ctrl-C.
        .target(name: "SampleSupport", dependencies: ["ReactiveUV"], path: "samples/SampleSupport"),
        .executableTarget(name: "timer", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/timer"),
        // The echo server's logic, shared by the `echo` executable and the tests.
        .target(name: "EchoServerKit", dependencies: ["ReactiveUV"], path: "samples/EchoServerKit"),
        .executableTarget(name: "echo", dependencies: ["ReactiveUV", "EchoServerKit", "SampleSupport"], path: "samples/echo"),
        .executableTarget(name: "server", dependencies: ["ReactiveUV"], path: "samples/server"),
        .executableTarget(name: "server-await", dependencies: ["ReactiveUV"], path: "samples/server-await"),
        // The echo-async server's logic, shared by the `echo-async` executable and the tests.
        .target(name: "EchoAsyncKit", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/EchoAsyncKit"),
        .executableTarget(name: "echo-async", dependencies: ["ReactiveUV", "EchoAsyncKit", "SampleSupport"], path: "samples/echo-async"),
        .executableTarget(name: "filewatch", dependencies: ["ReactiveUV", "SampleSupport"], path: "samples/filewatch"),
        // The lines sample's numbering and writing, shared by the `lines` executable and the tests.
        .target(name: "LinesKit", dependencies: ["ReactiveUV"], path: "samples/LinesKit"),
        .executableTarget(name: "lines", dependencies: ["ReactiveUV", "LinesKit", "SampleSupport"], path: "samples/lines"),
        // The tail sample's logic (last lines, -F), shared by the `tail` executable and the tests.
        .target(name: "TailKit", dependencies: ["ReactiveUV"], path: "samples/TailKit"),
        .executableTarget(name: "tail", dependencies: ["ReactiveUV", "TailKit", "SampleSupport"], path: "samples/tail"),
        // The echo server under seeded faults on the simulated network: one seed, one trace.
        .executableTarget(name: "chaos", dependencies: ["ReactiveUV", "ReactiveUVTesting", "EchoServerKit", "SampleSupport"],
                          path: "samples/chaos"),
        // Live-heap measurement for the memory-bound tests (mallinfo2 or the sanitizer allocator).
        .target(name: "CTestSupport", path: "Tests/CTestSupport"),
        .testTarget(name: "ReactiveUVTests", dependencies: [
            "ReactiveUVCore", "ReactiveUV", "ReactiveUVTesting", "CLibUV", "EchoServerKit", "EchoAsyncKit", "TailKit", "LinesKit", "CTestSupport", "CReactiveUVByteScan",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "MetricsTestKit", package: "swift-metrics"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "InMemoryLogging", package: "swift-log"),
        ]),
        // Long, heavy runs (scripts/sanitize skips them; scripts/test runs them).
        .testTarget(name: "StressTests", dependencies: ["ReactiveUVCore", "ReactiveUV", "ReactiveUVTesting", "EchoServerKit", "CTestSupport"]),
        .testTarget(name: "ReactiveUVTestingTests", dependencies: ["ReactiveUVCore", "ReactiveUV", "ReactiveUVTesting", "CLibUV"]),
        .testTarget(name: "ReactiveUVServiceLifecycleTests", dependencies: [
            "ReactiveUV", "ReactiveUVTesting", "ReactiveUVServiceLifecycle", "EchoServerKit",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            .product(name: "Logging", package: "swift-log"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
