import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `UnixSocket.listen`/`serve(on: group)` (the echo sample's Unix group server) on a simulation's
/// group: one path, clients handed to the loops in turn, drain across the group.
final class SimulatedUnixGroupTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }
    private let path = "/run/simulated-group.sock"

    /// A client sending `bytes`, half-closing, and reading the echo.
    private func client(sending bytes: [UInt8]) -> Signal<[UInt8]> {
        UnixSocket.connect(path: path).flatMap { connection in
            connection.send(bytes)
            connection.shutdown()
            return connection.bytes
        }
    }

    private func servedOn(_ events: EventRecorder<EchoEvent>) -> [String] {
        events.values.compactMap { event -> String? in
            if case .served(_, let loop) = event { return loop }
            return nil
        }
    }

    func testTheEchoSampleServesAUnixSocketOnASimulatedGroupEachLoopTakingClientsInTurn() throws {
        Simulation.check(seed: 91) { simulation in
            let group = simulation.makeGroup(loopCount: 3, name: "unix")
            let events = try simulation.record(EchoServer.run(unixPath: path, on: group), on: group.loops[0])
            let payloads = (0..<6).map { index in (0..<(300 + index)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) } }
            let clients = try payloads.map { try simulation.record(client(sending: $0)) }
            simulation.runUntilIdle()
            for (index, recorder) in clients.enumerated() {
                XCTAssertEqual(Array(recorder.values.joined()), payloads[index], "client \(index)")
                guard case .completed? = recorder.terminal else { return XCTFail("client \(index): \(recorder.recorded)") }
            }
            guard case .listeningOnPath(let listening)? = events.values.first else { return XCTFail("\(events.values)") }
            XCTAssertEqual(listening, path)
            let served = servedOn(events)
            XCTAssertEqual(served.count, 6)
            for loop in group.loops {
                XCTAssertEqual(served.filter { $0 == loop.name }.count, 2, "round robin: two clients on \(loop.name): \(served)")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "no file: the path is the simulation's")
        }
    }

    func testASimulatedUnixGroupDrainsEveryLoopServingTheClientInTransferAndRefusingLateOnes() throws {
        Simulation.check(seed: 92) { simulation in
            let group = simulation.makeGroup(loopCount: 2, name: "unix")
            let drain = Signal<Int>.interval(.milliseconds(10)).take(1).map { _ in
                UnixSocket.DrainRequest.graceful(timeout: .milliseconds(50))
            }
            let events = try simulation.record(EchoServer.run(unixPath: path, on: group, drain: drain), on: group.loops[0])
            // The first client is still sending when the drain comes: it half-closes at 30 ms.
            let finishing = try simulation.record(UnixSocket.connect(path: path).flatMap { connection in
                connection.send([1, 2, 3])
                _ = connection.loop.schedule(after: .milliseconds(30)) {
                    connection.send([4, 5])
                    connection.shutdown()
                }
                return connection.bytes
            })
            // The second never closes: the deadline closes it.
            let lingering = try simulation.record(UnixSocket.connect(path: path).flatMap { connection in
                connection.send([9])
                return connection.bytes
            })
            simulation.run(for: .milliseconds(20))
            let late = try simulation.record(UnixSocket.connect(path: path))
            simulation.runUntilIdle()

            XCTAssertEqual(Set(servedOn(events)), ["unix-0", "unix-1"], "one client on each loop")
            XCTAssertEqual(Array(finishing.values.joined()), [1, 2, 3, 4, 5], "served to the end during the drain")
            guard case .completed? = finishing.terminal else { return XCTFail("\(finishing.recorded)") }
            XCTAssertEqual(lingering.values, [[9]])
            // A Unix socket has no RST: everything it sent was read, so it reads EOF.
            guard case .completed? = lingering.terminal else { return XCTFail("\(lingering.recorded)") }
            XCTAssertEqual(lingering.recorded.last?.time, ms(61), "closed at the 60 ms deadline, 1 ms away")
            XCTAssertEqual((late.terminal?.error as? UVError)?.code, UVError.noSuchFileCode, "no path while draining")
            let draining = events.recorded.filter { if case .next(.draining(let open)) = $0.event { open == 2 } else { false } }
            XCTAssertEqual(draining.map(\.time), [ms(10)], "one .draining counting both loops' clients")
            guard case .completed? = events.terminal else { return XCTFail("\(events.recorded)") }
            XCTAssertEqual(events.recorded.last?.time, ms(60))
        }
    }

    func testTheConnectionLimitCountsAcrossTheSimulatedGroup() throws {
        Simulation.check(seed: 93) { simulation in
            let group = simulation.makeGroup(loopCount: 2, name: "unix")
            let events = try simulation.record(
                UnixSocket.serve(path: path, options: UnixSocketOptions(maxConnections: 2), on: group), on: group.loops[0])
            let clients = try (0..<3).map { _ in
                try simulation.record(UnixSocket.connect(path: path).flatMap { $0.bytes })
            }
            simulation.run(for: .milliseconds(10))
            let accepted = events.values.compactMap { event -> UnixConnection? in
                if case .accepted(let connection) = event { return connection }
                return nil
            }
            XCTAssertEqual(accepted.count, 2)
            XCTAssertEqual(Set(accepted.map(\.loop.name)), ["unix-0", "unix-1"])
            let refused = events.values.compactMap { event -> Int? in
                if case .refused(let open) = event { return open }
                return nil
            }
            XCTAssertEqual(refused, [2], "the third client is past the group's limit")
            XCTAssertEqual(clients.filter { $0.terminal != nil }.count, 1, "the refused client reads EOF; the others stay")
            for connection in accepted { connection.close() }
            simulation.runUntilIdle()
        }
    }

    func testALoopShuttingDownEndsOnlyItsShareAndTheNextClientsGoToTheOthers() throws {
        Simulation.check(seed: 95) { simulation in
            let group = simulation.makeGroup(loopCount: 3, name: "unix")
            let events = try simulation.record(EchoServer.run(unixPath: path, on: group), on: group.loops[0])
            simulation.run(for: .milliseconds(1))
            try simulation.perform(on: group.loops[1]) { group.loops[1].shutdown() }
            simulation.runUntilIdle()
            let payloads: [[UInt8]] = (0..<4).map { [UInt8($0), 42] }
            let clients = try payloads.map { try simulation.record(client(sending: $0)) }
            simulation.runUntilIdle()
            for (index, recorder) in clients.enumerated() {
                XCTAssertEqual(Array(recorder.values.joined()), payloads[index], "client \(index)")
                guard case .completed? = recorder.terminal else { return XCTFail("client \(index): \(recorder.recorded)") }
            }
            let served = servedOn(events)
            XCTAssertEqual(served.filter { $0 == "unix-0" }.count, 2, "\(served)")
            XCTAssertEqual(served.filter { $0 == "unix-2" }.count, 2, "\(served)")
            XCTAssertNil(events.terminal, "the other loops still serve: \(events.recorded)")
        }
    }

    func testASecondServerOnAHeldPathOrABadPathFailsWithANamedErrorOnASimulatedGroup() throws {
        Simulation.check(seed: 94) { simulation in
            let group = simulation.makeGroup(loopCount: 2, name: "unix")
            let first = try simulation.record(UnixSocket.serve(path: path, on: group), on: group.loops[0])
            let second = try simulation.record(UnixSocket.serve(path: path, on: group), on: group.loops[0])
            let single = try simulation.record(UnixSocket.serve(path: path), on: group.loops[1])
            let tooLong = try simulation.record(UnixSocket.serve(path: "/run/" + String(repeating: "x", count: 200), on: group))
            simulation.runUntilIdle()
            guard case .listening? = first.values.first else { return XCTFail("\(first.recorded)") }
            XCTAssertEqual((second.terminal?.error as? UVError)?.code, UVError.addressInUseCode)
            XCTAssertEqual((single.terminal?.error as? UVError)?.code, UVError.addressInUseCode)
            XCTAssertNotNil(tooLong.terminal?.error as? UVError, "a path too long for a socket is refused by name")
            XCTAssertTrue(tooLong.values.isEmpty)
        }
    }
}
