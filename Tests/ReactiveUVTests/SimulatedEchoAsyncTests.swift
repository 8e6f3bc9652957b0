import EchoAsyncKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import SampleSupport
import XCTest

/// The `echo-async` sample's server (tasks on a group's loops) on a simulation's network: its drain
/// with clients in the middle of a transfer, on virtual time, one trace per seed.
final class SimulatedEchoAsyncTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testTheEchoAsyncSampleDrainsServingTheClientMidTransferAndResettingTheOneLeftOpen() throws {
        Simulation.check(seed: 91) { simulation in
            let server = simulation.makeLoop(name: "server")
            let group = simulation.makeGroup(loopCount: 2, name: "clients")
            let options = try EchoServerOptions.parse(["--port", "7000", "--loops", "2", "--drain-timeout", "0.05"])
            let drain = Signal<Int>.interval(.milliseconds(10), on: server).take(1).map { _ in
                TCPServer.DrainRequest.graceful(timeout: options.drainTimeout)
            }
            let log = Locked<[String]>([])
            let outcome = Locked<String>("serving")
            try simulation.perform(on: server) {
                server.task { _ in
                    do {
                        try await EchoAsyncServer.serve(options, on: group, drain: drain, open: OpenCount()) { line in
                            log.withLock { $0.append(line) }
                        }
                        outcome.withLock { $0 = "drained at \(server.now.nanoseconds / 1_000_000) ms" }
                    } catch {
                        outcome.withLock { $0 = "failed: \(error)" }
                    }
                }
            }
            simulation.run(for: .milliseconds(1))
            XCTAssertEqual(log.current.first, "echo-async: listening on 127.0.0.1:7000", "\(log.current) \(outcome.current)")
            // The first client is in the middle of a transfer when the drain comes: more at 30 ms, then it half-closes.
            let tail = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let finishing = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([1, 2, 3])
                _ = connection.loop.schedule(after: .milliseconds(30)) {
                    connection.send(tail)
                    connection.shutdown()
                }
                return connection.bytes
            })
            // The second never closes: the drain's deadline resets it.
            let lingering = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([9])
                return connection.bytes
            })
            simulation.run(for: .milliseconds(20))
            let late = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000))
            simulation.runUntilIdle()

            let echoed = Array(finishing.values.joined())
            XCTAssertTrue(echoed == [1, 2, 3] + tail, "served to the end during the drain: \(echoed.count) bytes")
            guard case .completed? = finishing.terminal else { return XCTFail("\(finishing.recorded)") }
            XCTAssertEqual(lingering.values, [[9]])
            XCTAssertEqual((lingering.terminal?.error as? UVError)?.name, "ECONNRESET")
            XCTAssertGreaterThanOrEqual(lingering.recorded.last?.time ?? ms(0), ms(60), "not before the 50 ms deadline")
            XCTAssertEqual((late.terminal?.error as? UVError)?.code, UVError.connectionRefusedCode, "no accepting while draining")

            let lines = log.current
            XCTAssertEqual(lines.prefix(2), ["echo-async: listening on 127.0.0.1:7000", "echo-async: serving on 2 loop(s)"])
            XCTAssertEqual(lines.dropFirst(2).prefix(3).last, "echo-async: no longer accepting; waiting for 2 connection(s) to close",
                           "both accepted before the drain: \(lines)")
            XCTAssertEqual(lines.dropFirst(5).map { $0.components(separatedBy: " left ").last ?? $0 }.sorted(),
                           ["after 1 bytes (0 open)", "after \(3 + tail.count) bytes (1 open)"],
                           "the one in transfer served to the end, then the one the deadline reset: \(lines)")
            XCTAssertTrue(outcome.current.hasPrefix("drained at "), outcome.current)
        }
    }
}
