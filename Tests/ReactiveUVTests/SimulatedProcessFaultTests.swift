import Glibc
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Children that crash: planned (`.childCrash`), drawn from the seed (`setProcessFaults`), given
/// back as a plan, and shrunk.
final class SimulatedProcessFaultTests: XCTestCase {
    private struct AChildCrashed: Error {}

    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// `count` workers spawned at once: each writes "done" and exits 0 at 100 ms. Recorders of their exits.
    private func workers(_ simulation: Simulation, count: Int) throws -> [EventRecorder<ProcessExit>] {
        try simulation.addProgram("/usr/bin/worker") { child in
            child.lifetime.add(child.loop.schedule(after: .milliseconds(100)) {
                child.write("done")
                child.exit(status: 0)
            })
        }
        return try (0..<count).map { _ in
            try simulation.record(ChildProcess.spawn("/usr/bin/worker").flatMap { child in
                child.standardOutput?.bytes.subscribeNext { _ in }
                return child.exit
            })
        }
    }

    func testAPlannedCrashKillsTheChildItNumbersAtItsTimeAndTheRecordIsThePlan() throws {
        let plan: [SimulationFault] = [.childCrash(child: 2, at: .milliseconds(30), signal: SIGSEGV)]
        Simulation.check(seed: 121, faultPlan: plan) { simulation in
            let exits = try workers(simulation, count: 3)
            simulation.runUntilIdle()
            XCTAssertEqual(exits.map(\.values), [[ProcessExit(status: 0, signal: 0)], [ProcessExit(status: 0, signal: SIGSEGV)],
                                                 [ProcessExit(status: 0, signal: 0)]])
            XCTAssertEqual(exits[1].recorded.first?.time, ms(30))
            XCTAssertEqual(exits[0].recorded.first?.time, ms(100))
            XCTAssertEqual(simulation.injectedFaults, plan)
            XCTAssertEqual(plan.description, "[.childCrash(child: 2, at: .milliseconds(30), signal: 11)]")
        }
    }

    func testACrashPlannedBeforeItsChildIsSpawnedStrikesAtTheSpawn() throws {
        Simulation.check(seed: 122, faultPlan: [.childCrash(child: 1, at: .milliseconds(5), signal: SIGKILL)]) { simulation in
            try simulation.perform { _ = simulation.loop.schedule(after: .milliseconds(20)) {} }
            simulation.run(for: .milliseconds(20))
            let exits = try workers(simulation, count: 1)
            simulation.runUntilIdle()
            XCTAssertEqual(exits[0].values, [ProcessExit(status: 0, signal: SIGKILL)])
            XCTAssertEqual(exits[0].recorded.first?.time, ms(20))
        }
    }

    func testSeededCrashesGivenBackAsAPlanReplayTheSameTrace() throws {
        let faults = SimulationProcessFaults(crashPerMille: 500, crashWithin: .milliseconds(150))
        var injected: [SimulationFault] = []
        var seededExits: [[ProcessExit]] = []
        let seededHash = Simulation.check(seed: 123) { seeded in
            try seeded.setProcessFaults(faults)
            XCTAssertEqual(seeded.processFaults, faults)
            let exits = try workers(seeded, count: 8)
            seeded.runUntilIdle()
            injected = seeded.injectedFaults
            seededExits = exits.map(\.values)
            XCTAssertFalse(injected.isEmpty, "seed 123 draws crashes")
            let crashed = exits.filter { $0.values.first?.signal != 0 }.count
            XCTAssertGreaterThan(crashed, 0)
            XCTAssertLessThanOrEqual(crashed, injected.count, "a crash drawn after the exit strikes nothing")
        }

        let replayedHash = Simulation.check(seed: 123, faultPlan: injected) { replayed in
            try replayed.setProcessFaults(faults)
            let replayedExits = try workers(replayed, count: 8)
            replayed.runUntilIdle()
            XCTAssertEqual(replayed.injectedFaults, injected)
            XCTAssertEqual(replayedExits.map(\.values), seededExits)
        }
        XCTAssertEqual(replayedHash, seededHash)

        Simulation.check(seed: 123, faultPlan: []) { calm in
            try calm.setProcessFaults(faults)
            let calmExits = try workers(calm, count: 8)
            calm.runUntilIdle()
            XCTAssertTrue(calmExits.allSatisfy { $0.values == [ProcessExit(status: 0, signal: 0)] }, "no crash is drawn under a plan")
        }
    }

    func testSeededCrashesRunTwiceGiveOneTrace() throws {
        let hash = Simulation.check(seed: 124) { simulation in
            try simulation.setProcessFaults(SimulationProcessFaults(crashPerMille: 300, crashWithin: .milliseconds(200),
                                                                    crashSignals: [SIGSEGV, SIGKILL, SIGABRT]))
            _ = try workers(simulation, count: 6)
            simulation.runUntilIdle()
        }
        let calm = Simulation.check(seed: 124) { simulation in
            _ = try workers(simulation, count: 6)
            simulation.runUntilIdle()
        }
        XCTAssertNotEqual(hash, calm, "the crashes are in the trace")
    }

    func testShrinkingKeepsOnlyTheCrashThatFailsTheRun() throws {
        let faults: [SimulationFault] = [
            .childCrash(child: 1, at: .milliseconds(10), signal: SIGKILL),
            .childCrash(child: 3, at: .milliseconds(20), signal: SIGSEGV),
            .childCrash(child: 2, at: .milliseconds(200), signal: SIGSEGV),
        ]
        var printed: [String] = []
        let minimal = Simulation.shrink(seed: 125, faults: faults, print: { printed.append($0) }) { simulation in
            let exits = try workers(simulation, count: 3)
            simulation.runUntilIdle()
            // Fails only when the third worker crashed.
            if exits[2].values.first?.signal != 0 { throw AChildCrashed() }
        }
        XCTAssertEqual(minimal, [.childCrash(child: 3, at: .milliseconds(20), signal: SIGSEGV)])
        // The printed plan, pasted into a check, crashes the third worker in both runs.
        var crashed: [[ProcessExit]] = []
        Simulation.check(seed: 125, faultPlan: minimal) { simulation in
            let exits = try workers(simulation, count: 3)
            simulation.runUntilIdle()
            crashed.append(exits[2].values)
        }
        XCTAssertEqual(crashed, Array(repeating: [ProcessExit(status: 0, signal: SIGSEGV)], count: 2))
        XCTAssertTrue(printed.last?.hasSuffix("[\n    .childCrash(child: 3, at: .milliseconds(20), signal: 11),\n]") == true, "\(printed)")
    }

    func testBadProcessFaultsAreRefusedNamingTheField() throws {
        for (fault, message) in [(SimulationFault.childCrash(child: 0, at: .zero, signal: 9), "child number starts at 1"),
                                 (.childCrash(child: 1, at: .milliseconds(-1), signal: 9), "must not be negative"),
                                 (.childCrash(child: 1, at: .zero, signal: 65), "must be in 1...64")] {
            XCTAssertThrowsError(try Simulation(seed: 126, faultPlan: [fault])) { error in
                XCTAssertTrue("\(error)".contains(message), "\(error)")
            }
        }
        Simulation.check(seed: 126) { simulation in
            for faults in [SimulationProcessFaults(crashPerMille: 1_001), SimulationProcessFaults(crashWithin: .seconds(-1)),
                           SimulationProcessFaults(crashSignals: []), SimulationProcessFaults(crashSignals: [0])] {
                XCTAssertThrowsError(try simulation.setProcessFaults(faults))
            }
            XCTAssertEqual(simulation.processFaults, SimulationProcessFaults(), "unchanged by the refusals")
            _ = try workers(simulation, count: 1)
            simulation.runUntilIdle()
            XCTAssertThrowsError(try simulation.inject(.childCrash(child: 1, at: .seconds(1), signal: 9))) { error in
                XCTAssertTrue("\(error)".contains("already spawned"), "\(error)")
            }
            XCTAssertThrowsError(try simulation.addProgram("") { _ in })
        }
    }
}
