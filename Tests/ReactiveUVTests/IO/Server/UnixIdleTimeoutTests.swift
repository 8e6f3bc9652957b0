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
        let timeout = Duration.milliseconds(300)
        try withOneClient("idle.sock", idleTimeout: timeout) { one in
            try assertClosedForIdleness(try one.bytes!.waitForTermination(), connected: one.connected, timeout: timeout,
                                        option: "UnixSocketOptions.idleTimeout")
            XCTAssertEqual(one.client.receiveUntilEnd().end, .endOfFile, "the client was closed")
            XCTAssertFalse(one.connection.isOpen)
            XCTAssertNil(one.server.terminal, "the server goes on")
        }
    }

    /// A client that sends a byte every 50 ms is kept past two idle timeouts of 1 s (each byte
    /// echoed: reads and writes both count), and is closed only once it falls silent.
    func testAnActiveClientIsKeptPastSeveralTimeouts() throws {
        let timeout = Duration.seconds(1)
        try withOneClient("active.sock", idleTimeout: timeout) { one in
            // Each byte is echoed back: the kernel taking the reply counts as activity too.
            try assertAnActiveClientIsKeptOpenThenTimesOut(
                timeout: timeout, bytes: one.bytes!, isOpen: { one.connection.isOpen },
                send: { try one.client.sendAll([$0]) },
                afterRead: { byte in
                    one.connection.send([byte])
                    XCTAssertEqual(try one.client.receive(exactly: 1), [byte])
                })
        }
    }

    /// A client that keeps sending to a connection nobody reads (no `bytes` subscriber, as a server
    /// that only writes, or a reader that paused) is kept past two idle timeouts: the bytes the
    /// kernel holds unread count as activity, as the kernel's own record does for TCP. Once the
    /// client falls silent the connection is closed, no sooner than the timeout after its last byte.
    func testAClientSendingToAConnectionNobodyReadsIsKeptUntilItFallsSilent() throws {
        let timeout = Duration.seconds(1)
        try withOneClient("unread.sock", idleTimeout: timeout, readingBytes: false) { one in
            try assertAClientSendingUnreadBytesIsKeptThenTimesOut(
                timeout: timeout, isOpen: { one.connection.isOpen },
                send: { try one.client.sendAll([$0]) }, receiveEnd: { one.client.receiveUntilEnd().end })
            XCTAssertNil(one.server.terminal, "the server goes on")
        }
    }

    /// A client downloading a file (`sendFile`) for longer than several idle timeouts, reading it
    /// steadily, is kept until the whole file has arrived: the bytes `sendfile` moves count as
    /// activity, though they bypass libuv's writes. The client's pauses between reads are its pace,
    /// not a wait for a race.
    func testAClientDownloadingAFileIsKeptWhileTheBytesFlow() throws {
        let timeout = Duration.seconds(1)
        try withTemporaryDirectory { directory in
            let path = directory + "/download.sock"
            let filePath = directory + "/download.bin"
            let contents = bytePattern(8 << 20, seed: 30)
            try Data(contents).write(to: URL(fileURLWithPath: filePath))
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(idleTimeout: timeout)),
                                                label: "server")
                _ = try server.waitForValues(1)
                let client = try UnixBlockingClient(path: path)
                defer { client.close() }
                let connection = try waitForAcceptedUnix(server, 1)[0]
                let bytes = try harness.record(connection.bytes, label: "the client's bytes")
                let file = try XCTUnwrap(try harness.record(Files.open(filePath)).waitForValues(1).first)
                let sent = try harness.record(connection.sendFile(file), label: "sendFile")
                let began = ContinuousClock.now
                var received: [UInt8] = []
                while received.count < contents.count, let chunk = client.receive(upTo: 32 << 10), !chunk.isEmpty {
                    received += chunk
                    Thread.sleep(forTimeInterval: 0.01)
                }
                XCTAssertGreaterThan(ContinuousClock.now - began, timeout * 2, "the download was not longer than two timeouts")
                XCTAssertEqual(received.count, contents.count, "the download was cut: \(sent.events), \(bytes.events)")
                XCTAssertTrue(received == contents)
                XCTAssertEqual(try sent.waitForValues(1), [contents.count])
                XCTAssertNil(bytes.terminal, "the connection ended during the download")
                // Silent from here: the idle timeout closes it as any other.
                XCTAssertEqual((try bytes.waitForTermination().error as? UVError)?.name, "ETIMEDOUT")
            }
        }
    }

    /// An IPC connection a server accepted (a router handing clients to a worker that only receives)
    /// is kept while the server passes connections over it, one every 50 ms for two idle timeouts of
    /// 2 s (each pass takes a connect, an accept and a hop: on a busy machine, far longer than 50 ms): a message sent with a descriptor counts as activity, as any write does (it did not:
    /// the worker was dropped one timeout after it connected). Once the passing stops, it is closed.
    func testAnIPCConnectionPassingConnectionsIsKeptUntilItFallsSilent() throws {
        let timeout = Duration.seconds(2)
        try withTemporaryDirectory { directory in
            let path = directory + "/router.sock"
            try checked { harness in
                let ipc = UnixSocketOptions(ipc: true, idleTimeout: timeout)
                let router = try harness.record(UnixSocket.serve(path: path, options: ipc), label: "router")
                _ = try router.waitForValues(1)
                let worker = try harness.record(UnixSocket.connect(path: path, options: UnixSocketOptions(ipc: true)), label: "worker")
                let channel = try worker.waitForValues(1)[0]
                let incoming = try harness.record(channel.incoming, label: "incoming")
                let workerLink = try waitForAcceptedUnix(router, 1)[0]
                let (clients, port) = try startServer(harness)
                var connected: [BlockingClient] = []
                defer { for client in connected { client.close() } }
                let began = ContinuousClock.now
                while ContinuousClock.now - began < timeout * 2 {
                    connected.append(try BlockingClient(port: port))
                    let client = try waitForAccepted(clients, connected.count)[connected.count - 1]
                    XCTAssertTrue(try harness.record(workerLink.send(client, with: [1])).waitForTermination().isCompleted)
                    try incoming.wait(for: "connection \(connected.count)") { events in
                        events.filter { if case .next(.tcp) = $0 { true } else { false } }.count >= connected.count
                    }
                    XCTAssertTrue(workerLink.isOpen, "the worker's link was closed while connections were passed over it")
                    Thread.sleep(forTimeInterval: 0.05)
                }
                XCTAssertTrue(workerLink.isOpen)
                try harness.wait(for: "the silent link to be closed") { !workerLink.isOpen }
                XCTAssertTrue(try incoming.waitForTermination().isCompleted, "the worker read the end")
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

    /// One client of a server with an idle timeout, as `withOneClient` hands it over.
    private struct OneClient {
        let server: EventRecorder<UnixSocket.Event>
        let client: UnixBlockingClient
        let connection: UnixConnection
        /// The connection's `bytes`, recorded (which reads them), or nil when nobody reads.
        let bytes: EventRecorder<[UInt8]>?
        /// Just before the client connected.
        let connected: ContinuousClock.Instant
    }

    /// Runs `body` on a clean harness with a server whose `idleTimeout` is given, on the socket file
    /// `name` in a temporary directory, and one client connected to it; then closes the client and
    /// disposes of the server.
    private func withOneClient(_ name: String, idleTimeout: Duration, readingBytes: Bool = true,
                               _ body: (OneClient) throws -> Void) throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/" + name
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(idleTimeout: idleTimeout)),
                                                label: "server")
                _ = try server.waitForValues(1)
                let connected = ContinuousClock.now
                let client = try UnixBlockingClient(path: path)
                defer { client.close() }
                let connection = try waitForAcceptedUnix(server, 1)[0]
                let bytes = readingBytes ? try harness.record(connection.bytes, label: "the client's bytes") : nil
                try body(OneClient(server: server, client: client, connection: connection, bytes: bytes, connected: connected))
                server.dispose()
            }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
