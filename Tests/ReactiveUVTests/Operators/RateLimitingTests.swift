import ReactiveUV
import ReactiveUVTesting
import XCTest

final class RateLimitingTests: XCTestCase {
    private func run<Output>(_ timed: [(Int, Event<Int>)], _ apply: (Signal<Int>) -> Signal<Output>) -> [String] {
        let test = TestScheduler()
        let recorder = test.record(apply(TestSource(timed).signal))
        test.run()
        return recorder.timeline
    }

    // MARK: debounce (RAC 2's throttle)

    func testDebounceIsRAC2sThrottle() {
        let bursty = events((10, .next(1)), (20, .next(2)), (50, .next(3)), (100, Event<Int>.completed))
        XCTAssertEqual(run(bursty) { $0.debounce(.milliseconds(15)) }, ["next(2)@35", "next(3)@65", "completed@100"])
        XCTAssertEqual(run(bursty) { $0.debounce(.milliseconds(15)) }, run(bursty) { $0.throttle(.milliseconds(15)) })
    }

    func testDebounceCompletionFlushesAndErrorDiscardsThePendingValue() {
        let completing = events((10, .next(1)), (20, .next(2)), (25, Event<Int>.completed))
        XCTAssertEqual(run(completing) { $0.debounce(.milliseconds(15)) }, ["next(2)@25", "completed@25"])
        let failing = events((10, .next(1)), (20, .error(TestError())))
        XCTAssertEqual(run(failing) { $0.debounce(.milliseconds(15)) }, ["error(boom)@20"])
        assertPropagatesErrorAndDisposal("debounce") { $0.debounce(.milliseconds(1)) }
        assertFinishedPipelineIsFreed("debounce") { signal, token in
            signal.debounce(.milliseconds(1)).map { value -> Int in token.touch(); return value }
        }
    }

    // MARK: throttle(_:latest:) (the rate limiter)

    /// 1, 2, 3 in a burst at 10-15 ms, 4 at 25, 5 at 42, 6 at 47, completion at 49; a 10 ms window.
    private let burst = events((10, .next(1)), (12, .next(2)), (15, .next(3)), (25, .next(4)), (42, .next(5)), (47, .next(6)),
                               (49, Event<Int>.completed))

    func testThrottleFirstSendsTheFirstValueOfEachWindowAtOnce() {
        // Windows 10-20 (2, 3 dropped), 25-35, 42-52 (6 dropped); nothing kept, so completion is at once.
        XCTAssertEqual(run(burst) { $0.throttle(.milliseconds(10), latest: false) },
                       ["next(1)@10", "next(4)@25", "next(5)@42", "completed@49"])
    }

    func testThrottleLatestSendsTheNewestValueAtTheEndOfEachWindow() {
        // 1 at once (window 10-20); 3, the newest of the window, at 20 (window 20-30); 4 at 30 (window 30-40);
        // the window at 40 ends empty, so 5 goes at once (window 42-52); 6 waits for 52, and the completion with it.
        XCTAssertEqual(run(burst) { $0.throttle(.milliseconds(10), latest: true) },
                       ["next(1)@10", "next(3)@20", "next(4)@30", "next(5)@42", "next(6)@52", "completed@52"])
    }

    func testThrottleLatestDisposesTheSourceAtItsEndAndAnErrorDiscardsTheKeptValue() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (12, .next(2)), (14, .completed)))
        let recorder = test.record(source.signal.throttle(.milliseconds(10), latest: true))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@20", "completed@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@14"], "the source ends at once; its completion waits")

        let failing = events((10, .next(1)), (12, .next(2)), (15, .error(TestError())))
        XCTAssertEqual(run(failing) { $0.throttle(.milliseconds(10), latest: true) }, ["next(1)@10", "error(boom)@15"])

        let waiting = TestScheduler()
        let pending = waiting.record(TestSource<Int>(events((10, .next(1)), (12, .next(2)), (14, .completed))).signal
            .throttle(.milliseconds(10), latest: true))
        waiting.at(16) { pending.dispose() }
        waiting.run()
        XCTAssertEqual(pending.timeline, ["next(1)@10"], "disposing cancels the kept value and the waiting completion")
        XCTAssertEqual(waiting.pendingCount, 0)
        for latest in [false, true] {
            assertPropagatesErrorAndDisposal("throttle(latest: \(latest))") { $0.throttle(.milliseconds(5), latest: latest) }
            assertFinishedPipelineIsFreed("throttle(latest: \(latest))") { signal, token in
                signal.throttle(.milliseconds(5), latest: latest).map { value -> Int in token.touch(); return value }
            }
        }
    }

    func testRateLimitingRunsOnTheLoopsTimersAndClosesThem() {
        let report = LoopHarness.run { harness in
            let ticks = Signal<Int>.interval(.milliseconds(1)).take(30)
            let limited = try harness.record(ticks.throttle(.milliseconds(20), latest: true))
            let idle = try harness.record(Signal<Int>.never.timeout(idle: .milliseconds(5)))
            XCTAssertEqual(try limited.waitForTermination(), .completed)
            let values = limited.values
            XCTAssertEqual(values.first, 0, "the first value goes at once")
            XCTAssertEqual(values.last, 29, "the newest value of the last window is sent before completion")
            XCTAssertLessThan(values.count, 30, "values inside a window are not all sent: \(values)")
            let times = limited.recorded.filter { !$0.event.isTerminating }.map(\.time.nanoseconds)
            for (earlier, later) in zip(times, times.dropFirst()) {
                XCTAssertGreaterThanOrEqual(later - earlier, 19_000_000, "two values less than a window apart: \(limited.timeline)")
            }
            XCTAssertEqual(try idle.waitForTermination(), .error(TimeoutError.idleTimeoutOperator(after: .milliseconds(5))))
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
