@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Shrinking shown on a server with a deliberate bug that only a combination of two faults
/// triggers: faults drawn from seeds until a run fails, then cut down to the two that matter.
final class SimulatedBrokenServerShrinkTests: XCTestCase {
    /// A client got back less than it sent, and no error said so.
    private struct SilentLoss: Error, CustomStringConvertible {
        let description: String
    }

    /// The echo server's connections, by number, with when each was last heard from.
    private final class QuietConnections: @unchecked Sendable {
        // Sendable: touched only on the server loop's thread (the callbacks of its connections).
        private var open: [Int: (connection: TCPConnection, heard: SchedulerInstant)] = [:]
        private var count = 0

        func add(_ connection: TCPConnection) -> Int {
            count += 1
            open[count] = (connection, connection.loop.now)
            return count
        }

        func heard(_ id: Int) {
            if let entry = open[id] { open[id] = (entry.connection, entry.connection.loop.now) }
        }

        func remove(_ id: Int) { open[id] = nil }

        /// The bug: a connection that failed is taken as a sign that others are dead too, and every one
        /// quiet for 50 ms or more is closed (gracefully: its peer reads an end, not an error).
        func connectionFailed(_ id: Int, now: SchedulerInstant) {
            open[id] = nil
            let quiet = open.filter { now.nanoseconds - $0.value.heard.nanoseconds >= 50_000_000 }
            for (quietID, entry) in quiet.sorted(by: { $0.key < $1.key }) {
                open[quietID] = nil
                entry.connection.close()
            }
        }
    }

    /// An echo server on `port` with the bug above. Alone, a reset only ends its own connection and a
    /// partition only delays bytes; a reset while another client has been cut off for 50 ms loses
    /// that client's echo without a word.
    private func brokenEchoServer(port: Int) -> Signal<Void> {
        let connections = QuietConnections()
        return TCPServer.serve(port: port).flatMap { event -> Signal<Void> in
            guard case .accepted(let connection) = event else { return .empty }
            let id = connections.add(connection)
            return Signal<Void> { subscriber in
                connection.bytes.subscribe(next: { chunk in
                    connections.heard(id)
                    connection.send(chunk)
                }, error: { _ in
                    connections.connectionFailed(id, now: connection.loop.now)
                    subscriber.sendCompleted()
                }, completed: {
                    connections.remove(id)
                    connection.close()
                    subscriber.sendCompleted()
                })
            }
        }
    }

    /// What client `index` sends: ten messages of 20 bytes, one every 10 ms.
    private static func message(_ index: Int, _ number: Int) -> [UInt8] {
        [UInt8](repeating: UInt8(index * 16 + number), count: 20)
    }

    /// The server on loop "server", four clients each on its own loop ("client-0"...); runs to the
    /// end and throws `SilentLoss` when a client got back less than it sent without an error.
    private func runBrokenEcho(_ simulation: Simulation) throws {
        let server = simulation.makeLoop(name: "server")
        _ = try simulation.record(brokenEchoServer(port: 7000), on: server)
        let clients = try (0..<4).map { index in
            try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                for number in 0..<10 {
                    _ = connection.loop.schedule(after: .milliseconds(Int64(number) * 10)) { connection.send(Self.message(index, number)) }
                }
                _ = connection.loop.schedule(after: .milliseconds(100)) { connection.shutdown() }
                return connection.bytes
            }, on: simulation.makeLoop(name: "client-\(index)"))
        }
        simulation.runUntilIdle()
        for (index, client) in clients.enumerated() {
            let sent = (0..<10).flatMap { Self.message(index, $0) }
            let echoed = Array(client.values.joined())
            XCTAssertTrue(sent.starts(with: echoed), "client \(index) got bytes it did not send")
            if case .completed? = client.terminal, echoed.count < sent.count {
                throw SilentLoss(description: "client \(index) got \(echoed.count) of \(sent.count) bytes back, then an end")
            }
        }
    }

    /// Six faults drawn from `seed`: resets of connections 1...4, and partitions of the server from one client.
    private func drawFaults(_ seed: UInt64) -> [SimulationFault] {
        var random = SeededRandomNumberGenerator(seed: seed)
        return (0..<6).map { _ in
            if Bool.random(using: &random) {
                return .reset(connection: Int.random(in: 1...4, using: &random), at: .milliseconds(Int64.random(in: 0..<150, using: &random)))
            }
            return .partition("server", "client-\(Int.random(in: 0..<4, using: &random))",
                              at: .milliseconds(Int64.random(in: 0..<100, using: &random)),
                              for: .milliseconds(Int64.random(in: 10..<100, using: &random)))
        }
    }

    func testABrokenServersFailingSeedShrinksToTheTwoFaultsThatTriggerItsBug() throws {
        // Draw fault plans from seeds until one makes the server lose an echo.
        var failing: (seed: UInt64, faults: [SimulationFault])?
        for seed in UInt64(1)...200 {
            let faults = drawFaults(seed)
            let simulation = try Simulation(seed: seed, faultPlan: faults)
            let failed = (try? runBrokenEcho(simulation)) == nil
            XCTAssertEqual(simulation.finish().problems, [], "seed \(seed)")
            if failed {
                failing = (seed, faults)
                break
            }
        }
        let (seed, faults) = try XCTUnwrap(failing, "no seed in 1...200 finds the bug")

        var printed: [String] = []
        let minimal = Simulation.shrink(seed: seed, faults: faults, print: { printed.append($0); print($0) }) { simulation in
            try runBrokenEcho(simulation)
        }
        // Client 0 cut off from 42 ms (last heard at 33 ms), another connection reset at 84 ms: 51 ms of quiet.
        XCTAssertEqual(seed, 15, "the first seed of 1...200 whose draws fail the run")
        XCTAssertEqual(minimal, [
            .reset(connection: 4, at: .milliseconds(84)),
            .partition("server", "client-0", at: .milliseconds(42), for: .milliseconds(67)),
        ])
        XCTAssertEqual(printed, ["simulation seed 15: 2 of 6 fault(s) still fail it (11 runs):\n"
                                 + "let faults: [SimulationFault] = [\n"
                                 + "    .reset(connection: 4, at: .milliseconds(84)),\n"
                                 + "    .partition(\"server\", \"client-0\", at: .milliseconds(42), for: .milliseconds(67)),\n]"])

        // The minimal plan pasted into a test: it still fails, the same way in both runs of the check.
        var failures: [String] = []
        Simulation.check(seed: seed, faultPlan: minimal) { simulation in
            do {
                try runBrokenEcho(simulation)
            } catch {
                failures.append("\(error)")
            }
        }
        XCTAssertEqual(failures, Array(repeating: "client 0 got 80 of 200 bytes back, then an end", count: 2))
        // Either fault alone is harmless.
        for fault in minimal {
            Simulation.check(seed: seed, faultPlan: [fault]) { simulation in try runBrokenEcho(simulation) }
        }
    }
}
