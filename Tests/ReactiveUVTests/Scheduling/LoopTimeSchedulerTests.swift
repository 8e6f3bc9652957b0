import CLibUV
@testable import ReactiveUV
import XCTest

final class LoopTimeSchedulerTests: XCTestCase {
    private var loop: EventLoop!

    override func setUp() { loop = EventLoop(name: "loop-time") }
    override func tearDown() {
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        loop = nil
    }

    /// A callback that has run for 40 ms schedules 25 ms timers both ways: counted from
    /// the loop's time (when the iteration began) the timer is already overdue, so it
    /// runs first and well before 25 ms after the call; counted from the call it waits.
    func testOnTheLoopThreadDelaysCountFromTheIterationNotTheCall() {
        let elapsed = Locked<[String: Duration]>([:])
        let order = Locked<[String]>([])
        loop.execute { [loop] in
            let loop = loop!
            let busyUntil = SchedulerInstant.now + .milliseconds(40)
            while SchedulerInstant.now < busyUntil {}  // a long callback
            let call = SchedulerInstant.now
            loop.scheduler.schedule(after: .milliseconds(25)) {
                elapsed.withLock { $0["call"] = SchedulerInstant.now - call }
                order.withLock { $0.append("call") }
            }
            loop.loopTimeScheduler.schedule(after: .milliseconds(25)) {
                elapsed.withLock { $0["loop"] = SchedulerInstant.now - call }
                order.withLock { $0.append("loop") }
            }
        }
        waitUntil("both timers") { elapsed.current.count == 2 }
        XCTAssertEqual(order.current, ["loop", "call"])
        XCTAssertGreaterThanOrEqual(elapsed.current["call"]!, .milliseconds(25), "the loop's own scheduler counts from the call")
        XCTAssertLessThan(elapsed.current["loop"]!, .milliseconds(25),
                          "counted from the loop's time, the timer was due before the long callback ended")
    }

    /// A million-timer burst shape: every timer scheduled in one callback with the same
    /// delay gets the same deadline however long the callback takes.
    func testTimersScheduledInOneCallbackShareTheLoopTimeBase() {
        let fired = Locked<[SchedulerInstant]>([])
        loop.execute { [loop] in
            let scheduler = loop!.loopTimeScheduler
            for index in 0..<3 {
                scheduler.schedule(after: .milliseconds(30)) { fired.withLock { $0.append(SchedulerInstant.now) } }
                if index < 2 {
                    let until = SchedulerInstant.now + .milliseconds(10)
                    while SchedulerInstant.now < until {}
                }
            }
        }
        waitUntil("three timers") { fired.current.count == 3 }
        let times = fired.current
        // Counted from each call they would be 10 ms apart; from the loop's time they fire in one pass.
        XCTAssertLessThan(times[2] - times[0], .milliseconds(5), "fired at \(times)")
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
