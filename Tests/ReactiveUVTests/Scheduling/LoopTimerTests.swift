import Foundation
@testable import ReactiveUV
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

    /// A repeating schedule whose work takes half the interval stays on start + N·interval.
    func testRepeatingScheduleDoesNotDrift() {
        let interval = Duration.milliseconds(30), busy = Duration.milliseconds(15)
        let start = SchedulerInstant.now
        let ticks = Locked<[Duration]>([])
        let timer = loop.schedule(after: interval, repeatingEvery: interval) {
            ticks.withLock { $0.append(SchedulerInstant.now - start) }
            let until = SchedulerInstant.now + busy
            while SchedulerInstant.now < until {}  // work that takes time
        }
        waitUntil("ten ticks") { ticks.current.count >= 10 }
        timer?.dispose()
        let times = Array(ticks.current.prefix(10))
        for (index, time) in times.enumerated() {
            XCTAssertGreaterThanOrEqual(time, interval * (index + 1), "tick \(index + 1) came early")
        }
        // A timer that restarted from each callback would be at >= 10 × 45 ms = 450 ms here.
        XCTAssertLessThan(times[9], interval * 10 + .milliseconds(100), "ticks drifted: \(times.map(milliseconds))")
    }

    /// Ticks missed while the loop was blocked are coalesced, not fired in a burst.
    func testRepeatingScheduleCoalescesMissedTicks() {
        let ticks = Locked<[SchedulerInstant]>([])
        loop.execute {
            let until = SchedulerInstant.now + .milliseconds(100)
            while SchedulerInstant.now < until {}  // block the loop for ten intervals
        }
        let timer = loop.schedule(after: .milliseconds(10), repeatingEvery: .milliseconds(10)) {
            ticks.withLock { $0.append(SchedulerInstant.now) }
        }
        waitUntil("four ticks") { ticks.current.count >= 4 }
        timer?.dispose()
        let times = ticks.current
        for (a, b) in zip(times, times.dropFirst()) {
            XCTAssertGreaterThan(b - a, .milliseconds(1), "a burst of catch-up ticks: \(times)")
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
        waitUntil("the chain") { state.current.chain == chainLength }
        let sawAt = state.current.timerSawChainAt
        XCTAssertNotNil(sawAt)
        XCTAssertLessThan(sawAt ?? .max, chainLength, "the 5 ms timer only ran after the whole chain")
    }
}

extension Duration {
    static func * (lhs: Duration, rhs: Int) -> Duration { lhs * Int64(rhs) }
}
