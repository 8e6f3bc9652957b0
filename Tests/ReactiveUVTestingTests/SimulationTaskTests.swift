import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Tasks, the virtual-time `Clock` and the blocking waits on a simulated loop.
final class SimulationTaskTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testLoopTaskStartsOnTheSimulatedLoopSoEveryJobIsTraced() throws {
        Simulation.check(seed: 21) { simulation in
            let loop = simulation.loop
            let seen = Locked<[String]>([])
            try simulation.perform {
                loop.task { _ in
                    seen.withLock { $0.append("start on \(EventLoop.current?.name ?? "no loop")") }
                    for try await tick in Signal<Int>.interval(.seconds(1)).take(2).values {
                        seen.withLock { $0.append("\(tick) at \(loop.now.nanoseconds / 1_000_000) ms") }
                    }
                }
            }
            // Nothing runs before the simulation does: the task's first job waits on the loop.
            XCTAssertEqual(seen.current, [])
            simulation.runUntilIdle()
            XCTAssertEqual(seen.current, ["start on sim", "0 at 1000 ms", "1 at 2000 ms"])
            let kinds = simulation.trace.entries.map(\.kind)
            XCTAssertEqual(kinds.dropFirst().first, .taskJob, "the task's first job runs on the loop: \(kinds)")
        }
    }

    func testTaskSleepOnTheSimulationClockWakesAtTheVirtualDeadline() throws {
        Simulation.check(seed: 22) { simulation in
            let loop = simulation.loop
            let clock = simulation.clock
            let woke = Locked<[Duration]>([])
            try simulation.perform {
                loop.task { _ in
                    try await Task.sleep(for: .seconds(5), clock: clock)
                    woke.withLock { $0.append(clock.now.offset) }
                    try await clock.sleep(until: clock.now.advanced(by: .milliseconds(250)))
                    woke.withLock { $0.append(clock.now.offset) }
                    try await clock.sleep(until: clock.now)  // due already: no timer, no wait
                    woke.withLock { $0.append(clock.now.offset) }
                }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(woke.current, [.seconds(5), .milliseconds(5250), .milliseconds(5250)])
            XCTAssertEqual(simulation.now, ms(5250))
            XCTAssertEqual(simulation.trace.entries.filter { $0.kind == .timer }.map(\.time), [ms(5000), ms(5250)])
        }
    }

    func testCancellingASleepingTaskCancelsItsTimer() throws {
        Simulation.check(seed: 23) { simulation in
            let loop = simulation.loop
            let clock = simulation.clock
            let outcome = Locked<String>("")
            try simulation.perform {
                let sleeper = loop.task { _ in
                    do {
                        try await Task.sleep(for: .seconds(60), clock: clock)
                        outcome.withLock { $0 = "slept" }
                    } catch {
                        outcome.withLock { $0 = "\(type(of: error)) at \(clock.now)" }
                    }
                }
                loop.schedule(after: .seconds(1)) { sleeper.cancel() }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(outcome.current, "CancellationError at 1.0 seconds")
            XCTAssertEqual(simulation.now, ms(1000), "the 60 s timer was cancelled, so time stops at 1 s")
        }
    }

    func testBlockingWaitsOnTheDrivingThreadRunTheSimulation() throws {
        Simulation.check(seed: 24) { simulation in
            let first = try Signal<Int>.interval(.seconds(1)).map { $0 + 10 }.first()
            XCTAssertEqual(first, 10)
            XCTAssertEqual(simulation.now, ms(1000), "first() drove the simulation to the first tick, no further")
            try Signal<Int>.interval(.seconds(1)).take(3).waitUntilCompleted()
            XCTAssertEqual(simulation.now, ms(4000))
            XCTAssertEqual(try Signal<Int>.interval(.milliseconds(100)).take(4).last(), 3)
            XCTAssertEqual(simulation.now, ms(4400))
            XCTAssertFalse(simulation.trace.entries.isEmpty)
        }
    }

    func testBlockingWaitTimesOutInVirtualTimeAndDisposesItsSubscription() throws {
        Simulation.check(seed: 25) { simulation in
            XCTAssertThrowsError(try Signal<Int>.interval(.seconds(1)).take(5).last(timeout: .milliseconds(2500))) { error in
                XCTAssertEqual((error as? TimeoutError)?.operation, "last()")
            }
            XCTAssertEqual(simulation.now, ms(2500), "the timeout is virtual time")
            // finish() (in check) fails if the interval's timer was left pending.
        }
    }

    func testBlockingWaitOnAnIdleSimulationFailsInsteadOfHanging() throws {
        Simulation.check(seed: 26) { simulation in
            simulation.loop.schedule(after: .seconds(2)) {}
            XCTAssertThrowsError(try Signal<Int>.never.first()) { error in
                XCTAssertTrue(error is SimulationMisuse, "\(error)")
                XCTAssertTrue("\(error)".contains("first() would wait forever"), "\(error)")
            }
            XCTAssertEqual(simulation.now, ms(2000), "it ran what there was before giving up")
        }
    }

    func testBlockingWaitInsideASimulatedCallbackIsRefused() throws {
        Simulation.check(seed: 27) { simulation in
            let refusal = Locked<EventLoopError?>(nil)
            simulation.loop.schedule(after: .milliseconds(1)) {
                do { _ = try Signal<Int>.never.first() } catch { refusal.withLock { $0 = error as? EventLoopError } }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(refusal.current, .calledOnLoopThread(operation: "first()", loop: "sim"))
        }
    }
}
