import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Faults written as a plan instead of drawn from the seed, the record of what a run injected,
/// and shrinking a failing run's faults to the few that make it fail.
final class SimulationFaultPlanTests: XCTestCase {
    private struct ClientWasReset: Error {}

    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// The echo server on loop "server" and `count` clients on the simulation's loop; each sends
    /// 100 bytes at once and 100 more at 50 ms, then half-closes.
    private func echo(_ simulation: Simulation, clients count: Int) throws -> [EventRecorder<[UInt8]>] {
        let server = simulation.makeLoop(name: "server")
        _ = try simulation.record(EchoServer.run(port: 7000), on: server)
        return try (0..<count).map { index in
            try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([UInt8](repeating: UInt8(index), count: 100))
                _ = connection.loop.schedule(after: .milliseconds(50)) {
                    connection.send([UInt8](repeating: UInt8(index), count: 100))
                    connection.shutdown()
                }
                return connection.bytes
            })
        }
    }

    func testAPlannedResetEndsTheConnectionItNumbersAtItsTimeAndTheRecordIsThePlan() throws {
        let plan: [SimulationFault] = [
            .partition("server", "sim", at: .milliseconds(20), for: .milliseconds(100)),
            .reset(connection: 2, at: .milliseconds(30)),
        ]
        Simulation.check(seed: 61, faultPlan: plan) { simulation in
            let clients = try echo(simulation, clients: 3)
            simulation.runUntilIdle()
            XCTAssertEqual((clients[1].terminal?.error as? UVError)?.name, "ECONNRESET")
            // The server end is reset at 30 ms; its RST reaches the client after the partition heals
            // (120 ms) and the latency.
            XCTAssertEqual(clients[1].recorded.last?.time, ms(121))
            for index in [0, 2] {
                XCTAssertEqual(clients[index].values.joined().count, 200, "client \(index) was not in the plan")
                guard case .completed? = clients[index].terminal else { return XCTFail("\(clients[index].recorded)") }
            }
            XCTAssertEqual(simulation.injectedFaults, plan)
            XCTAssertEqual(simulation.networkResetsInjected, 1)
        }
    }

    func testASeededRunsRecordGivenBackAsAPlanReplaysTheSameTrace() throws {
        let faults = SimulationNetworkFaults(jitter: .milliseconds(3), resetPerMille: 500, resetWithin: .milliseconds(40),
                                             shortReadPerMille: 300)
        var injected: [SimulationFault] = []
        let seededHash = Simulation.check(seed: 62) { seeded in
            try seeded.setNetworkFaults(faults)
            let seededClients = try echo(seeded, clients: 6)
            seeded.runUntilIdle()
            injected = seeded.injectedFaults
            XCTAssertFalse(injected.isEmpty, "seed 62 draws resets")
            XCTAssertTrue(seededClients.contains { $0.terminal?.error != nil })
        }

        let replayedHash = Simulation.check(seed: 62, faultPlan: injected) { replayed in
            try replayed.setNetworkFaults(faults)
            _ = try echo(replayed, clients: 6)
            replayed.runUntilIdle()
            XCTAssertEqual(replayed.injectedFaults, injected)
        }
        XCTAssertEqual(replayedHash, seededHash)

        // Without its resets the plan is another run.
        let calmHash = Simulation.check(seed: 62, faultPlan: []) { calm in
            try calm.setNetworkFaults(faults)
            let calmClients = try echo(calm, clients: 6)
            calm.runUntilIdle()
            XCTAssertTrue(calmClients.allSatisfy { $0.values.joined().count == 200 }, "no reset is drawn under a plan")
            XCTAssertEqual(calm.injectedFaults, [])
        }
        XCTAssertNotEqual(calmHash, seededHash)
    }

    func testShrinkingKeepsOnlyTheResetThatMakesTheRunFailAndPrintsItAsSwift() throws {
        let faults: [SimulationFault] = [
            .reset(connection: 1, at: .milliseconds(10)),
            .partition("server", "sim", at: .milliseconds(5), for: .milliseconds(30)),
            .reset(connection: 4, at: .milliseconds(12)),
            .reset(connection: 3, at: .milliseconds(15)),
            .partition("server", "sim", at: .milliseconds(60), for: .milliseconds(10)),
            .reset(connection: 2, at: .milliseconds(70)),
        ]
        var printed: [String] = []
        var runs = 0
        let minimal = Simulation.shrink(seed: 63, faults: faults, print: { printed.append($0) }) { simulation in
            runs += 1
            let clients = try echo(simulation, clients: 4)
            simulation.runUntilIdle()
            // Fails only when the third client is reset.
            if clients[2].terminal?.error != nil { throw ClientWasReset() }
        }
        XCTAssertEqual(minimal, [.reset(connection: 3, at: .milliseconds(15))])
        XCTAssertEqual(printed, ["simulation seed 63: 1 of 6 fault(s) still fail it (\(runs) runs):\n"
                                 + "let faults: [SimulationFault] = [\n    .reset(connection: 3, at: .milliseconds(15)),\n]"])
        XCTAssertEqual(runs, 7, "the whole list, a half, the other half, then one fault at a time")
        // The printed plan, pasted into a check, fails both runs alike.
        var resets = 0
        Simulation.check(seed: 63, faultPlan: minimal) { simulation in
            let clients = try echo(simulation, clients: 4)
            simulation.runUntilIdle()
            resets += clients.filter { $0.terminal?.error != nil }.count
        }
        XCTAssertEqual(resets, 2, "the third client, once in each run")
    }

    func testShrinkingARunThatDoesNotFailChangesNothingAndSaysSo() throws {
        let faults: [SimulationFault] = [.reset(connection: 9, at: .milliseconds(1))]
        var printed: [String] = []
        let kept = Simulation.shrink(seed: 64, faults: faults, print: { printed.append($0) }) { simulation in
            _ = try echo(simulation, clients: 1)
            simulation.runUntilIdle()
        }
        XCTAssertEqual(kept, faults)
        XCTAssertEqual(printed, ["simulation seed 64: the run does not fail with these 1 fault(s); nothing to shrink"])
    }

    func testABadPlanIsRefusedNamingTheFaultAndALateResetToo() throws {
        let bad: [SimulationFault] = [
            .reset(connection: 0, at: .zero),
            .reset(connection: 1, at: .milliseconds(-1)),
            .partition("a", "a", at: .zero, for: .seconds(1)),
            .partition("a", "b", at: .zero, for: .seconds(-1)),
        ]
        for fault in bad {
            XCTAssertThrowsError(try Simulation(seed: 65, faultPlan: [fault])) { error in
                XCTAssertTrue("\(error)".hasPrefix("Simulation: fault plan: a "), "\(error)")
                XCTAssertTrue("\(error)".hasSuffix("in \(fault)"), "\(error)")
            }
        }
        Simulation.check(seed: 65) { simulation in
            let clients = try echo(simulation, clients: 1)
            simulation.run(for: .milliseconds(10))
            XCTAssertThrowsError(try simulation.inject(.reset(connection: 1, at: .milliseconds(20)))) { error in
                XCTAssertEqual("\(error)", "Simulation: inject: connection 1 was already accepted; plan its reset before it connects")
            }
            simulation.runUntilIdle()
            XCTAssertEqual(clients[0].values.joined().count, 200)
            XCTAssertEqual(simulation.injectedFaults, [])
        }
    }

    func testFaultsPrintAsSwiftInTheirLargestExactUnit() {
        XCTAssertEqual(SimulationFault.reset(connection: 2, at: .seconds(3)).description, ".reset(connection: 2, at: .seconds(3))")
        XCTAssertEqual(SimulationFault.partition("a\"b", "c", at: .microseconds(1_500), for: .nanoseconds(7)).description,
                       ".partition(\"a\\\"b\", \"c\", at: .microseconds(1500), for: .nanoseconds(7))")
        XCTAssertEqual(SimulationFault.swiftCode([]), "[]")
        XCTAssertEqual(SimulationFault.reset(connection: 1, at: .zero).description, ".reset(connection: 1, at: .zero)")
    }
}
