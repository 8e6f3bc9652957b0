import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `ThreadPool.run` on a simulated loop: the work runs as a callback of the simulation (no loop current),
/// its result arrives on the loop after the job's virtual duration; disposal, errors and shutdown as on a
/// real loop.
final class SimulatedThreadPoolTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    private struct WorkFailed: Error, Equatable {}

    func testTheWorkRunsAsAPoolCallbackAndItsResultArrivesAfterItsDuration() throws {
        Simulation.check(seed: 81) { simulation in
            let loopsSeen = Locked<[String?]>([])
            let job = try simulation.record(ThreadPool.run { () -> Int in
                loopsSeen.append(EventLoop.current?.name)
                return 42
            })
            simulation.runUntilIdle()
            XCTAssertEqual(loopsSeen.current, [nil], "the work ran once, as on a pool thread: no loop current")
            XCTAssertEqual(job.values, [42])
            XCTAssertEqual(job.terminal.map { "\($0)" }, "completed")
            XCTAssertEqual(job.recorded.map(\.time), [ms(1), ms(1)], "the default duration: 1 ms after the work")
            XCTAssertEqual(job.recorded.map(\.loopName), ["sim", "sim"])
            let pool = simulation.trace.entries.filter { $0.kind == .poolWork }
            XCTAssertEqual(pool.map(\.description), ["0.000 ms  loop 'sim': pool work"])
            XCTAssertEqual(simulation.poolJobsRun, 1)
        }
    }

    func testAnErrorTheWorkThrowsReachesTheSubscriber() throws {
        Simulation.check(seed: 82) { simulation in
            try simulation.setThreadPool(SimulationThreadPool(workDuration: .milliseconds(7)))
            let job = try simulation.record(ThreadPool.run { () -> Int in throw WorkFailed() })
            simulation.runUntilIdle()
            XCTAssertEqual(job.values, [])
            XCTAssertEqual(job.terminal?.error as? WorkFailed, WorkFailed())
            XCTAssertEqual(job.recorded.map(\.time), [ms(7)])
        }
    }

    func testAJobDisposedBeforeItsWorkRanNeverRunsAndOneDisposedAfterDropsItsResult() throws {
        Simulation.check(seed: 83) { simulation in
            try simulation.setThreadPool(SimulationThreadPool(workDuration: .milliseconds(10)))
            let runs = Locked(0)
            let work: @Sendable () -> Int = {
                runs.withLock { $0 += 1 }
                return 1
            }
            // Subscribed and disposed in one callback: the pool never got to it.
            try simulation.perform {
                ThreadPool.run(work).subscribe(next: { _ in XCTFail("a value after the dispose") }).dispose()
            }
            simulation.runUntilIdle()
            XCTAssertEqual(runs.current, 0)
            XCTAssertEqual(simulation.poolJobsRun, 0)

            // Disposed while its result is on its way: the work ran, nothing is delivered.
            let late = try simulation.record(ThreadPool.run(work))
            simulation.run(for: .milliseconds(5))
            XCTAssertEqual(runs.current, 1)
            XCTAssertEqual(late.recorded.count, 0)
            try simulation.perform { late.dispose() }
            simulation.runUntilIdle()
            XCTAssertEqual(late.recorded.count, 0, "the result is dropped")
            XCTAssertEqual(simulation.now, ms(5), "the delivery's timer was cancelled: nothing left to wait for")
        }
    }

    func testTheLoopsShutdownEndsAWaitingJobAndOneOnItsWayWithShutDown() throws {
        Simulation.check(seed: 84) { simulation in
            let other = simulation.makeLoop(name: "other")
            let runs = Locked(0)
            let work: @Sendable () -> Int = {
                runs.withLock { $0 += 1 }
                return 1
            }
            let running = try simulation.record(ThreadPool.run(work), on: other)
            simulation.run(for: .microseconds(500))
            XCTAssertEqual(runs.current, 1, "its work ran; the result is due at 1 ms")
            let waiting = try simulation.record(ThreadPool.run(work), on: other)
            _ = try other.tryShutdown()
            for job in [running, waiting] {
                XCTAssertEqual(job.values, [])
                guard case .shutDown(let name)? = job.terminal?.error as? EventLoopError else {
                    return XCTFail("expected shutDown, got \(String(describing: job.terminal))")
                }
                XCTAssertEqual(name, "other")
            }
            simulation.runUntilIdle()
            XCTAssertEqual(runs.current, 1, "the waiting job's work never ran")
        }
    }

    func testJobDurationsAreDrawnFromTheSeedWithinTheJitter() throws {
        func run(_ simulation: Simulation) throws -> [SchedulerInstant] {
            try simulation.setThreadPool(SimulationThreadPool(workDuration: .milliseconds(2), jitter: .milliseconds(3)))
            XCTAssertEqual(simulation.threadPool, SimulationThreadPool(workDuration: .milliseconds(2), jitter: .milliseconds(3)))
            let jobs = try simulation.record(Signal.merge((0..<20).map { index in ThreadPool.run { index } }))
            simulation.runUntilIdle()
            XCTAssertEqual(Set(jobs.values), Set(0..<20))
            XCTAssertEqual(simulation.poolJobsRun, 20)
            return jobs.recorded.filter { $0.event.value != nil }.map(\.time)
        }
        var first: [SchedulerInstant] = []
        Simulation.check(seed: 85) { simulation in
            let times = try run(simulation)
            XCTAssertTrue(times.allSatisfy { $0 >= ms(2) && $0 <= ms(5) }, "\(times)")
            XCTAssertGreaterThan(Set(times).count, 1, "drawn, not fixed: \(times)")
            first = times
        }
        let again = Simulation(seed: 85)
        XCTAssertEqual(try run(again), first, "one seed, one set of durations")
        XCTAssertTrue(again.finish().isClean)
    }

    func testANegativeDurationIsRefusedNamingTheField() throws {
        let simulation = Simulation(seed: 86)
        XCTAssertThrowsError(try simulation.setThreadPool(SimulationThreadPool(workDuration: .milliseconds(-1)))) { error in
            XCTAssertTrue("\(error)".contains("workDuration must not be negative"), "\(error)")
        }
        XCTAssertThrowsError(try simulation.setThreadPool(SimulationThreadPool(jitter: .nanoseconds(-1)))) { error in
            XCTAssertTrue("\(error)".contains("jitter must not be negative"), "\(error)")
        }
        XCTAssertEqual(simulation.threadPool, SimulationThreadPool(), "unchanged")
        XCTAssertTrue(simulation.finish().isClean)
    }
}
