import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// Loops made with `EventLoop.onCurrentThread()`; each test runs on a fresh thread that owns no loop.
final class OwnerThreadLoopTests: XCTestCase {
    func testRunReturnsOnceNothingIsLeftToDo() {
        let outcome = Locked<[String]>([])
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "main-like")
            let isCurrent = EventLoop.current === loop && loop.inEventLoop && Scheduler.current === loop
            let start = SchedulerInstant.now
            loop.schedule(after: .milliseconds(20)) { outcome.withLock { $0.append("timer") } }
            loop.execute { outcome.withLock { $0.append("work") } }
            loop.run()
            let elapsed = SchedulerInstant.now - start
            outcome.withLock { $0.append(elapsed >= .milliseconds(20) ? "returned after the timer" : "returned early") }
            let report = try? loop.tryShutdown()
            outcome.withLock { $0.append("closed \(report?.loopCloseResult ?? -1), current \(isCurrent), after \(EventLoop.current == nil)") }
        }
        XCTAssertEqual(outcome.current, ["work", "timer", "returned after the timer", "closed 0, current true, after true"])
    }

    func testStopFromAnotherThreadMakesRunReturn() {
        let outcome = Locked<[String]>([])
        let loopBox = Locked<EventLoop?>(nil)
        let ticked = Locked(0)
        onNewThread {
            let stopper = Thread {
                waitUntil("a tick") { ticked.current > 0 }
                loopBox.current?.stop()
            }
            let loop = EventLoop.onCurrentThread(name: "stoppable")
            loopBox.withLock { $0 = loop }
            let ticks = loop.schedule(after: .milliseconds(1), repeatingEvery: .milliseconds(5)) { ticked.withLock { $0 += 1 } }
            stopper.start()
            loop.run()
            outcome.withLock { $0.append("run returned with the timer still active") }
            ticks?.dispose()
            loop.run()  // the disposal's close completes, then nothing is left
            outcome.withLock { $0.append("closed \((try? loop.tryShutdown())?.loopCloseResult ?? -1)") }
        }
        XCTAssertEqual(outcome.current, ["run returned with the timer still active", "closed 0"])
    }

    func testShutdownFromACallbackFinishesInsideRun() {
        let outcome = Locked<[String]>([])
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "self-closing")
            loop.schedule(after: .seconds(3600)) {}
            loop.schedule(after: .milliseconds(5)) { loop.shutdown() }
            loop.run()
            outcome.withLock { $0.append("shut down: \(loop.isShutDown)") }
        }
        XCTAssertEqual(outcome.current, ["shut down: true"])
    }

    func testShutdownFromAnotherThreadWhileNotRunningIsRefused() {
        let loopBox = Locked<EventLoop?>(nil)
        let proceed = Locked(false)
        let finished = Locked(false)
        Thread {
            let loop = EventLoop.onCurrentThread(name: "idle-owner")
            loopBox.withLock { $0 = loop }
            waitUntil("the other thread's attempt") { proceed.current }
            loop.shutdown()  // the owner can
            finished.withLock { $0 = loop.isShutDown }
        }.start()
        waitUntil("the loop") { loopBox.current != nil }
        XCTAssertThrowsError(try loopBox.current!.tryShutdown()) { error in
            XCTAssertEqual(error as? EventLoopError,
                           .notRunningOnOwnerThread(operation: "shutdown()", loop: "idle-owner"))
        }
        proceed.withLock { $0 = true }
        waitUntil("the owner's shutdown") { finished.current }
    }

    func testWorkFromOtherThreadsRunsWhenTheOwnerRuns() {
        let outcome = Locked<[Int]>([])
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "queued")
            runConcurrently(4) { index in loop.execute { outcome.withLock { $0.append(index) } } }
            loop.run()
            loop.shutdown()
        }
        XCTAssertEqual(outcome.current.sorted(), [0, 1, 2, 3])
    }
}

extension OwnerThreadLoopTests {
    func testShuttingDownAgainOnTheOwnerThreadReturnsTheSameReport() {
        let outcome = Locked<[String]>([])
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "twice")
            let first = try? loop.tryShutdown()
            do {
                let second = try loop.tryShutdown()
                outcome.withLock { $0.append("first \(first?.loopCloseResult ?? -1), second \(second.loopCloseResult)") }
            } catch {
                outcome.withLock { $0.append("second threw \(error)") }
            }
        }
        XCTAssertEqual(outcome.current, ["first 0, second 0"])
    }
}
