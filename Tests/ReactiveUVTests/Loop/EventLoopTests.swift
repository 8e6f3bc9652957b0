import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class EventLoopTests: XCTestCase {
    func testWorkRunsOnTheLoopsOwnThreadWithTheThreadKeySet() {
        let loop = EventLoop(name: "own")
        defer { loop.shutdown() }
        let testThread = pthread_self()
        let seen = onLoop(loop) { () -> [Bool] in
            [EventLoop.current === loop,
             loop.inEventLoop,
             Scheduler.current === loop,
             pthread_equal(pthread_self(), testThread) == 0]
        }
        XCTAssertEqual(seen, [true, true, true, true])
    }

    func testNoLoopIsCurrentOffLoopThreads() {
        let loop = EventLoop(name: "other")
        defer { loop.shutdown() }
        XCTAssertNil(EventLoop.current)
        XCTAssertNil(Scheduler.current)
        XCTAssertFalse(loop.inEventLoop)
        let onPlainThread = Locked<[Bool]>([])
        onNewThread {
            onPlainThread.withLock { $0 = [EventLoop.current == nil, Scheduler.current == nil, !loop.inEventLoop] }
        }
        XCTAssertEqual(onPlainThread.current, [true, true, true])
    }

    func testInEventLoopIsFalseOnAnotherLoopsThread() {
        let a = EventLoop(name: "a"), b = EventLoop(name: "b")
        defer { a.shutdown(); b.shutdown() }
        let answers = onLoop(b) { [a.inEventLoop, b.inEventLoop, EventLoop.current === b] }
        XCTAssertEqual(answers, [false, true, true])
    }

    func testInEventLoopIsFalseAfterShutdownEvenOnTheOldThreadId() {
        let loop = EventLoop(name: "gone")
        let threadID = onLoop(loop) { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(bitPattern: UInt(pthread_self())))) }
        loop.shutdown()
        XCTAssertNotNil(threadID)
        // A new thread may reuse the old thread id; the key-based answer stays no.
        let answers = Locked<[Bool]>([])
        runConcurrently(8) { _ in answers.withLock { $0.append(loop.inEventLoop) } }
        XCTAssertEqual(answers.current, Array(repeating: false, count: 8))
        XCTAssertFalse(loop.inEventLoop)
    }

    func testSharedLoopStartsOnFirstUseAndRefusesShutdown() {
        let name = onLoop(EventLoop.shared) { EventLoop.current?.name }
        XCTAssertEqual(name, "shared")
        XCTAssertThrowsError(try EventLoop.shared.tryShutdown()) { error in
            XCTAssertEqual(error as? EventLoopError, .sharedLoopCannotShutDown)
        }
        XCTAssertFalse(EventLoop.shared.isShutDown)
    }

    func testLoopScheduleIsTheLoopItself() {
        let loop = EventLoop(name: "sched")
        defer { loop.shutdown() }
        XCTAssertTrue(loop.scheduler === loop)
        XCTAssertEqual(loop.schedulerDescription, "loop 'sched'")
    }

    func testManyLoopsStartAndStop() {
        for round in 0..<20 {
            let loop = EventLoop(name: "round-\(round)")
            XCTAssertEqual(onLoop(loop) { round }, round)
            let report = try? loop.tryShutdown()
            XCTAssertEqual(report?.loopCloseResult, 0)
            XCTAssertEqual(report?.closedHandles, [])
            XCTAssertTrue(loop.isShutDown)
        }
    }
}
