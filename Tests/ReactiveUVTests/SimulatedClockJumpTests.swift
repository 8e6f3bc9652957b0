import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Clock jumps (`SimulationFault.clockJump`): the simulated monotonic clock moves forward by a
/// step, as a suspended machine finds it on waking; timers due in the gap fire late, at once, in
/// deadline order; the jump is in the trace. And the echo sample under short writes and reads.
final class SimulatedClockJumpTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testTimersDueInTheGapFireLateAtOnceInDeadlineOrderAndTheJumpIsTraced() throws {
        Simulation.check(seed: 101) { simulation in
            try simulation.inject(.clockJump(by: .seconds(1), at: .milliseconds(15)))
            let fired = Locked<[(String, SchedulerInstant)]>([])
            try simulation.perform {
                for (name, after) in [("30 ms", 30), ("10 ms", 10), ("20 ms", 20), ("2 s", 2_000)] {
                    _ = simulation.loop.schedule(after: .milliseconds(after)) { fired.withLock { $0.append((name, simulation.now)) } }
                }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(fired.current.map(\.0), ["10 ms", "20 ms", "30 ms", "2 s"])
            XCTAssertEqual(fired.current.map(\.1), [ms(10), ms(1_015), ms(1_015), ms(2_000)],
                           "late after the jump, on time before it and after")
            let jumps = simulation.trace.entries.filter { $0.kind == .clockJump }
            XCTAssertEqual(jumps.map(\.time), [ms(15)], "traced at the time it jumped from")
            XCTAssertEqual(jumps.first?.payload, 1_000_000_000, "the step is in the hash")
            XCTAssertEqual(simulation.injectedFaults, [.clockJump(by: .seconds(1), at: .milliseconds(15))])
        }
    }

    func testAJumpWithNothingDueWaitsForItsTimeAndRunForEndsPastItsTargetWhenCarriedThere() throws {
        Simulation.check(seed: 102, faultPlan: [.clockJump(by: .seconds(5), at: .seconds(1))]) { simulation in
            simulation.runUntilIdle()
            XCTAssertEqual(simulation.now, ms(0), "nothing to run: the clock stays")
            simulation.run(for: .milliseconds(999))
            XCTAssertEqual(simulation.now, ms(999))
            simulation.run(for: .milliseconds(10))
            XCTAssertEqual(simulation.now, ms(6_000), "the jump at 1 s carried the clock past the target")
        }
    }

    func testABackwardJumpIsRefusedAndPrintsAsSwift() throws {
        Simulation.check(seed: 103) { simulation in
            for step in [Duration.seconds(-1), .zero] {
                XCTAssertThrowsError(try simulation.inject(.clockJump(by: step, at: .zero))) { error in
                    XCTAssertTrue("\(error)".contains("a clock jump goes forward"), "\(error)")
                }
            }
            XCTAssertThrowsError(try Simulation(seed: 103, faultPlan: [.clockJump(by: .seconds(1), at: .seconds(-1))])) { error in
                XCTAssertTrue("\(error)".contains("time must not be negative"), "\(error)")
            }
            XCTAssertEqual("\(SimulationFault.clockJump(by: .seconds(30), at: .milliseconds(250)))",
                           ".clockJump(by: .seconds(30), at: .milliseconds(250))")
            XCTAssertEqual(simulation.injectedFaults, [])
        }
    }

    func testTheEchoSampleReturnsEveryByteInOrderUnderShortWritesAndReads() throws {
        Simulation.check(seed: 104) { simulation in
            try simulation.setNetworkFaults(SimulationNetworkFaults(jitter: .milliseconds(2), shortReadPerMille: 300,
                                                                    shortWritePerMille: 500))
            let server = simulation.makeLoop(name: "server")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let payloads = [300_000, 10, 70_000].enumerated().map { index, count in
                (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ index) }
            }
            let clients = try payloads.map { bytes in
                try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                    connection.send(bytes)
                    connection.shutdown()
                    return connection.bytes
                })
            }
            simulation.runUntilIdle()
            for (index, client) in clients.enumerated() {
                XCTAssertTrue(Array(client.values.joined()) == payloads[index], "client \(index) got its bytes back in order")
                guard case .completed? = client.terminal else { return XCTFail("client \(index): \(String(describing: client.terminal))") }
            }
        }
    }
}
