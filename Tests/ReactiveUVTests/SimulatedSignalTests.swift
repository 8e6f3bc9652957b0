import Glibc
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `Signal.unixSignals` on a simulation: the test sends OS signals at virtual times.
final class SimulatedSignalTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testSentSignalsReachEveryWatchOfTheirNumberAtTheirTimes() throws {
        Simulation.check(seed: 141) { simulation in
            let other = simulation.makeLoop(name: "other")
            let both = try simulation.record(Signal<Int32>.unixSignals([SIGTERM, SIGHUP]))
            let hangups = try simulation.record(Signal<Int32>.unixSignals([SIGHUP]), on: other)
            try simulation.send(signal: SIGHUP, at: .milliseconds(20))
            try simulation.send(signal: SIGTERM, at: .milliseconds(50))
            try simulation.send(signal: SIGWINCH, at: .milliseconds(60))
            simulation.runUntilIdle()
            XCTAssertEqual(both.values, [SIGHUP, SIGTERM])
            XCTAssertEqual(both.recorded.map(\.time), [ms(20), ms(50)])
            XCTAssertEqual(hangups.values, [SIGHUP])
            XCTAssertEqual(hangups.recorded.map(\.loopName), ["other"])
            XCTAssertEqual(hangups.recorded.map(\.time), [ms(20)])
        }
    }

    func testAServerThatStopsOnSIGTERMStopsAtTheSignalsVirtualTime() throws {
        Simulation.check(seed: 142) { simulation in
            // Ticks every 10 ms until SIGTERM, as a daemon's work loop would.
            let ticks = try simulation.record(Signal<Int>.interval(.milliseconds(10))
                .take(until: Signal<Int32>.unixSignals([SIGTERM, SIGINT])))
            try simulation.send(signal: SIGINT, at: .milliseconds(35))
            simulation.runUntilIdle()
            XCTAssertEqual(ticks.values, [0, 1, 2])
            XCTAssertEqual(ticks.recorded.last?.time, ms(35))
            guard case .completed? = ticks.terminal else { return XCTFail("\(ticks.recorded)") }
        }
    }

    func testASignalNobodyWatchesIsAProblemWhenItWouldKillAndDroppedWhenIgnoredByDefault() throws {
        let problems = Simulation.checkReportingProblems(seed: 143) { simulation in
            try simulation.send(signal: SIGWINCH, at: .milliseconds(1))
            try simulation.send(signal: SIGTERM, at: .milliseconds(2))
            simulation.runUntilIdle()
        }.problems
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertTrue(problems.first?.hasPrefix("signal 15 sent at 2000000 ns found no Signal.unixSignals watching it") == true,
                      "\(problems)")
    }

    func testWatchingAnUncatchableSignalIsEINVALAndABadSendIsRefused() throws {
        Simulation.check(seed: 144) { simulation in
            let kill = try simulation.record(Signal<Int32>.unixSignals([SIGTERM, SIGKILL]))
            let zero = try simulation.record(Signal<Int32>.unixSignals([0]))
            simulation.runUntilIdle()
            XCTAssertEqual((kill.terminal?.error as? UVError)?.code, UVError.invalidArgumentCode)
            XCTAssertEqual((zero.terminal?.error as? UVError)?.code, UVError.invalidArgumentCode)
            XCTAssertThrowsError(try simulation.send(signal: 65, at: .zero))
            XCTAssertThrowsError(try simulation.send(signal: SIGTERM, at: .milliseconds(-1)))
        }
    }

    func testTheSignalsNumberIsInTheTrace() throws {
        func sending(_ number: Int32) -> (Simulation) throws -> Void {
            { simulation in
                _ = try simulation.record(Signal<Int32>.unixSignals([SIGUSR1, SIGUSR2]))
                try simulation.send(signal: number, at: .milliseconds(5))
                simulation.runUntilIdle()
            }
        }
        XCTAssertNotEqual(Simulation.check(seed: 145, sending(SIGUSR1)), Simulation.check(seed: 145, sending(SIGUSR2)))
    }

    func testAWatchLeftOpenIsReportedAndADisposedOneGetsNothing() throws {
        Simulation.checkReportingProblems(seed: 146) { simulation in
            let disposed = try simulation.record(Signal<Int32>.unixSignals([SIGUSR1]))
            let kept = try simulation.perform { Signal<Int32>.unixSignals([SIGUSR2]).subscribeNext { _ in } }
            disposed.dispose()
            try simulation.send(signal: SIGUSR1, at: .milliseconds(1))
            simulation.runUntilIdle()
            XCTAssertEqual(disposed.values, [])
            let report = simulation.finish()
            XCTAssertEqual(report.leakedHandles.map(\.label), ["signals [\(SIGUSR2)] from Signal.unixSignals (simulated)"])
            XCTAssertTrue(report.problems.contains { $0.hasPrefix("signal \(SIGUSR1) sent at 1000000 ns found no") }, "\(report.problems)")
            kept.dispose()
        }
    }
}
