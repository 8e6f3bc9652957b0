import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `TCPOptions.idleTimeout`: a server closes a connection that moved no bytes for that long.
final class TCPIdleTimeoutTests: XCTestCase {
    /// A client that connects and says nothing is closed, not before the timeout: its `bytes`
    /// fails with `ETIMEDOUT` naming the idle time, and the client reads EOF.
    func testASilentClientIsClosedAfterTheIdleTimeoutNotBefore() throws {
        LoopHarness.run { harness in
            let timeout = Duration.milliseconds(300)
            let (server, port) = try startServer(harness, options: TCPOptions(idleTimeout: timeout))
            let connected = ContinuousClock.now
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "silent client's bytes")
            try assertClosedForIdleness(try bytes.waitForTermination(), connected: connected, timeout: timeout,
                                        option: "TCPOptions.idleTimeout")
            XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "the client was closed")
            XCTAssertFalse(connection.isOpen)
            XCTAssertNil(server.terminal, "the server goes on")
        }
    }

    /// A client that sends a byte every 50 ms is kept past two idle timeouts of 1 s
    /// (each byte echoed), and is closed only once it falls silent.
    func testAnActiveClientIsKeptPastSeveralTimeouts() throws {
        LoopHarness.run { harness in
            let timeout = Duration.seconds(1)
            let (server, port) = try startServer(harness, options: TCPOptions(idleTimeout: timeout))
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "active client's bytes")
            try assertAnActiveClientIsKeptOpenThenTimesOut(
                timeout: timeout, bytes: bytes, isOpen: { connection.isOpen }
            ) { try client.sendAll([$0]) }
        }
    }

    /// A client that keeps sending to a connection nobody reads (no `bytes` subscriber) is kept past
    /// two idle timeouts: the kernel's record counts the bytes it received, read or not; once the
    /// client falls silent the connection is closed (as a Unix socket's is, by its own checks).
    func testAClientSendingToAConnectionNobodyReadsIsKeptUntilItFallsSilent() throws {
        LoopHarness.run { harness in
            let timeout = Duration.seconds(1)
            let (_, _, client, connection) = try acceptOneClient(harness, options: TCPOptions(idleTimeout: timeout))
            defer { client.close() }
            try assertAClientSendingUnreadBytesIsKeptThenTimesOut(
                timeout: timeout, isOpen: { connection.isOpen },
                send: { try client.sendAll([$0]) }, receiveEnd: { client.receiveUntilEnd().end })
        }
    }

    /// A zero or negative idle timeout is refused at the door: the server fails with `EINVAL`.
    func testANonPositiveIdleTimeoutFailsTheServerWithEINVAL() throws {
        LoopHarness.run { harness in
            for timeout in [Duration.zero, .milliseconds(-5)] {
                let server = try harness.record(TCPServer.serve(port: 0, options: TCPOptions(idleTimeout: timeout)))
                let end = try server.waitForTermination()
                XCTAssertEqual(errorName(server), "EINVAL", "\(end)")
                XCTAssertTrue("\(end)".contains("idleTimeout must be positive"), "\(end)")
                XCTAssertEqual(server.values.count, 0, "nothing was bound")
            }
            let group = EventLoopGroup(loopCount: 2)
            let onGroup = try harness.record(TCPServer.serve(port: 0, options: TCPOptions(idleTimeout: .zero), on: group))
            let end = try onGroup.waitForTermination()
            XCTAssertEqual(errorName(onGroup), "EINVAL", "\(end)")
            XCTAssertEqual(onGroup.values.count, 0, "refused before anything was bound: \(onGroup.values)")
            XCTAssertEqual(try group.tryShutdown().map(\.loopCloseResult), [0, 0])
        }
    }
}
