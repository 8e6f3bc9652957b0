import ReactiveUV
import ReactiveUVTesting
import XCTest

final class TestSchedulerTests: XCTestCase {
    func testWorkRunsInDeadlineOrderThenSubmissionOrder() {
        let test = TestScheduler()
        let log = LockedLog()
        test.schedule(after: .seconds(2)) { log.append("b@2") }
        test.schedule(after: .seconds(1)) { log.append("a@1") }
        test.schedule(after: .seconds(2)) { log.append("c@2") }
        test.schedule { log.append("now") }
        XCTAssertEqual(log.entries, [], "nothing runs until the clock moves")
        test.advance(by: .zero)
        XCTAssertEqual(log.entries, ["now"])
        test.advance(by: .milliseconds(1500))
        XCTAssertEqual(log.entries, ["now", "a@1"])
        XCTAssertEqual(test.now.nanoseconds, 1_500_000_000)
        test.advance(by: .seconds(1))
        XCTAssertEqual(log.entries, ["now", "a@1", "b@2", "c@2"])
    }

    func testTheClockReadsEachItemsDeadlineWhileItRuns() {
        let test = TestScheduler()
        let seen = LockedLog()
        test.schedule(after: .milliseconds(250)) { seen.append("\(test.now.nanoseconds)") }
        test.run()
        XCTAssertEqual(seen.entries, ["250000000"])
    }

    func testRepeatingWorkOnVirtualTimeHasNoDrift() {
        let test = TestScheduler()
        let times = LockedLog()
        let repeating = test.schedule(after: .seconds(1), repeatingEvery: .seconds(3)) {
            times.append("\(test.now.nanoseconds / 1_000_000_000)")
        }
        test.advance(by: .seconds(10))
        XCTAssertEqual(times.entries, ["1", "4", "7", "10"])
        repeating?.dispose()
        test.advance(by: .seconds(10))
        XCTAssertEqual(times.entries.count, 4)
    }

    func testCancelledWorkNeverRuns() {
        let test = TestScheduler()
        let log = LockedLog()
        let cancelled = test.schedule(after: .seconds(1)) { log.append("cancelled") }
        test.schedule(after: .seconds(1)) { log.append("kept") }
        cancelled?.dispose()
        XCTAssertEqual(test.run(), 1)
        XCTAssertEqual(log.entries, ["kept"])
    }

    func testItIsTheCurrentSchedulerWhileWorkRuns() {
        let test = TestScheduler()
        let seen = LockedLog()
        test.schedule { seen.append(Scheduler.current === test ? "current" : "not current") }
        test.run()
        XCTAssertEqual(seen.entries, ["current"])
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
        let log = LockedLog()
        for index in 0..<3 { test.schedule(after: .seconds(index)) { log.append("\(index)") } }
        XCTAssertEqual(test.step(), 1)
        XCTAssertEqual(log.entries, ["0"])
        XCTAssertEqual(test.step(5), 2)
        XCTAssertEqual(log.entries, ["0", "1", "2"])
        XCTAssertEqual(test.executedCount, 3)
    }
}

/// A thread-safe list of strings for assertions.
final class LockedLog: @unchecked Sendable {
    // `storage` is protected by `lock`.
    private let lock = NSLockShim()
    private var storage: [String] = []
    func append(_ entry: String) { lock.withLock { storage.append(entry) } }
    var entries: [String] { lock.withLock { storage } }
}
