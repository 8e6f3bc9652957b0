import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `buffer(every:count:on:)` on virtual time: which comes first of count and time, the last batch, errors, disposal, other schedulers.
final class BatchingTests: XCTestCase {
    private func run<Output>(_ timed: [(Int, Event<Int>)], _ apply: (Signal<Int>) -> Signal<Output>) -> [String] {
        let test = TestScheduler()
        let recorder = test.record(apply(TestSource(timed).signal))
        test.run()
        return recorder.timeline
    }

    func testAFullBatchIsSentAtOnceAndTheNextWindowStartsWithTheNextValue() {
        // Three values in 2 ms fill a batch of 3 before its 100 ms are up; the fourth value opens a
        // window of its own, sent 100 ms after it (not 100 ms after the first batch began).
        let timed = events((10, .next(1)), (11, .next(2)), (12, .next(3)), (50, .next(4)), (300, Event<Int>.completed))
        XCTAssertEqual(run(timed) { $0.buffer(every: .milliseconds(100), count: 3) },
                       ["next([1, 2, 3])@12", "next([4])@150", "completed@300"])
        // The full batch cancels its window's timer: what runs is the source's four events, no timer at 110.
        let test = TestScheduler()
        let full = test.record(TestSource(events((10, .next(1)), (11, .next(2)), (12, .next(3)), (300, Event<Int>.completed))).signal
            .buffer(every: .milliseconds(100), count: 3))
        test.run()
        XCTAssertEqual(full.timeline, ["next([1, 2, 3])@12", "completed@300"])
        XCTAssertEqual(test.executedCount, 4)
        let ones = events((10, .next(1)), (20, .next(2)), (30, Event<Int>.completed))
        XCTAssertEqual(run(ones) { $0.buffer(every: .seconds(1), count: 1) }, ["next([1])@10", "next([2])@20", "completed@30"])
    }

    func testABatchIsSentItsIntervalAfterItsFirstValueAndNoEmptyBatchIsSent() {
        let timed = events((10, .next(1)), (60, .next(2)), (250, .next(3)), (251, .next(4)), (1_000, Event<Int>.completed))
        XCTAssertEqual(run(timed) { $0.buffer(every: .milliseconds(100), count: 10) },
                       ["next([1, 2])@110", "next([3, 4])@350", "completed@1000"])
        XCTAssertEqual(run(timed) { $0.buffer(every: .milliseconds(100)) },
                       ["next([1, 2])@110", "next([3, 4])@350", "completed@1000"], "buffer(every:) is the same without a count")
    }

    func testCompletionSendsTheLastPartialBatchThenCompletes() {
        let partial = events((10, .next(1)), (20, .next(2)), (30, Event<Int>.completed))
        XCTAssertEqual(run(partial) { $0.buffer(every: .milliseconds(100), count: 5) }, ["next([1, 2])@30", "completed@30"])
        let afterAFullOne = events((10, .next(1)), (20, .next(2)), (30, Event<Int>.completed))
        XCTAssertEqual(run(afterAFullOne) { $0.buffer(every: .milliseconds(100), count: 2) }, ["next([1, 2])@20", "completed@30"],
                       "no empty batch at completion")
    }

    func testAnErrorIsForwardedAtOnceAndTheOpenBatchDropped() {
        let failing = events((10, .next(1)), (11, .next(2)), (12, .next(3)), (20, .error(TestError())))
        XCTAssertEqual(run(failing) { $0.buffer(every: .milliseconds(100), count: 2) }, ["next([1, 2])@11", "error(boom)@20"],
                       "the full batch went out; the open one ([3]) is dropped, and its timer never fires")
        assertPropagatesErrorAndDisposal("buffer(every:count:)") { $0.buffer(every: .milliseconds(100), count: 2) }
        assertFinishedPipelineIsFreed("buffer(every:count:)") { signal, token in
            signal.buffer(every: .milliseconds(5), count: 10).map { values -> Int in token.touch(); return values.count }
        }
    }

    func testDisposingMidWindowSendsNothingLaterCancelsTheTimerAndFreesTheValues() {
        let test = TestScheduler()
        let values = Subject<LifetimeToken>()
        let recorder = test.record(values.buffer(every: .milliseconds(100), count: 10))
        let kept = WeakToken()
        test.at(10) {
            let token = LifetimeToken()
            kept.value = token
            values.sendNext(token)
        }
        test.advance(by: .milliseconds(15))
        XCTAssertNotNil(kept.value, "the open window holds its value")
        test.performAsCurrent { recorder.dispose() }  // on the home thread: the teardown runs now
        XCTAssertNil(kept.value, "disposing frees the open window's values")
        XCTAssertEqual(test.run(), 0, "the window's timer was cancelled: nothing ran after the disposal")
        XCTAssertEqual(recorder.timeline, [])
    }

    func testABatchSentBackIntoTheSourceOpensTheNextWindow() {
        let test = TestScheduler()
        let values = Subject<Int>()
        let batches = Locked<[[Int]]>([])
        test.performAsCurrent {
            _ = values.buffer(every: .milliseconds(100), count: 2).subscribeNext { batch in
                batches.withLock { $0.append(batch) }
                if batch == [1, 2] { values.sendNext(3) }
            }
        }
        test.performAsCurrent {
            values.sendNext(1)
            values.sendNext(2)
        }
        XCTAssertEqual(batches.current, [[1, 2]])
        test.performAsCurrent { values.sendNext(4) }
        XCTAssertEqual(batches.current, [[1, 2], [3, 4]], "3, sent during the delivery of [1, 2], began the next batch")
    }

    /// The windows run on the given scheduler's clock, and the source's completion, hopped there,
    /// still sends the last batch: the source's end does not cancel the hop.
    func testOnAnotherSchedulerTheWindowsRunOnItsClockAndTheLastBatchIsSent() {
        let home = TestScheduler(), other = TestScheduler()
        let counted = home.record(Signal.from([1, 2, 3]).buffer(every: .milliseconds(50), count: 2, on: other))
        let timed = home.record(Signal.from([1, 2, 3]).buffer(every: .milliseconds(50), on: other))
        let open = home.record(Signal.return(7).concat(Signal<Int>.never).buffer(every: .milliseconds(50), count: 10, on: other))
        home.run()
        XCTAssertEqual(counted.timeline, [], "nothing is delivered until the other scheduler runs")
        other.run()
        XCTAssertEqual(counted.timeline, ["next([1, 2])@0", "next([3])@0", "completed@0"])
        XCTAssertEqual(timed.timeline, ["next([1, 2, 3])@0", "completed@0"])
        XCTAssertEqual(open.timeline, ["next([7])@50"], "the window's timer ran on the other scheduler's clock")
        open.dispose()
    }

    func testOnALoopBatchesComeByCountAndByTimeAndTheTimerIsClosed() {
        let report = LoopHarness.run { harness in
            let ticks = Signal<Int>.interval(.milliseconds(2))
            let counted = try harness.record(ticks.take(5).buffer(every: .seconds(3600), count: 2))
            XCTAssertEqual(try counted.waitForTermination(), .completed)
            XCTAssertEqual(counted.values, [[0, 1], [2, 3], [4]], "the hour-long window of [4] ends with the source")
            let start = SchedulerInstant.now
            let timed = try harness.record(ticks.take(3).concat(Signal<Int>.never).buffer(every: .milliseconds(30), count: 100))
            XCTAssertEqual(try timed.waitForValues(1), [[0, 1, 2]])
            XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(30))
            timed.dispose()
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// A weak reference a test's closures can share.
private final class WeakToken: @unchecked Sendable {
    // Written and read on the test's thread (the TestScheduler runs work there).
    weak var value: LifetimeToken?
}
