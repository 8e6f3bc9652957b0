import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// The simulated loop: production timers, run queues and time operators on virtual time.
final class SimulationTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testTimersRunAtExactVirtualTimesAndTheClockJumps() throws {
        Simulation.check(seed: 1) { simulation in
            let recorder = try simulation.record(Signal<Int>.interval(.seconds(1)).take(3))
            let log = Locked<[SchedulerInstant]>([])
            simulation.loop.schedule(after: .milliseconds(1500)) { log.withLock { $0.append(simulation.loop.now) } }
            XCTAssertEqual(simulation.runUntilIdle(), 5, "three ticks, the take's teardown is inline, one timer")
            XCTAssertEqual(recorder.values, [0, 1, 2])
            XCTAssertEqual(recorder.recorded.map(\.time), [ms(1000), ms(2000), ms(3000), ms(3000)])
            XCTAssertEqual(recorder.recorded.map(\.loopName), Array(repeating: "sim", count: 4))
            XCTAssertEqual(log.current, [ms(1500)])
            XCTAssertEqual(simulation.now, ms(3000), "idle once the last timer ran")
        }
    }

    func testRunForStopsAtExactlyItsEndAndLeavesLaterTimersPending() throws {
        Simulation.check(seed: 2) { simulation in
            let recorder = try simulation.record(Signal<Int>.interval(.seconds(1)))
            simulation.run(for: .milliseconds(2500))
            XCTAssertEqual(recorder.values, [0, 1])
            XCTAssertEqual(simulation.now, ms(2500))
            simulation.run(for: .milliseconds(500))
            XCTAssertEqual(recorder.values, [0, 1, 2], "the tick due at exactly the end runs")
            XCTAssertEqual(simulation.now, ms(3000))
        }
    }

    func testRunQueueKeepsSubmissionOrderAndRunsBeforeTimeMoves() throws {
        Simulation.check(seed: 3) { simulation in
            let log = Locked<[String]>([])
            let loop = simulation.loop
            try simulation.perform {
                loop.execute { log.withLock { $0.append("a") } }
                loop.schedule { log.withLock { $0.append("b") } }
                loop.schedule(after: .milliseconds(1)) { log.withLock { $0.append("timer") } }
                loop.execute {
                    log.withLock { $0.append("c") }
                    loop.execute { log.withLock { $0.append("d, queued by c") } }
                }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(log.current, ["a", "b", "c", "d, queued by c", "timer"])
            XCTAssertEqual(simulation.trace.entries.map(\.kind),
                           [.perform, .queuedWork, .queuedWork, .queuedWork, .queuedWork, .timer])
            XCTAssertEqual(simulation.trace.entries.map(\.time), [ms(0), ms(0), ms(0), ms(0), ms(0), ms(1)])
        }
    }

    func testTimeOperatorsRunOnVirtualTime() throws {
        Simulation.check(seed: 4) { simulation in
            // Values at 0, 10, 20, 100 ms, then completion at 300 ms.
            let source = Signal<Int> { subscriber in
                let loop = EventLoop.current!
                let steps: [(UInt64, Int?)] = [(0, 1), (10, 2), (20, 3), (100, 4), (300, nil)]
                let timers = CompoundDisposable()
                for (at, value) in steps {
                    let timer = loop.schedule(after: .milliseconds(Int64(at))) {
                        if let value { subscriber.sendNext(value) } else { subscriber.sendCompleted() }
                    }
                    if let timer { timers.add(timer) }
                }
                return timers
            }
            let delayed = try simulation.record(source.delay(.milliseconds(50)))
            let debounced = try simulation.record(source.debounce(.milliseconds(30)))
            let throttled = try simulation.record(source.throttle(.milliseconds(30), latest: true))
            let buffered = try simulation.record(source.buffer(every: .milliseconds(50)))
            let timedOut = try simulation.record(source.timeout(.milliseconds(150)))
            let idle = try simulation.record(source.timeout(idle: .milliseconds(60)))
            simulation.runUntilIdle()

            XCTAssertEqual(delayed.values, [1, 2, 3, 4])
            XCTAssertEqual(delayed.recorded.map(\.time), [ms(50), ms(60), ms(70), ms(150), ms(350)])
            XCTAssertEqual(debounced.values, [3, 4])
            XCTAssertEqual(debounced.recorded.map(\.time), [ms(50), ms(130), ms(300)])
            XCTAssertEqual(buffered.values, [[1, 2, 3], [4]])
            XCTAssertEqual(buffered.recorded.map(\.time), [ms(50), ms(150), ms(300)])
            XCTAssertEqual(timedOut.values, [1, 2, 3, 4])
            XCTAssertEqual(timedOut.recorded.last?.time, ms(150))
            XCTAssertNotNil(timedOut.recorded.last?.event.error, "no completion within 150 ms")
            XCTAssertEqual(idle.values, [1, 2, 3])
            XCTAssertEqual(idle.recorded.last?.time, ms(80), "60 ms of silence after the value at 20 ms")
            XCTAssertEqual(throttled.values, [1, 3, 4], "the first at once, the newest at the window's end")
            XCTAssertEqual(throttled.recorded.map(\.time), [ms(0), ms(30), ms(100), ms(300)])
        }
    }

    func testDeliverOnAndSubscribeOnHopBetweenTwoSimulatedLoops() throws {
        Simulation.check(seed: 5) { simulation in
            let other = simulation.makeLoop(name: "other")
            let ticks = Signal<Int>.interval(.milliseconds(10)).take(2)
            let delivered = try simulation.record(ticks.deliver(on: other))
            let subscribedOn = try simulation.record(
                Signal<String> { subscriber in
                    subscriber.sendNext(EventLoop.current?.name ?? "none")
                    subscriber.sendCompleted()
                    return nil
                }.subscribe(on: other))
            simulation.runUntilIdle()
            XCTAssertEqual(delivered.values, [0, 1])
            XCTAssertEqual(delivered.recorded.map(\.loopName), ["other", "other", "other"])
            XCTAssertEqual(delivered.recorded.map(\.time), [ms(10), ms(20), ms(20)])
            XCTAssertEqual(subscribedOn.values, ["other"], "the subscription ran on the other loop")
            XCTAssertEqual(subscribedOn.recorded.map(\.time), [ms(0), ms(0)])
            XCTAssertTrue(simulation.trace.entries.contains { $0.loopName == "other" && $0.kind == .inboxWork })
        }
    }

    /// Two loops whose timers fall due at the same virtual time: the seed decides who goes first.
    private func racingTimers(seed: UInt64) -> (order: [String], hash: UInt64) {
        let log = Locked<[String]>([])
        let hash = Simulation.check(seed: seed) { simulation in
            log.withLock { $0 = [] }
            let other = simulation.makeLoop(name: "b")
            for (loop, name) in [(simulation.loop, "a"), (other, "b")] {
                try simulation.perform(on: loop) {
                    loop.schedule(after: .milliseconds(5)) { log.withLock { $0.append(name) } }
                }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(simulation.now, ms(5))
        }
        return (log.current, hash)
    }

    func testSeedsPickTheOrderOfReadyCallbacksAndOneSeedReplaysIt() {
        var orders: [[String]: UInt64] = [:]
        var hashes: [UInt64: [String]] = [:]
        for seed: UInt64 in 1...16 {
            let (order, hash) = racingTimers(seed: seed)
            XCTAssertEqual(order.sorted(), ["a", "b"])
            XCTAssertEqual(racingTimers(seed: seed).hash, hash, "seed \(seed) replays its trace")
            orders[order] = seed
            if let seen = hashes[hash] { XCTAssertEqual(seen, order, "one hash, one order") }
            hashes[hash] = order
        }
        XCTAssertEqual(Set(orders.keys), [["a", "b"], ["b", "a"]], "some seed runs each loop first")
        XCTAssertEqual(hashes.count, 2, "two orders, two trace hashes")
    }

    func testCheckModeFindsADivergence() {
        var runs = 0
        let (first, second, problems) = Simulation.replay(seed: 9) { simulation in
            runs += 1
            // A program that depends on something outside the seed: the second run waits longer.
            simulation.loop.schedule(after: .milliseconds(runs == 1 ? 1 : 2)) {}
            simulation.runUntilIdle()
        }
        XCTAssertEqual(runs, 2)
        XCTAssertEqual(problems, [])
        XCTAssertNotEqual(first.hash, second.hash)
        XCTAssertEqual(Simulation.firstDifference(first.entries, second.entries),
                       "callback #1 was 1.000 ms  loop 'sim': timer, then 2.000 ms  loop 'sim': timer")
    }

    func testFinishReportsATimerLeftPendingAndShutsTheLoopsDown() {
        Simulation.checkReportingProblems(seed: 6) { simulation in
            let other = simulation.makeLoop(name: "other")
            other.schedule(after: .seconds(60)) {}
            simulation.run(for: .seconds(1))
            let report = simulation.finish()
            XCTAssertEqual(report.leakedHandles.map(\.kind), ["timer"])
            XCTAssertEqual(report.loopCloseResult, 0)
            XCTAssertTrue(simulation.loop.isShutDown && other.isShutDown)
        }
    }

    func testShutdownFromACallbackRunsAsACallbackAndEndsTimerSignals() throws {
        Simulation.check(seed: 7) { simulation in
            let loop = simulation.loop
            let recorder = try simulation.record(Signal<Int>.interval(.seconds(1)))
            loop.schedule(after: .milliseconds(2500)) { loop.shutdown() }
            simulation.runUntilIdle()
            XCTAssertTrue(loop.isShutDown)
            XCTAssertEqual(recorder.values, [0, 1])
            XCTAssertEqual(recorder.terminal?.error as? EventLoopError, .shutDown(loop: "sim"))
            XCTAssertEqual(simulation.trace.entries.last?.kind, .shutdown)
            XCTAssertEqual(simulation.trace.entries.last?.time, ms(2500))
        }
    }

    func testRunUntilIdleNotesRepeatingWorkThatNeverIdles() throws {
        let problems = Simulation.checkReportingProblems(seed: 8) { simulation in
            _ = try simulation.record(Signal<Int>.interval(.seconds(1)))
            XCTAssertEqual(simulation.runUntilIdle(limit: 10), 10)
            XCTAssertEqual(simulation.now, ms(10_000))
        }.problems
        XCTAssertEqual(problems.count, 1)
        XCTAssertTrue(problems[0].contains("use run(for:)"), problems[0])
    }

    func testPerformRefusesALoopOfAnotherSimulation() {
        let stranger = Simulation(seed: 10)
        Simulation.check(seed: 10) { simulation in
            XCTAssertThrowsError(try simulation.perform(on: stranger.loop) {}) { error in
                XCTAssertTrue("\(error)".contains("not one of this simulation's"), "\(error)")
            }
        }
        XCTAssertTrue(stranger.finish().isClean)
    }

    func testTaskPreferringASimulatedLoopRunsItsJobsThere() throws {
        Simulation.check(seed: 11) { simulation in
            let loop = simulation.loop
            let seen = Locked<[String]>([])
            try simulation.perform {
                Task(executorPreference: loop) {
                    for try await tick in Signal<Int>.interval(.seconds(1)).take(2).values {
                        seen.withLock { $0.append("\(tick) at \(loop.now.nanoseconds / 1_000_000) ms on \(EventLoop.current?.name ?? "?")") }
                    }
                    seen.withLock { $0.append("done") }
                }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(seen.current, ["0 at 1000 ms on sim", "1 at 2000 ms on sim", "done"])
            XCTAssertTrue(simulation.trace.entries.contains { $0.kind == .taskJob })
        }
    }

    func testRunningFromInsideACallbackRunsNothingAndIsReported() throws {
        let problems = Simulation.checkReportingProblems(seed: 12) { simulation in
            let ranInside = Locked<Int>(-1)
            let performError = Locked<String>("")
            simulation.loop.schedule(after: .milliseconds(1)) {
                ranInside.withLock { $0 = simulation.runUntilIdle() }
                do { try simulation.perform {} } catch { performError.withLock { $0 = "\(error)" } }
            }
            simulation.loop.schedule(after: .milliseconds(2)) {}
            simulation.runUntilIdle()
            XCTAssertEqual(ranInside.current, 0)
            XCTAssertTrue(performError.current.contains("from inside a simulated callback"), performError.current)
            XCTAssertEqual(simulation.now, ms(2), "the outer run went on")
        }.problems
        XCTAssertEqual(problems, ["runUntilIdle() was called from inside a simulated callback, and ran nothing"])
    }
}
