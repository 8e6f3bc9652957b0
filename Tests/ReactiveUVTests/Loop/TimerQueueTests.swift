import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class TimerQueueTests: XCTestCase {
    private let loop = EventLoop(name: "queue")

    override func tearDown() { loop.shutdown() }

    private func timer(_ deadline: UInt64, _ log: Locked<[String]>, _ name: String) -> ScheduledTimer {
        ScheduledTimer(loop: loop, deadline: deadline, interval: 0, requestedDelay: .zero) {
            log.withLock { $0.append(name) }
        }
    }

    func testPopsInDeadlineOrderAndSubmissionOrderForTies() {
        let log = Locked<[String]>([])
        var queue = TimerQueue()
        let deadlines: [UInt64] = [50, 10, 30, 10, 70, 30, 10, 90, 20, 60, 40, 80]
        for (index, deadline) in deadlines.enumerated() { queue.push(timer(deadline, log, "\(deadline)#\(index)")) }
        XCTAssertEqual(queue.liveCount, deadlines.count)
        XCTAssertNil(queue.popDue(at: 9), "nothing is due before the earliest deadline")
        var popped: [String] = []
        while let next = queue.popDue(at: .max) {
            next.work?()
            popped = log.current
        }
        XCTAssertEqual(popped, ["10#1", "10#3", "10#6", "20#8", "30#2", "30#5", "40#10", "50#0", "60#9", "70#4", "80#11", "90#7"])
        XCTAssertTrue(queue.isEmpty)
    }

    func testLargeRandomHeapsPopSorted() {
        var generator = SystemRandomNumberGenerator()
        let log = Locked<[String]>([])
        var queue = TimerQueue()
        let deadlines = (0..<5000).map { _ in UInt64.random(in: 0..<1000, using: &generator) }
        for deadline in deadlines { queue.push(timer(deadline, log, "")) }
        var previous: UInt64 = 0
        var count = 0
        while let next = queue.popDue(at: .max) {
            XCTAssertGreaterThanOrEqual(next.deadline, previous)
            previous = next.deadline
            count += 1
        }
        XCTAssertEqual(count, 5000)
    }

    func testCancelledEntriesAreCountedAndCompactedAway() {
        let log = Locked<[String]>([])
        var queue = TimerQueue()
        let timers = (0..<1000).map { timer(UInt64($0), log, "\($0)") }
        for timer in timers { queue.push(timer) }
        for timer in timers.prefix(700) {  // what EventLoop.timerWasCancelled does
            timer.work = nil
            queue.noteCancelled()
        }
        XCTAssertEqual(queue.liveCount, 300)
        XCTAssertLessThan(queue.cancelledCount, 700, "the heap was rebuilt once mostly cancelled")
        var live: [UInt64] = []
        while let next = queue.popDue(at: .max) {
            if next.work != nil { live.append(next.deadline) }
        }
        XCTAssertEqual(live, (700..<1000).map(UInt64.init))
    }

    /// Cancelling the last live timer clears the heap, so the driver stops and an owner-thread run() can return.
    ///
    /// Checked on the queue's state right after the cancel, and by run() returning on its own
    /// (the 60 s wait only turns a hang into a failure; it then stops the loop so the thread ends).
    func testACancelledFarFutureTimerDoesNotKeepRunAlive() throws {
        let owner = Locked<EventLoop?>(nil)
        let afterCancel = Locked<(heapEmpty: Bool, driverStopped: Bool)?>(nil)
        let returned = Locked<Bool?>(nil)
        Thread {
            let loop = EventLoop.onCurrentThread(name: "far")
            owner.withLock { $0 = loop }
            let far = loop.schedule(after: .seconds(3600)) {}
            loop.schedule(after: .milliseconds(5)) {
                far?.dispose()
                afterCancel.withLock { $0 = (loop.timers.isEmpty, loop.armedDeadline == .max) }
            }
            loop.run()
            returned.withLock { $0 = afterCancel.current != nil }
            loop.shutdown()
        }.start()
        let ran = waitUntil("run() to return once the far timer was cancelled", timeout: .seconds(60)) { returned.current != nil }
        if !ran { owner.current?.stop() }  // let the thread end; the failure is already reported
        waitUntil("the owner thread to finish") { returned.current != nil }
        XCTAssertEqual(returned.current, true, "run() returned only after the cancel")
        let state = try XCTUnwrap(afterCancel.current)
        XCTAssertTrue(state.heapEmpty, "the cancelled entry is gone from the heap")
        XCTAssertTrue(state.driverStopped, "the driver is no longer armed for the far deadline")
    }

    func testManyCancelledTimersLeaveNothingBehind() throws {
        let timers = (0..<10_000).compactMap { _ in loop.schedule(after: .seconds(3600)) {} }
        XCTAssertEqual(try loop.openHandles().count, 10_000)
        for timer in timers { timer.dispose() }
        let left = onLoop(loop) { [loop] in loop.timers.isEmpty && loop.armedDeadline == .max }
        XCTAssertEqual(left, true)
        XCTAssertEqual(try loop.openHandles(), [])
    }
}
