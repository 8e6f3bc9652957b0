import CLibUV
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class LoopTimeSchedulerTests: XCTestCase {
    private var loop: EventLoop!

    override func setUp() { loop = EventLoop(name: "loop-time") }
    override func tearDown() {
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        loop = nil
    }

    /// A callback that has run for 40 ms schedules 25 ms timers both ways. Counted from the
    /// loop's time (read when the iteration began, before the 40 ms) the timer is due at
    /// that time plus 25 ms, already overdue, so it runs first; counted from the call it waits.
    /// Checked on the deadlines the timers were given, not on how soon they ran.
    func testOnTheLoopThreadDelaysCountFromTheIterationNotTheCall() throws {
        let scheduled = Locked<(loopTime: UInt64, call: UInt64, fromCall: UInt64?, fromLoopTime: UInt64?)?>(nil)
        let elapsed = Locked<Duration?>(nil)
        let order = Locked<[String]>([])
        loop.execute { [loop] in
            let loop = loop!
            let loopTime = uv_now(loop.uvLoop) * 1_000_000
            let busyUntil = SchedulerInstant.now + .milliseconds(40)
            while SchedulerInstant.now < busyUntil {}  // a long callback
            let call = SchedulerInstant.now
            let fromCall = loop.scheduler.schedule(after: .milliseconds(25)) {
                elapsed.withLock { $0 = SchedulerInstant.now - call }
                order.withLock { $0.append("call") }
            } as? ScheduledTimer
            let fromLoopTime = loop.loopTimeScheduler.schedule(after: .milliseconds(25)) {
                order.withLock { $0.append("loop") }
            } as? ScheduledTimer
            // Deadlines are loop-thread state: read them here, before either timer can run.
            scheduled.withLock { $0 = (loopTime, call.nanoseconds, fromCall?.deadline, fromLoopTime?.deadline) }
        }
        waitUntil("both timers") { order.current.count == 2 }
        XCTAssertEqual(order.current, ["loop", "call"], "the timer counted from the loop's time is due first")
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(elapsed.current), .milliseconds(25), "the loop's own scheduler counts from the call")
        let value = try XCTUnwrap(scheduled.current)
        let fromCall = try XCTUnwrap(value.fromCall, "loop.scheduler returns its ScheduledTimer")
        let fromLoopTime = try XCTUnwrap(value.fromLoopTime, "loopTimeScheduler returns its ScheduledTimer")
        XCTAssertEqual(fromLoopTime, value.loopTime + 25_000_000, "due at the iteration's loop time + 25 ms")
        XCTAssertGreaterThanOrEqual(fromCall, value.call + 25_000_000, "due at the call + 25 ms")
        XCTAssertLessThanOrEqual(fromLoopTime + 40_000_000, fromCall,
                                 "counted from the loop's time, the deadline is at least the callback's 40 ms earlier")
    }

    /// A million-timer burst shape: every timer scheduled in one callback with the same
    /// delay gets the same deadline however long the callback takes, and they all run in
    /// one pass of the timer queue, in the order they were scheduled.
    func testTimersScheduledInOneCallbackShareTheLoopTimeBase() throws {
        let scheduled = Locked<(loopTime: UInt64, deadlines: [UInt64?])?>(nil)
        let fired = Locked<[(index: Int, loopTime: UInt64)]>([])
        loop.execute { [loop] in
            let loop = loop!
            let scheduler = loop.loopTimeScheduler
            let loopTime = uv_now(loop.uvLoop) * 1_000_000
            var deadlines: [UInt64?] = []
            for index in 0..<3 {
                let timer = scheduler.schedule(after: .milliseconds(30)) {
                    let passTime = uv_now(loop.uvLoop)
                    fired.withLock { $0.append((index, passTime)) }
                } as? ScheduledTimer
                deadlines.append(timer?.deadline)
                if index < 2 {
                    let until = SchedulerInstant.now + .milliseconds(10)
                    while SchedulerInstant.now < until {}
                }
            }
            scheduled.withLock { $0 = (loopTime, deadlines) }
        }
        waitUntil("three timers") { fired.current.count == 3 }
        let value = try XCTUnwrap(scheduled.current)
        // Counted from each call they would be at least 10 ms apart.
        XCTAssertEqual(value.deadlines, Array(repeating: value.loopTime + 30_000_000, count: 3),
                       "every timer is due at the iteration's loop time + 30 ms")
        let runs = fired.current
        XCTAssertEqual(runs.map(\.index), [0, 1, 2], "equal deadlines run in the order they were scheduled")
        XCTAssertEqual(Set(runs.map(\.loopTime)).count, 1, "they ran in one pass of the timer queue: \(runs)")
    }

    /// From another thread the loop's time cannot be read, so the delay counts from the call,
    /// and a sub-millisecond delay on the loop thread still waits for the next millisecond tick.
    func testOffTheLoopThreadAndSubMillisecondDelaysNeverFireEarly() {
        let elapsed = Locked<Duration?>(nil)
        let start = SchedulerInstant.now
        loop.loopTimeScheduler.schedule(after: .milliseconds(20)) { elapsed.withLock { $0 = SchedulerInstant.now - start } }
        waitUntil("the timer") { elapsed.current != nil }
        XCTAssertGreaterThanOrEqual(elapsed.current!, .milliseconds(20))

        let loopTimes = Locked<(UInt64, UInt64)?>(nil)
        loop.execute { [loop] in
            let loop = loop!
            let base = uv_now(loop.uvLoop) * 1_000_000
            loop.loopTimeScheduler.schedule(after: .microseconds(300)) {
                loopTimes.withLock { $0 = (base, SchedulerInstant.now.nanoseconds) }
            }
        }
        waitUntil("the sub-millisecond timer") { loopTimes.current != nil }
        let (base, firedAt) = loopTimes.current!
        XCTAssertGreaterThanOrEqual(firedAt, base + 1_000_000, "300 µs rounds up to libuv's 1 ms from the loop time")
    }

    func testRepeatingAndCancellationBehaveLikeTheLoopScheduler() {
        let ticks = Locked(0)
        let repeating = loop.loopTimeScheduler.schedule(after: .milliseconds(5), repeatingEvery: .milliseconds(5)) {
            ticks.withLock { $0 += 1 }
        }
        waitUntil("three ticks") { ticks.current >= 3 }
        repeating?.dispose()
        let ran = Locked(false)
        let cancelled = loop.loopTimeScheduler.schedule(after: .milliseconds(10)) { ran.withLock { $0 = true } }
        cancelled?.dispose()
        let later = Locked(false)
        loop.loopTimeScheduler.schedule(after: .milliseconds(30)) { later.withLock { $0 = true } }
        waitUntil("a later timer") { later.current }
        XCTAssertFalse(ran.current, "a disposed timer never runs")
        XCTAssertEqual(loop.loopTimeScheduler.schedulerDescription, "loop 'loop-time' (loop time)")
    }

    /// `loopTime` is what delays count from: on the loop thread, libuv's loop time (whole
    /// milliseconds, frozen for the callback, never after the clock), and a timer scheduled
    /// then is due exactly `loopTime + delay`; off the loop thread, the clock at the call.
    func testLoopTimeIsTheBaseDelaysCountFrom() {
        let readings = Locked<(base: UInt64, first: UInt64, second: UInt64, clock: UInt64, fired: UInt64?)?>(nil)
        loop.execute { [loop] in
            let loop = loop!
            let scheduler = loop.loopTimeScheduler
            let first = scheduler.loopTime.nanoseconds
            let clock = SchedulerInstant.now.nanoseconds
            let busyUntil = SchedulerInstant.now + .milliseconds(3)
            while SchedulerInstant.now < busyUntil {}
            let second = scheduler.loopTime.nanoseconds
            readings.withLock { $0 = (uv_now(loop.uvLoop) * 1_000_000, first, second, clock, nil) }
            scheduler.schedule(after: .milliseconds(15)) {
                let now = SchedulerInstant.now.nanoseconds
                readings.withLock { $0?.fired = now }
            }
        }
        waitUntil("the timer") { readings.current?.fired != nil }
        let value = readings.current!
        XCTAssertEqual(value.first, value.base, "on the loop thread it is uv_now in nanoseconds")
        XCTAssertEqual(value.first % 1_000_000, 0, "whole milliseconds")
        XCTAssertEqual(value.first, value.second, "frozen while the callback runs")
        XCTAssertLessThanOrEqual(value.first, value.clock, "never ahead of the clock")
        XCTAssertGreaterThanOrEqual(value.fired!, value.first + 15_000_000, "due at loopTime + delay")

        let before = SchedulerInstant.now
        let offLoop = loop.loopTimeScheduler.loopTime
        let after = SchedulerInstant.now
        XCTAssertTrue(before <= offLoop && offLoop <= after, "off the loop thread it is the clock now")
    }
}
