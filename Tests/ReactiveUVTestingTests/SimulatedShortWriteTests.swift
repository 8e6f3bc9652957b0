@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Short writes on simulated streams (`shortWritePerMille`): the peer's kernel takes part of a
/// write at once and the rest as its window opens; the stream core still delivers every byte in
/// order, calls each write back once it is wholly taken, and counts what waits as queued.
final class SimulatedShortWriteTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    private func pattern(_ count: Int, _ salt: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ salt) }
    }

    private func pair(_ simulation: Simulation) throws -> (client: TCPConnection, served: TCPConnection, server: EventLoop) {
        let server = simulation.makeLoop(name: "server")
        let (client, served) = try simulation.perform {
            SimulatedStreams.tcpPair(simulation.loop, server, latency: .milliseconds(2), names: ("client", "server"))
        }
        return (client, served, server)
    }

    func testEveryByteArrivesInOrderEachWriteIsCalledBackWhenWhollyTakenAndFINComesLast() throws {
        Simulation.check(seed: 91) { simulation in
            try simulation.setNetworkFaults(SimulationNetworkFaults(latency: .milliseconds(2), shortWritePerMille: 1_000))
            let (client, served, server) = try pair(simulation)
            let reads = try simulation.record(served.bytes, on: server)
            let writes = (0..<5).map { pattern(10_000, $0) }
            let done = Locked<[Int]>([])
            var queuedAfterSending = 0
            try simulation.perform {
                for (index, bytes) in writes.enumerated() {
                    client.send(bytes) { error in
                        XCTAssertNil(error, "write \(index)")
                        done.withLock { $0.append(index) }
                    }
                }
                client.shutdown()
                queuedAfterSending = client.queuedWriteByteCount
            }
            XCTAssertGreaterThan(queuedAfterSending, 0, "the untaken part is queued, as libuv's write queue holds it")
            XCTAssertLessThan(queuedAfterSending, 50_000, "the first write was taken in part")
            XCTAssertEqual(done.current, [], "no write is called back before its last byte is taken")
            simulation.runUntilIdle()
            XCTAssertEqual(done.current, [0, 1, 2, 3, 4])
            XCTAssertEqual(Array(reads.values.joined()), Array(writes.joined()), "every byte, in order")
            XCTAssertGreaterThan(reads.values.count, 5, "taken in more parts than written")
            guard case .completed? = reads.terminal else { return XCTFail("FIN after the bytes: \(reads.recorded.suffix(2))") }
            XCTAssertGreaterThan(reads.recorded.last?.time ?? ms(0), ms(4), "the rest went as the window opened, a latency at a time")
            try simulation.perform { _ = client.close() }
        }
    }

    func testAResetCancelsTheUntakenRestAndAGracefulCloseWaitsForIt() throws {
        Simulation.check(seed: 92) { simulation in
            try simulation.setNetworkFaults(SimulationNetworkFaults(shortWritePerMille: 1_000))
            let (client, served, server) = try pair(simulation)
            let reads = try simulation.record(served.bytes, on: server)
            let bytes = pattern(10_000, 9)
            let outcome = Locked<UVError?>(nil)
            try simulation.perform {
                client.send(bytes) { error in outcome.withLock { $0 = error as? UVError } }
                client.reset()
            }
            simulation.runUntilIdle()
            XCTAssertEqual(outcome.current?.code, UVError.cancelled.code, "\(String(describing: outcome.current))")
            let got = Array(reads.values.joined())
            XCTAssertLessThan(got.count, bytes.count, "the untaken rest never left")
            XCTAssertEqual(got, Array(bytes.prefix(got.count)))
            XCTAssertEqual((reads.terminal?.error as? UVError)?.name, "ECONNRESET")

            let (other, otherServed, otherServer) = try pair(simulation)
            let otherReads = try simulation.record(otherServed.bytes, on: otherServer)
            let closed = try simulation.perform { () -> EventRecorder<Void> in
                other.send(bytes)
                return EventRecorder(other.close())
            }
            simulation.runUntilIdle()
            XCTAssertEqual(Array(otherReads.values.joined()), bytes, "close() flushes the backlog first")
            guard case .completed? = closed.terminal, case .completed? = otherReads.terminal else {
                return XCTFail("\(closed.recorded) \(otherReads.recorded.suffix(1))")
            }
        }
    }
}
