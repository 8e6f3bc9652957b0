@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Descriptor passing on a simulation's network: a front loop accepts TCP clients and passes each
/// over an IPC Unix connection (`UnixConnection.send(_:with:)`) to a worker loop, which reads it
/// from `incoming` and serves it; the client never notices the move.
final class SimulatedDescriptorPassingTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }
    private let path = "/run/worker.sock"
    private let ipc = UnixSocketOptions(ipc: true)

    /// The worker: serves IPC connections on `path` and echoes every TCP connection passed to it.
    private func worker(_ simulation: Simulation, on loop: EventLoop) throws -> EventRecorder<String> {
        try simulation.record(UnixSocket.serve(path: path, options: ipc).flatMap { event -> Signal<String> in
            guard case .accepted(let channel) = event else { return .empty }
            return channel.incoming.flatMap { incoming -> Signal<String> in
                switch incoming {
                case .bytes(let message): return Signal.return("message \(message)")
                case .unix: return Signal.return("a unix connection")
                case .tcp(let connection):
                    return connection.bytes.map { chunk in
                        connection.send(chunk)
                        return "echo \(chunk) from \(connection.peerAddress?.port ?? 0)"
                    }
                }
            }
        }, on: loop)
    }

    /// A client that sends `first`, then `second` at 30 ms, half-closes and reads to the end.
    private func client(_ simulation: Simulation, _ first: [UInt8], _ second: [UInt8]) throws -> EventRecorder<[UInt8]> {
        try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
            connection.send(first)
            _ = connection.loop.schedule(after: .milliseconds(30)) {
                connection.send(second)
                connection.shutdown()
            }
            return connection.bytes
        })
    }

    func testAPassedConnectionIsServedByTheWorkerWithItsUnreadBytesAndTheClientNoticesNothing() throws {
        Simulation.check(seed: 111) { simulation in
            let workerLoop = simulation.makeLoop(name: "worker")
            let front = simulation.makeLoop(name: "front")
            let served = try worker(simulation, on: workerLoop)
            simulation.run(for: .zero)
            // The front passes the first client at once, the second 10 ms later (its bytes wait unread).
            let accepted = Locked(0)
            let passes = try simulation.record(UnixSocket.connect(path: path, options: ipc).flatMap { channel in
                TCPServer.serve(port: 7000).flatMap { event -> Signal<String> in
                    guard case .accepted(let connection) = event else { return .empty }
                    let index = accepted.withLock { count in
                        count += 1
                        return count
                    }
                    let pass: @Sendable () -> Signal<String> = { channel.send(connection, with: [UInt8(index)]).then(Signal.return("passed \(index)")) }
                    return index == 1 ? pass() : Signal<Int>.interval(.milliseconds(10)).take(1).flatMap { _ in pass() }
                }
            }, on: front)
            let first = try client(simulation, [1, 2, 3], [4, 5])
            let second = try client(simulation, [6, 7], [8])
            simulation.runUntilIdle()
            XCTAssertEqual(Array(first.values.joined()), [1, 2, 3, 4, 5])
            XCTAssertEqual(Array(second.values.joined()), [6, 7, 8])
            for recorder in [first, second] {
                guard case .completed? = recorder.terminal else { return XCTFail("\(recorder.recorded)") }
            }
            XCTAssertEqual(passes.values.sorted(), ["passed 1", "passed 2"])
            let lines = served.values
            XCTAssertTrue(lines.contains("message [1]") && lines.contains("message [2]"), "\(lines)")
            XCTAssertEqual(lines.filter { $0.hasPrefix("echo") }.count, 4, "\(lines)")
            XCTAssertTrue(lines.contains { $0.hasPrefix("echo [6, 7] from 4") }, "the unread bytes went along: \(lines)")
            XCTAssertEqual(served.recorded.map(\.loopName), Array(repeating: "worker", count: served.recorded.count))
        }
    }

    func testKeepOpenIsNotSimulatedABytesReaderCannotTakeAConnectionAndAnUnreadOneIsClosed() throws {
        Simulation.check(seed: 112) { simulation in
            let workerLoop = simulation.makeLoop(name: "worker")
            let front = simulation.makeLoop(name: "front")
            // The worker reads its channel with `bytes`: the passed connection ends that reader.
            let reader = try simulation.record(UnixSocket.serve(path: path, options: ipc).flatMap { event -> Signal<[UInt8]> in
                guard case .accepted(let channel) = event else { return .empty }
                return channel.bytes
            }, on: workerLoop)
            simulation.run(for: .zero)
            let outcomes = try simulation.record(UnixSocket.connect(path: path, options: ipc).flatMap { channel in
                TCPServer.serve(port: 7000).flatMap { event -> Signal<String> in
                    guard case .accepted(let connection) = event else { return .empty }
                    return channel.send(connection, with: [9], keepOpen: true).then(Signal.return("kept"))
                        .catch { error in
                            Signal.return("\((error as? UVError)?.name ?? "?")").concat(channel.send(connection, with: [9]).then(Signal.return("passed")))
                        }
                }
            }, on: front)
            let client = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { $0.bytes })
            simulation.runUntilIdle()
            XCTAssertEqual(outcomes.values, ["ENOTSUP", "passed"])
            XCTAssertEqual(reader.values, [[9]], "the message's byte, then the refusal")
            XCTAssertEqual((reader.terminal?.error as? UVError)?.name, "EPROTO")
            // The reader's error ended the worker's server, which closed the channel with the
            // connection unread in it: the kernel drops it, and the client reads EOF.
            guard case .completed? = client.terminal else { return XCTFail("\(client.recorded)") }
        }
    }

    func testAConnectionPassedBehindAShortWritesRestArrivesAfterEveryByteBeforeIt() throws {
        Simulation.check(seed: 113) { simulation in
            try simulation.setNetworkFaults(SimulationNetworkFaults(shortWritePerMille: 1_000))
            let workerLoop = simulation.makeLoop(name: "worker")
            let front = simulation.makeLoop(name: "front")
            // What the worker's `incoming` sends: each chunk's size, -1 for the connection.
            let incoming = try simulation.record(UnixSocket.serve(path: path, options: ipc).flatMap { event -> Signal<Int> in
                guard case .accepted(let channel) = event else { return .empty }
                return channel.incoming.map { incoming in
                    if case .bytes(let chunk) = incoming { return chunk.count }
                    return -1
                }
            }, on: workerLoop)
            simulation.run(for: .zero)
            let passes = try simulation.record(UnixSocket.connect(path: path, options: ipc).flatMap { channel in
                TCPServer.serve(port: 7000).flatMap { event -> Signal<String> in
                    guard case .accepted(let connection) = event else { return .empty }
                    channel.send([UInt8](repeating: 1, count: 5_000))
                    return channel.send(connection, with: [2]).then(Signal.return("passed"))
                }
            }, on: front)
            _ = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { $0.bytes })
            simulation.runUntilIdle()
            XCTAssertEqual(passes.values, ["passed"])
            let sizes = incoming.values
            XCTAssertEqual(sizes.last, -1, "the connection comes last: \(sizes)")
            XCTAssertEqual(sizes.filter { $0 > 0 }.reduce(0, +), 5_001, "every byte before it, its message's included")
            XCTAssertGreaterThan(sizes.count, 3, "the bytes came in short parts: \(sizes)")
        }
    }
}
