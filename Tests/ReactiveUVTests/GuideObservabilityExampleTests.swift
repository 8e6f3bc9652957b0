import Logging
import ReactiveUV
import XCTest

/// Keeps the example of docs/guides/observability.md compiling and runs it.
final class GuideObservabilityExampleTests: XCTestCase {
    private static func observabilityExample() {
        // GUIDE-OBSERVABILITY-BEGIN
        // Metrics for one loop, sampled every second, made by the factory the
        // program bootstrapped with MetricsSystem.bootstrap (your backend).
        let loop = EventLoop(name: "io", metrics: .enabled(interval: .seconds(1)))

        // Or for every loop made from now on (EventLoop.shared included, if not started yet).
        LoopMetrics.default = .enabled(interval: .seconds(5))

        // Signal events through swift-log: for one signal ...
        var logger = Logger(label: "app.signals")
        logger.logLevel = .trace
        let ticks = Signal<Int>.interval(.milliseconds(100), on: loop).named("ticks").logEvents(to: logger)
        let subscription = ticks.subscribeNext { _ in }

        // ... or for every subscription made from now on.
        SignalLogging.logger = logger

        subscription.dispose()
        SignalLogging.logger = nil
        LoopMetrics.default = .disabled
        loop.shutdown()
        // GUIDE-OBSERVABILITY-END
    }

    func testTheObservabilityExampleIsThisCodeAndRuns() throws {
        try assertDocumentBlock("docs/guides/observability.md", containing: "EventLoop(name: \"io\", metrics:", matches: "GUIDE-OBSERVABILITY")
        GuideObservabilityExampleTests.observabilityExample()
        XCTAssertFalse(LoopMetrics.default.isEnabled)
        XCTAssertNil(SignalLogging.logger)
    }
}
