import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Families with no simulated backend refuse a simulated loop with `ENOTSUP` instead of hanging,
/// and a simulation's `EventLoopGroup` works as a group of real loops does.
final class SimulationRefusalTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// Subscribes on the simulation's loop and expects the family's refusal as the only event.
    private func assertRefused<Value>(_ signal: Signal<Value>, family: String, _ simulation: Simulation,
                                      line: UInt = #line) throws {
        let recorder = try simulation.record(signal)
        simulation.runUntilIdle()
        XCTAssertEqual(recorder.recorded.count, 1, "one event: the error", line: line)
        guard let error = recorder.terminal?.error as? UVError else {
            return XCTFail("\(family): expected a UVError, got \(String(describing: recorder.terminal))", line: line)
        }
        XCTAssertEqual(error, UVError.notSupported, line: line)
        XCTAssertTrue(error.message.hasPrefix("\(family) has no simulated backend yet"), error.message, line: line)
        XCTAssertEqual(error.context, "simulated loop 'sim'", line: line)
    }

    func testUnsimulatedFamiliesRefuseASimulatedLoopWithENOTSUP() throws {
        Simulation.check(seed: 31) { simulation in
            try assertRefused(UnixSocket.open(descriptor: 0), family: "Unix", simulation)
            try assertRefused(Files.copy(from: "/a", to: "/b"), family: "Files", simulation)
            try assertRefused(FileWatch.changes(at: "/", recursive: true, followSymlinks: true), family: "Watch", simulation)
            try assertRefused(Poll.readiness(fd: 0), family: "Poll", simulation)
            XCTAssertEqual(simulation.now, ms(0), "refused at once: no time passed")
        }
    }

    func testASimulatedGroupHandsOutItsLoopsAndServesAUnixGroupServer() throws {
        Simulation.check(seed: 32) { simulation in
            let group = simulation.makeGroup(loopCount: 3, name: "g")
            XCTAssertEqual(group.loops.map(\.name), ["g-0", "g-1", "g-2"])
            XCTAssertEqual(simulation.loops.count, 4)
            XCTAssertEqual((0..<4).map { _ in group.next().name }, ["g-0", "g-1", "g-2", "g-0"])
            let ticks = try group.loops.map { loop in
                try simulation.record(Signal<Int>.interval(.milliseconds(10)).take(2).deliver(on: loop))
            }
            let server = try simulation.record(UnixSocket.listen(path: "/tmp/simulated-group.sock", on: group))
            simulation.runUntilIdle()
            // Bound by now (the server starts on g-0): each client goes to the next loop.
            let clients = try (0..<2).map { _ in try simulation.record(UnixSocket.connect(path: "/tmp/simulated-group.sock")) }
            simulation.runUntilIdle()
            for (index, recorder) in ticks.enumerated() {
                XCTAssertEqual(recorder.values, [0, 1])
                XCTAssertEqual(recorder.recorded.map(\.loopName), Array(repeating: "g-\(index)", count: 3))
                XCTAssertEqual(recorder.recorded.map(\.time), [ms(10), ms(20), ms(20)])
            }
            XCTAssertNil(server.terminal, "served, not refused: \(server.recorded)")
            XCTAssertEqual(server.values.map(\.loop.name), ["g-0", "g-1"], "each client on the next loop in turn")
            for connection in server.values + clients.flatMap(\.values) { connection.close() }
            simulation.runUntilIdle()
        }
    }
}
