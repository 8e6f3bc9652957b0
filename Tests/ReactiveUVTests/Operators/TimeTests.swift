import ReactiveUV
import ReactiveUVTesting
import XCTest

final class TimeTests: XCTestCase {
    private func run<Output>(_ timed: [(Int, Event<Int>)], _ apply: (Signal<Int>) -> Signal<Output>) -> [String] {
        let test = TestScheduler()
        let recorder = test.record(apply(TestSource(timed).signal))
        test.run()
        return recorder.timeline
    }

    // MARK: throttle (RAC 2: a debounce)

    func testThrottleSendsAValueOnlyAfterAQuietInterval() {
        let bursty = events((10, .next(1)), (20, .next(2)), (50, .next(3)), (100, Event<Int>.completed))
        // 1 is replaced by 2 before it was due; 2 survives 15 ms of quiet (due at 35); so does 3 (due at 65).
        XCTAssertEqual(run(bursty) { $0.throttle(.milliseconds(15)) }, ["next(2)@35", "next(3)@65", "completed@100"])
    }

    func testThrottleCompletionFlushesThePendingValue() {
        let timed = events((10, .next(1)), (20, .next(2)), (25, Event<Int>.completed))
        XCTAssertEqual(run(timed) { $0.throttle(.milliseconds(15)) }, ["next(2)@25", "completed@25"])
    }

    func testThrottleErrorDiscardsThePendingValue() {
        let timed = events((10, .next(1)), (20, .error(TestError())))
        XCTAssertEqual(run(timed) { $0.throttle(.milliseconds(15)) }, ["error(boom)@20"])
        assertPropagatesErrorAndDisposal("throttle") { $0.throttle(.milliseconds(1)) }
        assertFinishedPipelineIsFreed("throttle") { signal, token in
            signal.throttle(.milliseconds(1)).map { value -> Int in token.touch(); return value }
        }
    }

    func testThrottleKeepsOneTimerPerQuietPeriod() {
        // A value every millisecond for 100 ms, then quiet: only the last is sent, 10 ms after it.
        let test = TestScheduler()
        let subject = Subject<Int>()
        let recorder = test.record(subject.throttle(.milliseconds(10)))
        for n in 1...100 { test.at(n) { subject.sendNext(n) } }
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(100)@110"])
        XCTAssertLessThan(test.executedCount, 100 + 20, "the debounce must re-arm one timer, not schedule one per value")
    }

    // MARK: delay

    func testDelayShiftsValuesAndCompletionButNotErrors() {
        let timed = events((10, .next(1)), (12, .next(2)), (30, Event<Int>.completed))
        XCTAssertEqual(run(timed) { $0.delay(.milliseconds(5)) }, ["next(1)@15", "next(2)@17", "completed@35"])
        let failing = events((10, .next(1)), (12, .error(TestError())))
        XCTAssertEqual(run(failing) { $0.delay(.milliseconds(5)) }, ["error(boom)@12"], "an error is not delayed and drops waiting values")
        assertPropagatesErrorAndDisposal("delay") { $0.delay(.milliseconds(1)) }
    }

    func testDisposingADelayCancelsWhatIsWaiting() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (11, .completed)))
        let recorder = test.record(source.signal.delay(.milliseconds(50)))
        test.at(30) { recorder.dispose() }
        test.run()
        XCTAssertEqual(recorder.timeline, [])
        XCTAssertEqual(test.pendingCount, 0)
    }

    // MARK: timeout

    func testTimeoutFailsWhenTheSignalDoesNotEndInTime() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (50, .completed)))
        let recorder = test.record(source.signal.timeout(.milliseconds(30)))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "error(timed out after 0.03 seconds waiting for the signal to end (timeout operator))@30"])
        XCTAssertEqual(recorder.terminal, .error(TimeoutError.timeoutOperator(after: .milliseconds(30))))
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@30"])
    }

    func testTimeoutDoesNothingWhenTheSignalEndsInTime() {
        let test = TestScheduler()
        let recorder = test.record(TestSource<Int>(events((10, .next(1)), (20, .completed))).signal.timeout(.milliseconds(30)))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "completed@20"])
        XCTAssertEqual(test.pendingCount, 0, "the timeout's timer is cancelled")
        assertPropagatesErrorAndDisposal("timeout") { $0.timeout(.seconds(1)) }
    }

    // MARK: timeout(idle:)

    func testIdleTimeoutRestartsWithEachValue() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (25, .next(2)), (60, .next(3)), (70, .completed)))
        let idle = test.record(source.signal.timeout(idle: .milliseconds(30)))
        let whole = test.record(TestSource<Int>(events((10, .next(1)), (25, .next(2)))).signal.timeout(.milliseconds(30)))
        test.run()
        // Deadlines 30, then 40 after the value at 10, then 55 after the value at 25: quiet from 25 to 55.
        XCTAssertEqual(idle.timeline, ["next(1)@10", "next(2)@25",
                                       "error(timed out after 0.03 seconds waiting for the next value (idle timeout operator))@55"])
        XCTAssertEqual(idle.terminal, .error(TimeoutError.idleTimeoutOperator(after: .milliseconds(30))))
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@55"])
        XCTAssertEqual(whole.timeline.last, "error(timed out after 0.03 seconds waiting for the signal to end (timeout operator))@30",
                       "the whole-signal deadline does not restart")
    }

    func testIdleTimeoutDoesNothingWhileValuesKeepComingAndForwardsTheEnd() {
        let test = TestScheduler()
        let recorder = test.record(TestSource<Int>(events((20, .next(1)), (45, .next(2)), (70, .completed))).signal
            .timeout(idle: .milliseconds(30)))
        let failing = test.record(TestSource<Int>(events((20, .error(TestError())))).signal.timeout(idle: .milliseconds(30)))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@20", "next(2)@45", "completed@70"])
        XCTAssertEqual(failing.timeline, ["error(boom)@20"])
        XCTAssertEqual(test.pendingCount, 0, "the idle timer is cancelled")
        assertPropagatesErrorAndDisposal("timeout(idle:)") { $0.timeout(idle: .seconds(1)) }
        assertFinishedPipelineIsFreed("timeout(idle:)") { signal, token in
            signal.timeout(idle: .seconds(1)).map { value -> Int in token.touch(); return value }
        }
    }

    // MARK: buffer(every:)

    func testBufferCollectsWindowsOpenedByTheFirstValue() {
        let timed = events((10, .next(1)), (12, .next(2)), (40, .next(3)), (45, .next(4)), (47, Event<Int>.completed))
        XCTAssertEqual(run(timed) { $0.buffer(every: .milliseconds(10)) }, ["next([1, 2])@20", "next([3, 4])@47", "completed@47"])
        let failing = events((10, .next(1)), (12, .error(TestError())))
        XCTAssertEqual(run(failing) { $0.buffer(every: .milliseconds(10)) }, ["error(boom)@12"])
        assertPropagatesErrorAndDisposal("buffer") { $0.buffer(every: .milliseconds(1)) }
    }

    func testBufferRejectsANonPositiveInterval() {
        let recorder = TestScheduler().record(Signal.from([1]).buffer(every: .zero))
        guard case .error(let error as UVError)? = recorder.terminal else {
            return XCTFail("expected a UVError, got \(recorder.events)")
        }
        XCTAssertEqual(error.name, "EINVAL")
        XCTAssertTrue(error.message.contains("positive"), error.message)
    }

    func testFinishedTimePipelinesAreFreed() {
        assertFinishedPipelineIsFreed("delay") { signal, token in
            signal.delay(.milliseconds(1)).map { value -> Int in token.touch(); return value }
        }
        assertFinishedPipelineIsFreed("timeout") { signal, token in
            signal.timeout(.seconds(1)).map { value -> Int in token.touch(); return value }
        }
        assertFinishedPipelineIsFreed("buffer") { signal, token in
            signal.buffer(every: .milliseconds(5)).map { values -> Int in token.touch(); return values.count }
        }
        assertFinishedPipelineIsFreed("sample") { signal, token in
            signal.sample(signal).map { value -> Int in token.touch(); return value }
        }
        assertFinishedPipelineIsFreed("deliver(on:)") { signal, token in
            signal.deliver(on: Scheduler.immediate).map { value -> Int in token.touch(); return value }
        }
    }

    // MARK: on a real loop

    func testTimeOperatorsRunOnTheLoopsTimersAndCloseThem() {
        let report = LoopHarness.run { harness in
            let ticks = Signal<Int>.interval(.milliseconds(2)).take(4)
            let delayed = try harness.record(ticks.delay(.milliseconds(5)))
            let debounced = try harness.record(ticks.throttle(.milliseconds(50)))
            let timedOut = try harness.record(Signal<Int>.never.timeout(.milliseconds(5)))
            let buffered = try harness.record(ticks.buffer(every: .milliseconds(100)))
            XCTAssertEqual(try delayed.waitForTermination(), .completed)
            XCTAssertEqual(delayed.values, [0, 1, 2, 3])
            XCTAssertEqual(try debounced.waitForTermination(), .completed)
            XCTAssertEqual(debounced.values, [3], "completion flushes the pending value")
            XCTAssertEqual(try timedOut.waitForTermination(), .error(TimeoutError.timeoutOperator(after: .milliseconds(5))))
            XCTAssertEqual(try buffered.waitForTermination(), .completed)
            XCTAssertEqual(buffered.values, [[0, 1, 2, 3]])
            XCTAssertTrue(delayed.recorded.allSatisfy { $0.loopName == "harness" })
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// A time operator whose scheduler is a loop that shuts down (here while the subscriber's
    /// home, the shared loop, lives on) ends with `EventLoopError.shutDown`, whether a timer
    /// was pending or not, instead of dropping the subscription silently; one subscribed after
    /// that loop shut down fails at once.
    func testTimeOperatorsOnALoopThatShutsDownEndWithShutDown() throws {
        let loop = EventLoop(name: "time-shutdown")
        let idle = Subject<Int>()
        let recorders = [
            EventRecorder(Signal<Int>.never.timeout(.seconds(3600), on: loop), label: "timeout"),
            EventRecorder(Signal<Int>.return(1).concat(.never).delay(.seconds(3600), on: loop), label: "delay, pending"),
            EventRecorder(idle.delay(.seconds(3600), on: loop), label: "delay, idle"),
            EventRecorder(idle.throttle(.seconds(3600), on: loop.loopTimeScheduler), label: "throttle, idle"),
            EventRecorder(idle.buffer(every: .seconds(3600), on: loop).map(\.count), label: "buffer, idle"),
        ]
        waitUntil("the timeout's and the delay's timers") { (try? loop.openHandles().count) == 2 }
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        for recorder in recorders {
            let terminal = try recorder.waitForTermination(timeout: .seconds(5))
            XCTAssertEqual(terminal.error as? EventLoopError, .shutDown(loop: "time-shutdown"), recorder.label)
        }
        let late = EventRecorder(Signal<Int>.never.timeout(.seconds(3600), on: loop), label: "after shutdown")
        XCTAssertEqual(try late.waitForTermination(timeout: .seconds(5)).error as? EventLoopError, .shutDown(loop: "time-shutdown"))
    }

    /// On a scheduler other than the home, the source's end does not dispose what is still on its way
    /// there: the pending value and the completion of throttle and debounce arrive, and the timeouts
    /// pass the values and completion of a source that ends in time.
    func testOnAnotherSchedulerThePendingValueAndTheCompletionArrive() {
        let home = TestScheduler(), other = TestScheduler()
        let throttled = home.record(Signal.from([1, 2, 3]).throttle(.milliseconds(50), on: other))
        let debounced = home.record(Signal.from([1, 2, 3]).debounce(.milliseconds(50), on: other))
        let deadline = home.record(Signal.from([1, 2]).timeout(.seconds(1), on: other))
        let idle = home.record(Signal.from([1, 2]).timeout(idle: .seconds(1), on: other))
        home.run()
        XCTAssertEqual(throttled.timeline, [], "nothing is delivered until the other scheduler runs")
        other.run()
        XCTAssertEqual(throttled.timeline, ["next(3)@0", "completed@0"])
        XCTAssertEqual(debounced.timeline, ["next(3)@0", "completed@0"])
        XCTAssertEqual(deadline.timeline, ["next(1)@0", "next(2)@0", "completed@0"])
        XCTAssertEqual(idle.timeline, ["next(1)@0", "next(2)@0", "completed@0"])
    }

    /// On another scheduler a timeout still fires on that scheduler's clock and disposes the source.
    func testOnAnotherSchedulerATimeoutFiresOnItsClock() {
        let home = TestScheduler(), other = TestScheduler()
        let disposed = Locked(false)
        let source = Signal<Int>.never.on(disposed: { disposed.withLock { $0 = true } })
        let recorder = home.record(source.timeout(.milliseconds(30), on: other))
        home.run()
        other.run()
        home.run()  // the teardown runs on the home
        XCTAssertEqual(recorder.timeline, ["error(\(TimeoutError.timeoutOperator(after: .milliseconds(30))))@30"])
        XCTAssertTrue(disposed.current, "the source is disposed when the timeout fires")
    }
}
