import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class SchedulerTests: XCTestCase {
    func testCurrentSchedulerOnAndOffTheLoop() {
        let loop = EventLoop(name: "current")
        defer { loop.shutdown() }
        XCTAssertNil(Scheduler.current, "the test thread is not a loop thread")
        XCTAssertEqual(onLoop(loop) { Scheduler.current === loop }, true)
        let test = TestScheduler()
        let nested = test.performAsCurrent { () -> [Bool] in
            let outer = Scheduler.current === test
            let inner = TestScheduler().performAsCurrent { Scheduler.current !== test }
            return [outer, inner, Scheduler.current === test, EventLoop.current == nil]
        }
        XCTAssertEqual(nested, [true, true, true, true])
        XCTAssertNil(Scheduler.current, "performAsCurrent restores the previous current scheduler")
    }

    func testSubscriptionSchedulerRunsAtOnceOnALoopThread() {
        let loop = EventLoop(name: "sub")
        defer { loop.shutdown() }
        let result = onLoop(loop) { () -> [Bool] in
            let ranInline = Locked(false)
            let disposable = Scheduler.subscription.schedule { ranInline.withLock { $0 = true } }
            return [ranInline.current, disposable == nil]
        }
        XCTAssertEqual(result, [true, true])
    }

    func testSubscriptionSchedulerOffLoopHandsWorkToTheSharedLoop() {
        let where_ = Locked<String?>(nil)
        let disposable = Scheduler.subscription.schedule {
            where_.withLock { $0 = EventLoop.current?.name }
        }
        XCTAssertNotNil(disposable, "off a loop the work is queued, so it can be cancelled")
        waitUntil("the shared loop to run the work") { where_.current != nil }
        XCTAssertEqual(where_.current, "shared")
    }

    func testSubscriptionSchedulerUsesTheCurrentTestScheduler() {
        let test = TestScheduler()
        let ran = Locked(false)
        test.performAsCurrent {
            Scheduler.subscription.schedule(after: .seconds(5)) { ran.withLock { $0 = true } }
        }
        test.advance(by: .seconds(4))
        XCTAssertFalse(ran.current)
        test.advance(by: .seconds(1))
        XCTAssertTrue(ran.current, "delayed subscription work runs on the current scheduler's clock")
    }

    func testImmediateSchedulerRunsSynchronouslyAndBlocksForDelays() {
        let logBox = Locked<[String]>([])
        XCTAssertNil(Scheduler.immediate.schedule { logBox.withLock { $0.append("now") } })
        let start = SchedulerInstant.now
        Scheduler.immediate.schedule(after: .milliseconds(20)) { logBox.withLock { $0.append("later") } }
        XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(20))
        XCTAssertEqual(logBox.current, ["now", "later"])
        XCTAssertNil(Scheduler.immediate.schedule(after: .zero, repeatingEvery: .seconds(1)) {},
                     "repeating on the immediate scheduler is refused, not a hang")
    }

    func testNowIsMonotonicOnEveryScheduler() {
        let loop = EventLoop(name: "clock")
        defer { loop.shutdown() }
        for scheduler in [loop, Scheduler.immediate, Scheduler.subscription] {
            let a = scheduler.now, b = scheduler.now
            XCTAssertLessThanOrEqual(a, b)
        }
        let test = TestScheduler()
        XCTAssertEqual(test.now.nanoseconds, 0)
        test.advance(by: .milliseconds(1500))
        XCTAssertEqual(test.now.nanoseconds, 1_500_000_000)
    }
}
