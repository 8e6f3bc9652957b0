@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `UDP` on a simulation's network: datagrams between simulated hosts on virtual time, lost when
/// drawn or planned, across a partition, to a port nobody holds or past a full buffer, and the
/// errors a real socket gives for a bad destination.
final class SimulatedUDPTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    private func address(_ host: String, _ port: Int) throws -> SocketAddress { try SocketAddress(host: host, port: port) }

    /// A socket bound on `loop` (the bind is answered at once: the host is numeric).
    private func bound(_ simulation: Simulation, host: String = "127.0.0.1", port: Int = 0, on loop: EventLoop? = nil) throws -> UDPSocket {
        let recorder = try simulation.record(UDP.bind(host: host, port: port), on: loop)
        simulation.run(for: .zero)
        return try XCTUnwrap(recorder.values.first, "bind: \(recorder.recorded)")
    }

    func testDatagramsTravelBetweenHostsAfterTheLatencyWithTheirSenderAndAReplyComesBack() throws {
        Simulation.check(seed: 81) { simulation in
            let server = simulation.makeLoop(name: "server")
            let echo = try bound(simulation, host: "10.0.0.2", port: 5000, on: server)
            try simulation.perform(on: server) {
                _ = echo.datagrams.observe { event in
                    if let datagram = event.value, let sender = datagram.sender { echo.send(datagram.bytes.reversed(), to: sender) }
                }
            }
            let client = try bound(simulation, host: "10.0.0.1")
            XCTAssertEqual(client.localAddress?.host, "10.0.0.1")
            XCTAssertGreaterThanOrEqual(client.localAddress?.port ?? 0, 32_768, "port 0 picks a free one")
            let replies = try simulation.record(client.datagrams)
            let sent = try simulation.record(client.send([1, 2, 3], to: address("10.0.0.2", 5000)))
            simulation.run(for: .milliseconds(5))
            try simulation.perform { _ = client.send([], to: try address("10.0.0.2", 5000)) }
            simulation.run(for: .milliseconds(5))
            XCTAssertEqual(sent.recorded.map(\.time), [ms(0)], "the kernel took it at once")
            XCTAssertEqual(replies.values.map(\.bytes), [[3, 2, 1], []], "an empty datagram is a datagram")
            XCTAssertEqual(replies.recorded.map(\.time), [ms(2), ms(7)], "1 ms each way")
            XCTAssertEqual(replies.values.first?.sender, try address("10.0.0.2", 5000))
            XCTAssertEqual(simulation.datagramsSent, 4)
            try simulation.perform { echo.close(); client.close() }
            simulation.runUntilIdle()
            guard case .completed? = replies.terminal else { return XCTFail("\(replies.recorded)") }
        }
    }

    func testADatagramToAPortNobodyHoldsVanishesAndASocketClosedMeanwhileGetsNothing() throws {
        Simulation.check(seed: 82) { simulation in
            let receiver = try bound(simulation, port: 6000)
            let got = try simulation.record(receiver.datagrams)
            let sender = try bound(simulation)
            let nowhere = try simulation.record(sender.send([1], to: address("127.0.0.1", 6001)))
            try simulation.perform {
                sender.send([2], to: try address("127.0.0.1", 6000))
                receiver.close()
            }
            simulation.runUntilIdle()
            guard case .completed? = nowhere.terminal else { return XCTFail("no listener is no error: \(nowhere.recorded)") }
            XCTAssertEqual(got.values, [], "closed before the datagram landed")
            guard case .completed? = got.terminal else { return XCTFail("\(got.recorded)") }
            try simulation.perform { sender.close() }
        }
    }

    func testLossDrawnFromTheSeedIsRecordedAndReplaysAsAPlanWithTheSameTrace() throws {
        func run(_ simulation: Simulation) throws -> [UInt8] {
            try simulation.setNetworkFaults(SimulationNetworkFaults(jitter: .milliseconds(2), datagramLossPerMille: 300))
            let receiver = try bound(simulation, port: 6000)
            let got = try simulation.record(receiver.datagrams)
            let sender = try bound(simulation)
            try simulation.perform { for index in 0..<20 { sender.send([UInt8(index)], to: try address("127.0.0.1", 6000)) } }
            simulation.runUntilIdle()
            try simulation.perform { receiver.close(); sender.close() }
            simulation.runUntilIdle()
            return got.values.map { $0.bytes[0] }
        }
        var received: [UInt8] = []
        var injected: [SimulationFault] = []
        let seededHash = Simulation.check(seed: 83) { seeded in
            received = try run(seeded)
            XCTAssertGreaterThan(received.count, 0)
            XCTAssertLessThan(received.count, 20, "seed 83 loses some")
            let lost = Set(0..<20).subtracting(received.map(Int.init)).sorted()
            injected = seeded.injectedFaults
            XCTAssertEqual(injected, lost.map { .dropDatagram(datagram: $0 + 1) }, "numbered from 1 in send order")
            XCTAssertNotEqual(received, received.sorted(), "jitter drawn per datagram lets them overtake each other")
        }
        let replayHash = Simulation.check(seed: 83, faultPlan: injected) { replay in
            XCTAssertEqual(try run(replay), received)
        }
        XCTAssertEqual(replayHash, seededHash)
    }

    func testAPlannedDropLosesExactlyThatDatagramAndAPartitionLosesTheRestUntilItHeals() throws {
        Simulation.check(seed: 84, faultPlan: [.dropDatagram(datagram: 2),
                                               .partition("sim", "server", at: .milliseconds(10), for: .milliseconds(10))]) { simulation in
            let server = simulation.makeLoop(name: "server")
            let receiver = try bound(simulation, port: 6000, on: server)
            let got = try simulation.record(receiver.datagrams, on: server)
            let sender = try bound(simulation)
            for index in 0..<4 {
                try simulation.perform { sender.send([UInt8(index)], to: try address("127.0.0.1", 6000)) }
                simulation.run(for: .milliseconds(7))
            }
            simulation.run(for: .milliseconds(10))
            XCTAssertEqual(got.values.map(\.bytes), [[0], [3]], "datagram 2 is planned lost; datagram 3, sent at 14 ms inside the partition, is lost, not held")
            try simulation.perform(on: server) { receiver.close() }
            try simulation.perform { sender.close() }
        }
    }

    func testDatagramsPastTheReceiveBufferAreDroppedUntilTheReaderTakesThem() throws {
        Simulation.check(seed: 85) { simulation in
            let receiver = try bound(simulation, port: 6000)
            let sender = try bound(simulation)
            let destination = try address("127.0.0.1", 6000)
            try simulation.perform { for _ in 0..<4 { sender.send([UInt8](repeating: 7, count: 60_000), to: destination) } }
            simulation.runUntilIdle()
            let got = try simulation.record(receiver.datagrams)
            simulation.runUntilIdle()
            XCTAssertEqual(got.values.count, 3, "212,992 bytes of buffer hold three of 60,000; the fourth is dropped")
            try simulation.perform { receiver.close(); sender.close() }
        }
    }

    /// The same bad sends and binds on a real loop and on the simulated network give the same codes.
    func testBadDestinationsAndBindsFailWithTheCodesOfARealSocket() throws {
        /// A taken port, an IPv6 destination from an IPv4 socket, port 0, a payload too big, a closed socket.
        func badSends(_ socket: UDPSocket, _ record: (Signal<Void>) throws -> EventRecorder<Void>) throws -> [EventRecorder<Void>] {
            let port = try XCTUnwrap(socket.localAddress?.port)
            return [try record(socket.send([1], to: address("::1", port))),
                    try record(socket.send([1], to: address("127.0.0.1", 0))),
                    try record(socket.send([UInt8](repeating: 0, count: 65_508), to: address("127.0.0.1", port)))]
        }
        var real: [String?] = []
        let report = LoopHarness.run { harness in
            let socket = try harness.record(UDP.bind()).waitForValues(1)[0]
            let taken = try harness.record(UDP.bind(port: socket.localAddress?.port ?? 0))
            try taken.waitForTermination()
            let sends = try badSends(socket) { try harness.record($0) }
            for send in sends { try send.waitForTermination() }
            socket.close()
            let closed = try harness.record(socket.send([1], to: try address("127.0.0.1", 9)))
            try closed.waitForTermination()
            real = [errorName(taken)] + sends.map(errorName) + [errorName(closed)]
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
        XCTAssertEqual(real, ["EADDRINUSE", "EAFNOSUPPORT", "EINVAL", "EMSGSIZE", "EBADF"])

        var simulated: [String?] = []
        Simulation.check(seed: 86) { simulation in
            let socket = try bound(simulation)
            let taken = try simulation.record(UDP.bind(port: socket.localAddress?.port ?? 0))
            let sends = try badSends(socket) { try simulation.record($0) }
            simulation.runUntilIdle()
            try simulation.perform { socket.close() }
            let closed = try simulation.record(socket.send([1], to: try address("127.0.0.1", 9)))
            simulation.runUntilIdle()
            simulated = [errorName(taken)] + sends.map(errorName) + [errorName(closed)]
        }
        XCTAssertEqual(simulated, real)
    }
}
