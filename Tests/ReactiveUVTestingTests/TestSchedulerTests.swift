import ReactiveUV
import ReactiveUVTesting
import XCTest

final class TestSchedulerTests: XCTestCase {
    func testWorkRunsInDeadlineOrderThenSubmissionOrder() {
        let test = TestScheduler()
        let log = Locked<[String]>([])
        test.schedule(after: .seconds(2)) { log.withLock { $0.append("b@2") } }
        test.schedule(after: .seconds(1)) { log.withLock { $0.append("a@1") } }
        test.schedule(after: .seconds(2)) { log.withLock { $0.append("c@2") } }
        test.schedule { log.withLock { $0.append("now") } }
        XCTAssertEqual(log.current, [], "nothing runs until the clock moves")
        test.advance(by: .zero)
        XCTAssertEqual(log.current, ["now"])
        test.advance(by: .milliseconds(1500))
        XCTAssertEqual(log.current, ["now", "a@1"])
        XCTAssertEqual(test.now.nanoseconds, 1_500_000_000)
        test.advance(by: .seconds(1))
        XCTAssertEqual(log.current, ["now", "a@1", "b@2", "c@2"])
    }

    func testTheClockReadsEachItemsDeadlineWhileItRuns() {
        let test = TestScheduler()
        let seen = Locked<[String]>([])
        test.schedule(after: .milliseconds(250)) { seen.withLock { $0.append("\(test.now.nanoseconds)") } }
        test.run()
        XCTAssertEqual(seen.current, ["250000000"])
    }

    func testRepeatingWorkOnVirtualTimeHasNoDrift() {
        let test = TestScheduler()
        let times = Locked<[String]>([])
        let repeating = test.schedule(after: .seconds(1), repeatingEvery: .seconds(3)) {
            times.withLock { $0.append("\(test.now.nanoseconds / 1_000_000_000)") }
        }
        test.advance(by: .seconds(10))
        XCTAssertEqual(times.current, ["1", "4", "7", "10"])
        repeating?.dispose()
        test.advance(by: .seconds(10))
        XCTAssertEqual(times.current.count, 4)
    }

    func testCancelledWorkNeverRuns() {
        let test = TestScheduler()
        let log = Locked<[String]>([])
        let cancelled = test.schedule(after: .seconds(1)) { log.withLock { $0.append("cancelled") } }
        test.schedule(after: .seconds(1)) { log.withLock { $0.append("kept") } }
        cancelled?.dispose()
        XCTAssertEqual(test.run(), 1)
        XCTAssertEqual(log.current, ["kept"])
    }

    func testItIsTheCurrentSchedulerWhileWorkRuns() {
        let test = TestScheduler()
        let seen = Locked<[String]>([])
        test.schedule { seen.withLock { $0.append(Scheduler.current === test ? "current" : "not current") } }
        test.run()
        XCTAssertEqual(seen.current, ["current"])
        XCTAssertNil(Scheduler.current)
    }

    func testSignalsSubscribedOnItRunOnVirtualTime() {
        let test = TestScheduler()
        let recorder = test.performAsCurrent { EventRecorder(Signal<Int>.interval(.seconds(1))) }
        test.advance(by: .milliseconds(3500))
        XCTAssertEqual(recorder.values, [0, 1, 2])
        XCTAssertEqual(recorder.recorded.map { $0.time.nanoseconds / 1_000_000 }, [1000, 2000, 3000])
        test.performAsCurrent { recorder.dispose() }
        test.advance(by: .seconds(10))
        XCTAssertEqual(recorder.values, [0, 1, 2])
        XCTAssertEqual(test.pendingCount, 0, "disposing the subscription cancelled the repeating timer")
    }

    func testStepRunsOneItemAtATime() {
        let test = TestScheduler()
        let log = Locked<[String]>([])
        for index in 0..<3 { test.schedule(after: .seconds(index)) { log.withLock { $0.append("\(index)") } } }
        XCTAssertEqual(test.step(), 1)
        XCTAssertEqual(log.current, ["0"])
        XCTAssertEqual(test.step(5), 2)
        XCTAssertEqual(log.current, ["0", "1", "2"])
        XCTAssertEqual(test.executedCount, 3)
    }
}

