import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// 1,000 concurrent clients × 1,000 messages each through the echo sample's server
/// (EchoServerKit), every echoed byte compared with what was sent.
///
/// The server runs on the harness loop (which checks, at the end, that every handle
/// closed and `uv_loop_close` returned 0); the clients are ReactiveUV's own
/// (`TCP.connect`) on two more loops. All clients connect first, so the server holds
/// 1,000 connections at once, then all start sending, four messages in flight each.
/// `STRESS_CLIENTS` and `STRESS_MESSAGES` override the counts; `STRESS_SCALE` scales both.
final class EchoFleetStressTests: XCTestCase {
    func testAThousandClientsEachEchoAThousandMessagesWithEveryByteChecked() throws {
        let clientCount = environmentInt("STRESS_CLIENTS", default: scaled(1000, minimum: 10))
        let messages = environmentInt("STRESS_MESSAGES", default: scaled(1000, minimum: 10))
        // Two descriptors per connection (both ends are in this process), plus the loops' own.
        let limit = try ensureOpenFileLimit(2 * clientCount + 100)
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            let server = try harness.record(EchoServer.run(port: 0), label: "echo server")
            guard case .listening(let address)? = try server.waitForValues(1).first else {
                throw StressFailure("the server's first event was not .listening: \(server.events)")
            }
            let loops = [EventLoop(name: "fleet-a"), EventLoop(name: "fleet-b")]
            defer { for loop in loops { loop.shutdown() } }
            let tally = FleetTally()
            let fleets = loops.enumerated().map { offset, loop in
                ClientFleet(loop: loop,
                            clients: stride(from: offset, to: clientCount, by: loops.count).map {
                                VerifyingEchoClient(index: $0, loop: loop, messages: messages, window: 4, tally: tally)
                            },
                            maxConnecting: 32)
            }

            let started = SchedulerInstant.now
            for fleet in fleets { fleet.startConnecting(port: address.port) }
            try waitFor("\(clientCount) clients to connect", timeout: .seconds(120), observed: tally.summary) {
                tally.connected.load(ordering: .relaxed) == clientCount || !tally.failures.current.isEmpty
            }
            XCTAssertEqual(tally.failures.current, [], "clients failed while connecting")
            // Every client is connected and none has sent yet: the server holds them all at once.
            let accepted = try server.waitForValues(1 + clientCount, timeout: .seconds(30))
            let peak = accepted.compactMap { event -> Int? in
                if case .connected(_, let open) = event { return open }
                return nil
            }.max()
            XCTAssertEqual(peak, clientCount, "the server did not hold every client at once")
            let connectedAt = SchedulerInstant.now

            for fleet in fleets { fleet.go() }
            try waitFor("every client to finish", timeout: .seconds(1800), observed: tally.summary) {
                tally.finished.load(ordering: .relaxed) == clientCount
            }
            let finishedAt = SchedulerInstant.now

            XCTAssertEqual(tally.failures.current, [], "clients lost, reordered or corrupted bytes")
            let expectedBytes = (0..<clientCount).map { VerifyingEchoClient.totalBytes(client: $0, messages: messages) }
            XCTAssertEqual(tally.roundTrips.load(ordering: .relaxed), clientCount * messages)
            XCTAssertEqual(tally.bytesChecked.load(ordering: .relaxed), expectedBytes.reduce(0, +))
            let byClient = tally.bytesByClient.current
            XCTAssertEqual((0..<clientCount).map { byClient[$0] ?? -1 }, expectedBytes, "bytes sent per client")

            // The server's side: every client reported gone, cleanly, with exactly its bytes echoed.
            let events = try server.waitForValues(1 + 2 * clientCount, timeout: .seconds(60))
            let gone = events.compactMap { event -> (bytes: Int, error: (any Error)?)? in
                if case .disconnected(_, let bytes, let error, _) = event { return (bytes, error) }
                return nil
            }
            XCTAssertEqual(gone.filter { $0.error != nil }.count, 0, "clients the server saw fail: \(gone.compactMap(\.error).prefix(5))")
            XCTAssertEqual(gone.map(\.bytes).sorted(), expectedBytes.sorted(), "the server echoed exactly what each client sent")

            // The clients closed everything they opened: their loops shut down with nothing left to close.
            for loop in loops {
                let closed = try shutDown(loop)
                XCTAssertEqual(closed.loopCloseResult, 0)
                XCTAssertEqual(closed.closedHandles, [], "handles still open on \(loop.name) after every client finished")
            }
            try harness.wait(for: "every server-side connection closed", timeout: .seconds(30)) {
                (try? harness.loop.openHandles().count) == 1  // the listener
            }

            let total = expectedBytes.reduce(0, +)
            print("stress: \(clientCount) concurrent clients × \(messages) messages through EchoServerKit: "
                  + "connected in \(formatted(connectedAt - started)), echoed in \(formatted(finishedAt - connectedAt)) "
                  + "(\(Int(Double(clientCount * messages) / seconds(finishedAt - connectedAt))) messages/s); "
                  + "\(total) bytes each way, every one checked, 0 lost or reordered; open-file limit \(limit)")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
