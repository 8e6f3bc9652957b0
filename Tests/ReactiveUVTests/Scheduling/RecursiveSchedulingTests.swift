import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class RecursiveSchedulingTests: XCTestCase {
    private let reschedules = 1_000_000

    func testAMillionReschedulesOnALoopUseConstantStack() {
        let loop = EventLoop(name: "recursive")
        defer { loop.shutdown() }
        let count = Locked(0)
        let target = reschedules
        loop.scheduleRecursive { reschedule in
            if count.withLock({ $0 += 1; return $0 }) < target { reschedule() }
        }
        waitUntil("a million runs", timeout: .seconds(60)) { count.current == target }
    }

    func testAMillionReschedulesOnTheImmediateScheduler() {
        let count = Locked(0)
        let target = reschedules
        Scheduler.immediate.scheduleRecursive { reschedule in
            if count.withLock({ $0 += 1; return $0 }) < target { reschedule() }
        }
        XCTAssertEqual(count.current, target, "the immediate scheduler trampolines synchronously")
    }

    func testAMillionReschedulesOnATestScheduler() {
        let test = TestScheduler()
        let count = Locked(0)
        let target = reschedules
        test.scheduleRecursive { reschedule in
            if count.withLock({ $0 += 1; return $0 }) < target { reschedule() }
        }
        test.run(limit: target + 1)
        XCTAssertEqual(count.current, target)
    }

    func testDisposingStopsFurtherRuns() {
        let test = TestScheduler()
        let count = Locked(0)
        let recursion = test.scheduleRecursive { reschedule in
            count.withLock { $0 += 1 }
            reschedule()
        }
        test.step(3)
        recursion?.dispose()
        test.run()
        XCTAssertEqual(count.current, 3)
        XCTAssertEqual(test.pendingCount, 0)
    }

    func testReschedulingTwiceSchedulesTwoRuns() {
        let test = TestScheduler()
        let count = Locked(0)
        test.scheduleRecursive { reschedule in
            let n = count.withLock { $0 += 1; return $0 }
            if n == 1 { reschedule(); reschedule() }
        }
        test.run()
        XCTAssertEqual(count.current, 3)
    }
}
