import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class TimerSignalTests: XCTestCase {
    func testTimerSendsOnceNoEarlierThanItsDelayThenCompletes() throws {
        try checked { harness in
            let start = SchedulerInstant.now
            let recorder = try harness.record(Signal<Void>.timer(after: .milliseconds(15)))
            try recorder.waitForTermination()
            XCTAssertEqual(recorder.events.count, 2)
            XCTAssertNotNil(recorder.events.first?.value)
            XCTAssertGreaterThanOrEqual(recorder.recorded[0].time - start, .milliseconds(15))
        }
    }

    func testIntervalCountsTicksWithoutDrift() throws {
        try checked { harness in
            let start = SchedulerInstant.now
            let recorder = try harness.record(Signal<Int>.interval(.milliseconds(10)))
            let values = try recorder.waitForValues(5)
            XCTAssertEqual(Array(values.prefix(5)), [0, 1, 2, 3, 4])
            for (index, entry) in recorder.recorded.prefix(5).enumerated() {
                XCTAssertGreaterThanOrEqual(entry.time - start, .milliseconds(10 * (index + 1)))
            }
        }
    }

    func testANonPositiveIntervalIsAnError() throws {
        try checked { harness in
            for interval in [Duration.zero, .milliseconds(-5)] {
                let recorder = try harness.record(Signal<Int>.interval(interval))
                let terminal = try recorder.waitForTermination()
                let error = terminal.error as? UVError
                XCTAssertEqual(error?.name, "EINVAL")
                XCTAssertTrue(error?.message.contains("interval must be positive") == true)
            }
        }
    }

    /// Subscribed from a plain thread the subscription lives on the shared loop,
    /// while its timer runs on the explicit virtual clock.
    func testTimersRunOnAnExplicitScheduler() throws {
        let test = TestScheduler()
        let recorder = EventRecorder(Signal<Void>.timer(after: .seconds(30), on: test))
        waitUntil("the timer to be scheduled on the test clock") { test.pendingCount == 1 }
        test.advance(by: .seconds(29))
        XCTAssertEqual(test.executedCount, 0)
        test.advance(by: .seconds(1))
        try recorder.waitForTermination()
        XCTAssertEqual(recorder.events.count, 2)
        XCTAssertTrue(recorder.recorded.allSatisfy { $0.loopName == "shared" }, "delivered on the subscription's home")
    }

    /// A loop that shuts down with a timer or an interval pending tells their subscribers
    /// (`EventLoopError.shutDown`) instead of leaving them waiting forever, whether the
    /// subscription's home is that loop or another one (here the shared loop, as for a
    /// blocking `first()` called off any loop).
    func testLoopShutdownEndsPendingTimersAndIntervalsWithShutDown() throws {
        let loop = EventLoop(name: "timers-shutdown")
        let onLoop = Locked<[EventRecorder<Int>]>([])
        loop.execute {
            let recorders = [
                EventRecorder(Signal<Void>.timer(after: .seconds(3600)).map { 0 }),
                EventRecorder(Signal<Int>.interval(.milliseconds(2))),
                EventRecorder(Signal<Void>.timer(after: .seconds(3600), on: loop.loopTimeScheduler).map { 0 }),
                EventRecorder(Signal<Int>.interval(.seconds(3600), on: loop.loopTimeScheduler)),
            ]
            onLoop.withLock { $0 = recorders }
        }
        waitUntil("the recorders on the loop") { onLoop.current.count == 4 }
        // Home is EventLoop.shared; the timers run on `loop`.
        let elsewhere = [
            EventRecorder(Signal<Void>.timer(after: .seconds(3600), on: loop).map { 0 }),
            EventRecorder(Signal<Int>.interval(.seconds(3600), on: loop)),
        ]
        waitUntil("the interval to tick") { onLoop.current[1].values.count >= 2 }
        waitUntil("the timers to be pending") { (try? loop.openHandles().count) == 6 }
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        for (index, recorder) in (onLoop.current + elsewhere).enumerated() {
            let terminal = try recorder.waitForTermination(timeout: .seconds(5))
            XCTAssertEqual(terminal.error as? EventLoopError, .shutDown(loop: "timers-shutdown"), "recorder \(index)")
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

final class UnixSignalTests: XCTestCase {
    func testDeliversSignalsWhileSubscribedAndStopsAfterDispose() throws {
        let report = LoopHarness.run { harness in
            let recorder = try harness.record(Signal<Int32>.unixSignals([SIGUSR1, SIGUSR2]))
            try harness.wait(for: "two signal handles") { (try? harness.loop.openHandles().count) == 2 }
            kill(getpid(), SIGUSR2)
            kill(getpid(), SIGUSR1)
            try recorder.waitForValues(2)
            XCTAssertEqual(Set(recorder.values), [SIGUSR1, SIGUSR2])
            recorder.dispose()
            _ = try harness.onLoop {}
            XCTAssertEqual(try harness.loop.openHandles(), [])
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testAnInvalidSignalNumberIsAnError() throws {
        let report = LoopHarness.run { harness in
            let recorder = try harness.record(Signal<Int32>.unixSignals([SIGUSR1, 12345]))
            let terminal = try recorder.waitForTermination()
            XCTAssertEqual((terminal.error as? UVError)?.name, "EINVAL")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testNeedsALoop() {
        let test = TestScheduler()
        let recorder = test.performAsCurrent { EventRecorder(Signal<Int32>.unixSignals([SIGUSR1])) }
        let error = recorder.terminal?.error as? UVError
        XCTAssertEqual(error?.name, "EINVAL")
        XCTAssertTrue(error?.message.contains("needs an EventLoop") == true, "\(String(describing: error))")
    }
}
