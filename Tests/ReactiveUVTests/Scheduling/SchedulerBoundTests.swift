import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A custom operator's per-subscription state in a `SchedulerBound`: one operator, on virtual
/// time and on a loop, each subscription with its own state and no lock.
final class SchedulerBoundTests: XCTestCase {
    /// Numbers the values of each subscription from 1.
    private func numbered<T>(_ source: Signal<T>) -> Signal<String> {
        Signal { subscriber in
            let count = SchedulerBound(0, on: subscriber.homeScheduler)
            return source.subscribe(next: { value in
                count.value += 1
                subscriber.sendNext("\(count.value):\(value)")
            }, error: subscriber.sendError, completed: subscriber.sendCompleted)
        }
    }

    func testEachSubscriptionKeepsItsOwnStateOnVirtualTime() {
        let scheduler = TestScheduler()
        let ticks = Signal<Int>.interval(.milliseconds(10)).take(3)
        let first = scheduler.performAsCurrent { EventRecorder(numbered(ticks)) }
        scheduler.advance(by: .milliseconds(15))
        let second = scheduler.performAsCurrent { EventRecorder(numbered(ticks)) }
        scheduler.advance(by: .milliseconds(100))
        XCTAssertEqual(first.values, ["1:0", "2:1", "3:2"])
        XCTAssertEqual(second.values, ["1:0", "2:1", "3:2"], "the second subscription counts from 1 again")
        XCTAssertEqual(second.recorded.first?.time, SchedulerInstant(nanoseconds: 25_000_000))
    }

    func testTheSameOperatorRunsOnALoop() throws {
        let report = LoopHarness.run { harness in
            let recorder = try harness.record(numbered(Signal<Int>.interval(.milliseconds(1)).take(4)))
            _ = try recorder.waitForTermination()
            XCTAssertEqual(recorder.values, ["1:0", "2:1", "3:2", "4:3"])
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testTheValueIsReadWhereItsSchedulerRuns() {
        let scheduler = TestScheduler()
        let bound = SchedulerBound([1], on: scheduler)
        scheduler.performAsCurrent { bound.value.append(2) }
        XCTAssertTrue(bound.scheduler === scheduler)
        XCTAssertEqual(scheduler.performAsCurrent { bound.value }, [1, 2])
    }
}
