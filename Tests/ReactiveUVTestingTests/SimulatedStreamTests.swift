@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// The stream core over simulated ends: bytes, FIN and RST on virtual time, in order.
final class SimulatedStreamTests: XCTestCase {
    private func isCompletion<Value>(_ event: Event<Value>?) -> Bool {
        if case .completed? = event { return true }
        return false
    }

    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// A client on the simulation's loop, a served end on a loop "server", `latency` each way.
    private func pair(_ simulation: Simulation, latency: Duration = .milliseconds(5))
        throws -> (client: TCPConnection, served: TCPConnection, server: EventLoop) {
        let server = simulation.makeLoop(name: "server")
        let (client, served) = try simulation.perform {
            SimulatedStreams.tcpPair(simulation.loop, server, latency: latency, names: ("client", "server"))
        }
        return (client, served, server)
    }

    func testEchoOverASimulatedPairTakesTheLatencyEachWay() throws {
        Simulation.check(seed: 41) { simulation in
            let (client, served, server) = try pair(simulation)
            let echoed = try simulation.record(served.bytes.map { chunk in
                served.send(chunk)
                return String(decoding: chunk, as: UTF8.self)
            }, on: server)
            let received = try simulation.record(client.bytes.map { String(decoding: $0, as: UTF8.self) })
            try simulation.perform { client.send(Array("hello".utf8)) }
            simulation.run(for: .milliseconds(20))
            try simulation.perform { client.send(Array(" world".utf8)) }
            simulation.run(for: .milliseconds(20))
            XCTAssertEqual(echoed.values, ["hello", " world"])
            XCTAssertEqual(echoed.recorded.map(\.time), [ms(5), ms(25)])
            XCTAssertEqual(echoed.recorded.map(\.loopName), ["server", "server"])
            XCTAssertEqual(received.values, ["hello", " world"])
            XCTAssertEqual(received.recorded.map(\.time), [ms(10), ms(30)])

            // A graceful close: FIN reaches the server at 45 ms, which then closes its end too.
            try simulation.perform { _ = client.close() }
            simulation.runUntilIdle()
            XCTAssertTrue(isCompletion(echoed.terminal))
            XCTAssertEqual(echoed.recorded.last?.time, ms(45))
            XCTAssertFalse(client.isOpen)
            XCTAssertFalse(served.isOpen, "not half-open: the server's end closed after the EOF")
        }
    }

    func testAResetReachesThePeerAfterTheLatencyAsECONNRESET() throws {
        Simulation.check(seed: 42) { simulation in
            let (client, served, server) = try pair(simulation, latency: .milliseconds(7))
            let reads = try simulation.record(served.bytes, on: server)
            try simulation.perform { client.send([1, 2, 3]) }
            simulation.run(for: .milliseconds(3))
            try simulation.perform { client.reset() }
            simulation.runUntilIdle()
            XCTAssertEqual(reads.values, [[1, 2, 3]])
            XCTAssertEqual(reads.recorded.map(\.time), [ms(7), ms(10)])
            XCTAssertEqual((reads.terminal?.error as? UVError)?.name, "ECONNRESET")
            XCTAssertFalse(served.isOpen, "a read error ends the connection")
        }
    }

    func testAResetDropsWhatThePeerHadNotReadYet() throws {
        Simulation.check(seed: 45) { simulation in
            let (client, served, server) = try pair(simulation, latency: .milliseconds(7))
            try simulation.perform {
                client.send([1, 2, 3])
                client.reset()
            }
            simulation.run(for: .milliseconds(20))
            // Nobody read before the RST came: the bytes are gone, the first read fails.
            let reads = try simulation.record(served.bytes, on: server)
            simulation.runUntilIdle()
            XCTAssertEqual(reads.values, [])
            XCTAssertEqual((reads.terminal?.error as? UVError)?.name, "ECONNRESET")
            XCTAssertEqual(reads.recorded.map(\.time), [ms(20)])
        }
    }

    func testALargeWriteArrivesWholeInReadSizedChunksAndItsCompletionComesFirst() throws {
        Simulation.check(seed: 43) { simulation in
            let (client, served, server) = try pair(simulation)
            let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let reads = try simulation.record(served.bytes, on: server)
            let written = try simulation.record(client.write(payload))
            simulation.runUntilIdle()
            XCTAssertTrue(isCompletion(written.terminal))
            XCTAssertEqual(written.recorded.last?.time, ms(0), "the simulated network takes the bytes at once")
            XCTAssertEqual(Array(reads.values.joined()), payload)
            XCTAssertGreaterThan(reads.values.count, 1, "read in chunks of at most the read buffer")
            XCTAssertTrue(reads.values.allSatisfy { $0.count <= ReadBuffer.size })
            XCTAssertEqual(Set(reads.recorded.map(\.time)), [ms(5)])
            try simulation.perform { client.reset() }
            simulation.runUntilIdle()
        }
    }

    func testShutdownSendsEndOfFileAfterTheBytesAndTheLeakCheckSeesOpenStreams() throws {
        Simulation.checkReportingProblems(seed: 44) { simulation in
            let (client, served, server) = try pair(simulation)
            let reads = try simulation.record(served.bytes, on: server)
            let shutdown = try simulation.record(try simulation.perform { () -> Signal<Void> in
                client.send([9, 9])
                return client.shutdown()
            })
            simulation.runUntilIdle()
            XCTAssertEqual(reads.values, [[9, 9]])
            XCTAssertTrue(isCompletion(reads.terminal))
            XCTAssertEqual(reads.recorded.map(\.time), [ms(5), ms(5)])
            XCTAssertTrue(isCompletion(shutdown.terminal))
            XCTAssertTrue(client.isOpen, "a half-close leaves the connection open")
            XCTAssertFalse(served.isOpen, "the served end closed after the EOF")
            let report = simulation.finish()
            XCTAssertEqual(report.leakedHandles.map(\.kind), ["tcp"], "the client end was left open")
            XCTAssertEqual(report.leakedHandles.first?.label, "tcp connection with server from a simulated pair (client)")
            XCTAssertEqual(report.loopCloseResult, 0)
            XCTAssertFalse(client.isOpen, "shutdown closed it")
        }
    }
}
