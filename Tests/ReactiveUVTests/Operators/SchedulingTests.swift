import ReactiveUV
import ReactiveUVTesting
import XCTest

final class SchedulingTests: XCTestCase {
    /// Runs `body` with the harness and a second loop, and checks both are left clean.
    private func withTwoLoops(_ body: (LoopHarness, EventLoop) throws -> Void) {
        let other = EventLoop(name: "other")
        let report = LoopHarness.run { harness in try body(harness, other) }
        XCTAssertTrue(report.isClean, "\(report.problems)")
        do {
            let otherReport = try other.tryShutdown()
            XCTAssertEqual(otherReport.closedHandles, [], "handles left open on the other loop")
            XCTAssertEqual(otherReport.loopCloseResult, 0)
        } catch {
            XCTFail("\(error)")
        }
    }

    func testDeliverOnMovesEveryEventToTheSchedulersThread() {
        withTwoLoops { harness, other in
            let recorder = try harness.record(Signal<Int>.interval(.milliseconds(1)).take(5).deliver(on: other))
            XCTAssertEqual(try recorder.waitForTermination(), .completed)
            XCTAssertEqual(recorder.values, [0, 1, 2, 3, 4])
            XCTAssertTrue(recorder.recorded.allSatisfy { $0.loopName == "other" }, "\(recorder.recorded.map(\.loopName))")
        }
    }

    func testSubscribeOnRunsTheSourceOnTheScheduler() {
        withTwoLoops { harness, other in
            let subscribedOn = Locked<String?>(nil)
            let disposedOn = Locked<String?>(nil)
            let source = Signal<Int> { subscriber in
                subscribedOn.withLock { $0 = EventLoop.current?.name }
                subscriber.sendNext(1)
                return ActionDisposable { disposedOn.withLock { $0 = EventLoop.current?.name } }
            }
            let recorder = try harness.record(source.subscribe(on: other))
            XCTAssertEqual(try recorder.waitForValues(1), [1])
            XCTAssertEqual(subscribedOn.current, "other")
            XCTAssertEqual(recorder.recorded.first?.loopName, "other")
            recorder.dispose()
            try harness.wait(for: "the source's teardown") { disposedOn.current != nil }
            XCTAssertEqual(disposedOn.current, "other", "the source is torn down on its own scheduler")
        }
    }

    func testAMultiInputOperatorAfterDeliverOnHopsBackToItsHome() {
        withTwoLoops { harness, other in
            let remote = Signal.from([1, 2, 3]).deliver(on: other)
            let recorder = try harness.record(remote.merge(with: Signal<Void>.timer(after: .milliseconds(5)).mapReplace(9)))
            XCTAssertEqual(try recorder.waitForTermination(), .completed)
            XCTAssertEqual(recorder.values.sorted(), [1, 2, 3, 9])
            XCTAssertTrue(recorder.recorded.allSatisfy { $0.loopName == "harness" }, "\(recorder.recorded.map(\.loopName))")
            XCTAssertFalse(recorder.sawConcurrentDelivery)
        }
    }

    func testDeliverOnVirtualTimeKeepsOrderAndDeliversCompletion() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (10, .next(2)), (20, .completed)))
        let recorder = test.record(source.signal.deliver(on: test))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@10", "completed@20"])
        assertPropagatesErrorAndDisposal("deliver(on:)") { $0.deliver(on: Scheduler.immediate) }
    }

    func testSubscribeOnVirtualTimePropagatesErrorsAndDisposal() {
        let test = TestScheduler()
        let failing = TestSource<Int>(events((10, .next(1)), (20, .error(TestError()))))
        let failed = test.record(failing.signal.subscribe(on: test))
        let running = TestSource<Int>(events((10, .next(1)), (20, .next(2))))
        let disposed = test.record(running.signal.subscribe(on: test))
        test.at(15) { disposed.dispose() }
        test.run()
        XCTAssertEqual(failed.timeline, ["next(1)@10", "error(boom)@20"])
        XCTAssertEqual(failing.history, ["subscribed@0", "disposed@20"])
        XCTAssertEqual(disposed.timeline, ["next(1)@10"])
        XCTAssertEqual(running.history, ["subscribed@0", "disposed@15"])
    }

    func testNothingIsDeliveredAfterDisposingADeliverOn() {
        withTwoLoops { harness, other in
            let recorder = try harness.record(Signal<Int>.interval(.milliseconds(1)).deliver(on: other))
            try recorder.waitForValues(3)
            // `dispose()` never waits for a callback running on `other`; this does, so the count is final.
            awaitOnThisThread("disposeAndWait()") { await recorder.disposeAndWait() }
            let count = recorder.values.count
            // Let both loops run whatever was already queued.
            _ = try harness.onLoop {}
            let drained = Locked(false)
            other.execute { drained.withLock { $0 = true } }
            try harness.wait(for: "the other loop to drain") { drained.current }
            XCTAssertEqual(recorder.values.count, count, "an event arrived after dispose() returned")
        }
    }
}
