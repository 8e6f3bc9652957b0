import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `UnixSocketOptions.idleTimeout`: a Unix-socket server closes a connection that moved no bytes
/// for that long (stamped by the connection's reads and writes, and by each check that finds the
/// kernel's unread bytes changed: the kernel keeps no record of the last byte for a Unix socket).
final class UnixIdleTimeoutTests: XCTestCase {
    /// A client that connects and says nothing is closed, not before the timeout: its `bytes`
    /// fails with `ETIMEDOUT` naming the idle time, and the client reads EOF; the server goes on.
    func testASilentClientIsClosedAfterTheIdleTimeoutNotBefore() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/idle.sock"
            try checked { harness in
                let timeout = Duration.milliseconds(300)
                let connected = ContinuousClock.now
                let (server, client, connection, bytes) = try serveOneClient(harness, path, idleTimeout: timeout)
                defer { client.close() }
                try assertClosedForIdleness(try bytes.waitForTermination(), connected: connected, timeout: timeout,
                                            option: "UnixSocketOptions.idleTimeout")
                XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "the client was closed")
                XCTAssertFalse(connection.isOpen)
                XCTAssertNil(server.terminal, "the server goes on")
                server.dispose()
            }
        }
    }

    /// A client that sends a byte every 50 ms is kept past six idle timeouts of 200 ms (each byte
    /// echoed: reads and writes both count), and is closed only once it falls silent.
    func testAnActiveClientIsKeptPastSeveralTimeouts() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/active.sock"
            try checked { harness in
                let timeout = Duration.milliseconds(200)
                let (server, client, connection, bytes) = try serveOneClient(harness, path, idleTimeout: timeout)
                defer { client.close() }
                // Each byte is echoed back: the kernel taking the reply counts as activity too.
                try assertAnActiveClientIsKeptOpenThenTimesOut(
                    timeout: timeout, bytes: bytes, isOpen: { connection.isOpen },
                    send: { try client.sendAll([$0]) },
                    afterRead: { byte in
                        connection.send([byte])
                        XCTAssertEqual(try client.receive(exactly: 1), [byte])
                    })
                server.dispose()
            }
        }
    }

    /// A client that keeps sending to a connection nobody reads (no `bytes` subscriber, as a server
    /// that only writes, or a reader that paused) is kept past six idle timeouts: the bytes the
    /// kernel holds unread count as activity, as the kernel's own record does for TCP. Once the
    /// client falls silent the connection is closed, no sooner than the timeout after its last byte.
    func testAClientSendingToAConnectionNobodyReadsIsKeptUntilItFallsSilent() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/unread.sock"
            try checked { harness in
                let timeout = Duration.milliseconds(200)
                let (server, client, connection) = try acceptOneUnixClient(harness, path, idleTimeout: timeout)
                defer { client.close() }
                try assertAClientSendingUnreadBytesIsKeptThenTimesOut(
                    timeout: timeout, isOpen: { connection.isOpen },
                    send: { try client.sendAll([$0]) }, receiveEnd: { client.receiveUntilEnd().end })
                XCTAssertNil(server.terminal, "the server goes on")
                server.dispose()
            }
        }
    }

    /// A zero or negative idle timeout is refused at the door: the server fails with `EINVAL`
    /// naming the option, and binds nothing.
    func testANonPositiveIdleTimeoutFailsTheServerWithEINVAL() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/refused.sock"
            try checked { harness in
                for timeout in [Duration.zero, .milliseconds(-5)] {
                    let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(idleTimeout: timeout)))
                    let error = try XCTUnwrap(try server.waitForTermination().error as? UVError)
                    XCTAssertEqual(error.name, "EINVAL")
                    XCTAssertTrue(error.message.contains("UnixSocketOptions.idleTimeout must be positive"), error.description)
                    XCTAssertFalse(FileManager.default.fileExists(atPath: path), "a socket file was bound")
                }
            }
        }
    }

    /// A server with `idleTimeout` at `path`, one client connected, and the accepted connection (nobody reads it).
    private func acceptOneUnixClient(_ harness: LoopHarness, _ path: String, idleTimeout: Duration) throws -> (
        server: EventRecorder<UnixSocket.Event>, client: UnixBlockingClient, connection: UnixConnection
    ) {
        let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(idleTimeout: idleTimeout)), label: "server")
        _ = try server.waitForValues(1)
        let client = try UnixBlockingClient(path: path)
        do {
            return (server, client, try waitForAcceptedUnix(server, 1)[0])
        } catch {
            client.close()
            throw error
        }
    }

    /// `acceptOneUnixClient`, with the accepted connection's `bytes` recorded.
    private func serveOneClient(_ harness: LoopHarness, _ path: String, idleTimeout: Duration) throws -> (
        server: EventRecorder<UnixSocket.Event>, client: UnixBlockingClient, connection: UnixConnection, bytes: EventRecorder<[UInt8]>
    ) {
        let (server, client, connection) = try acceptOneUnixClient(harness, path, idleTimeout: idleTimeout)
        do {
            return (server, client, connection, try harness.record(connection.bytes, label: "the client's bytes"))
        } catch {
            client.close()
            throw error
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
