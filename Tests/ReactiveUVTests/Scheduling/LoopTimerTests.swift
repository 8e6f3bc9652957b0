import CLibUV
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class LoopTimerTests: XCTestCase {
    private var loop: EventLoop!

    override func setUp() { loop = EventLoop(name: "timers") }
    override func tearDown() {
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        loop = nil
    }

    /// Every delay, scheduled from the loop thread and from another thread, fires no earlier than asked.
    func testOneShotTimersNeverFireEarly() {
        let delays: [Duration] = [.microseconds(300), .milliseconds(1), .milliseconds(3), .milliseconds(7), .milliseconds(20)]
        let elapsed = Locked<[String: Duration]>([:])
        for (index, delay) in delays.enumerated() {
            let offStart = SchedulerInstant.now
            loop.schedule(after: delay) { elapsed.withLock { $0["off-\(index)"] = SchedulerInstant.now - offStart } }
            loop.execute { [loop] in
                let onStart = SchedulerInstant.now
                loop!.schedule(after: delay) { elapsed.withLock { $0["on-\(index)"] = SchedulerInstant.now - onStart } }
            }
        }
        waitUntil("every timer") { elapsed.current.count == delays.count * 2 }
        for (index, delay) in delays.enumerated() {
            for side in ["off", "on"] {
                let took = elapsed.current["\(side)-\(index)"]!
                XCTAssertGreaterThanOrEqual(took, delay, "\(side)-loop timer of \(delay) fired after only \(took)")
            }
        }
        XCTAssertEqual(try loop.openHandles(), [], "one-shot timers close after firing")
    }

    /// A repeating schedule whose work takes half the interval stays on its grid: each tick
    /// is due exactly at the first deadline + N·interval (a tick that came too late to make a
    /// grid point skips it, it never shifts the grid). Checked on the deadlines the timer was
    /// given, read on the loop thread, so a loaded machine cannot fail it.
    func testRepeatingScheduleDoesNotDrift() throws {
        let interval = Duration.milliseconds(30), busy = Duration.milliseconds(15)
        let step: UInt64 = 30_000_000
        let timer = Locked<ScheduledTimer?>(nil)
        let scheduled = Locked<(start: UInt64, first: UInt64?)?>(nil)
        let ticks = Locked<[(firedAt: UInt64, next: UInt64?)]>([])
        loop.execute { [loop] in
            let start = SchedulerInstant.now.nanoseconds
            let repeating = loop!.schedule(after: interval, repeatingEvery: interval) {
                let firedAt = SchedulerInstant.now.nanoseconds
                // The queue moved the deadline on before it called us: this is the next tick's.
                let next = timer.current?.deadline
                ticks.withLock { $0.append((firedAt, next)) }
                let until = SchedulerInstant.now + busy
                while SchedulerInstant.now < until {}  // work that takes time
            } as? ScheduledTimer
            // Set before this callback returns, so before the first tick can run.
            timer.withLock { $0 = repeating }
            scheduled.withLock { $0 = (start, repeating?.deadline) }
        }
        waitUntil("ten ticks") { ticks.current.count >= 10 }
        timer.current?.dispose()
        let value = try XCTUnwrap(scheduled.current)
        let first = try XCTUnwrap(value.first, "loop.schedule(after:repeatingEvery:) returns its ScheduledTimer")
        XCTAssertGreaterThanOrEqual(first, value.start + step, "the first tick is due an interval after the call")
        var due = first
        for (index, tick) in ticks.current.prefix(10).enumerated() {
            XCTAssertGreaterThanOrEqual(tick.firedAt, due, "tick \(index + 1) came before its deadline")
            let next = try XCTUnwrap(tick.next)
            // A timer restarted from each callback would be due at its callback's time + 30 ms: off the grid.
            XCTAssertGreaterThan(next, due, "tick \(index + 1): the next deadline did not move on")
            XCTAssertEqual((next &- first) % step, 0,
                           "tick \(index + 1): the next deadline \(next) left the grid \(first) + N·30 ms (drifted by \((next &- first) % step) ns)")
            due = next
        }
    }

    /// Ticks missed while the loop was blocked are coalesced, not fired in a burst: after the
    /// block the next deadline is the first grid point still ahead, and every tick runs in a
    /// later pass of the loop than the one before.
    func testRepeatingScheduleCoalescesMissedTicks() throws {
        let step: UInt64 = 10_000_000
        let timer = Locked<ScheduledTimer?>(nil)
        let first = Locked<UInt64?>(nil)
        let ticks = Locked<[(loopTime: UInt64, next: UInt64?)]>([])
        loop.execute { [loop] in
            let loop = loop!
            let repeating = loop.schedule(after: .milliseconds(10), repeatingEvery: .milliseconds(10)) {
                let loopTime = uv_now(loop.uvLoop) * 1_000_000
                let next = timer.current?.deadline
                ticks.withLock { $0.append((loopTime, next)) }
            } as? ScheduledTimer
            timer.withLock { $0 = repeating }
            first.withLock { $0 = repeating?.deadline }
            let until = SchedulerInstant.now + .milliseconds(100)
            while SchedulerInstant.now < until {}  // block the loop for ten intervals
        }
        waitUntil("four ticks") { ticks.current.count >= 4 }
        timer.current?.dispose()
        let start = try XCTUnwrap(first.current, "loop.schedule(after:repeatingEvery:) returns its ScheduledTimer")
        let runs = ticks.current
        // The block ended at least 90 ms after the first deadline (it began after the call, 10 ms
        // before that deadline): the grid points up to first + 90 ms were all missed.
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(runs[0].next), start + 10 * step,
                                    "the first tick after the block left missed ticks due: \(runs)")
        for (index, tick) in runs.enumerated() {
            let next = try XCTUnwrap(tick.next)
            XCTAssertGreaterThan(next, tick.loopTime, "tick \(index + 1) left a catch-up tick already due: \(runs)")
            XCTAssertEqual((next &- start) % step, 0, "tick \(index + 1): the next deadline left the grid: \(runs)")
        }
        for (a, b) in zip(runs, runs.dropFirst()) {
            XCTAssertLessThan(a.loopTime, b.loopTime, "two ticks in one pass, a burst: \(runs)")
        }
    }

    func testDisposingATimerFromAnotherThreadStopsIt() {
        let fired = Locked(false)
        let sentinel = Locked(false)
        let timer = loop.schedule(after: .milliseconds(40)) { fired.withLock { $0 = true } }
        timer?.dispose()
        XCTAssertEqual(timer?.isDisposed, true)
        loop.schedule(after: .milliseconds(80)) { sentinel.withLock { $0 = true } }
        waitUntil("a later timer") { sentinel.current }
        XCTAssertFalse(fired.current)
        XCTAssertEqual(try loop.openHandles(), [])
    }

    /// Zero-delay work chained a million times cannot starve a due timer (no 0 ms libuv timer busy loop).
    func testZeroDelayChainsDoNotStarveTimers() {
        let chainLength = 1_000_000
        let state = Locked<(chain: Int, timerSawChainAt: Int?)>((0, nil))
        loop.execute { [loop] in
            let loop = loop!
            loop.schedule(after: .milliseconds(5)) {
                state.withLock { $0.timerSawChainAt = $0.chain }
            }
            @Sendable func step() {
                let count = state.withLock { s -> Int in s.chain += 1; return s.chain }
                if count < chainLength { loop.schedule(after: .zero) { step() } }
            }
            step()
        }
        // A million loop turns: about 4 s under the thread sanitizer, more on a loaded machine (the wait only guards a hang).
        waitUntil("the chain", timeout: .seconds(120)) { state.current.chain == chainLength }
        let sawAt = state.current.timerSawChainAt
        XCTAssertNotNil(sawAt)
        XCTAssertLessThan(sawAt ?? .max, chainLength, "the 5 ms timer only ran after the whole chain")
    }
}

extension Duration {
    static func * (lhs: Duration, rhs: Int) -> Duration { lhs * Int64(rhs) }
}
