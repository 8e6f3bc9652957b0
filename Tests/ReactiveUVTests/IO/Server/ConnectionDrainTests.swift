import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A drain as each connection of a server on one loop sees it: `draining`, `markIdle()`, and
/// `.graceful(timeout:closingIdle: true)` closing the idle ones at once. (On a group:
/// `GroupConnectionDrainTests`.)
///
/// The deadlines are 60 s where a test is about what happens before them: each test ends long
/// before, and a close that only the deadline would have made shows as a client's receive
/// timing out (20 s) or a reset, never as an EOF.
final class ConnectionDrainTests: XCTestCase {
    /// Idle clients (one never sent, two had their answer) read EOF, not a reset, at the drain's
    /// start, while a client in the middle of a 16 MiB answer still has most of it to read; it
    /// then reads every byte and EOF, and only then does the server complete.
    func testIdleClientsReadEOFAtOnceWhileAClientMidAnswerGetsEveryByteThenEOF() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startServer(harness, drain: drain)
            let silent = try BlockingClient(port: port)
            let answered = try (0..<2).map { _ in try BlockingClient(port: port) }
            let downloading = try BlockingClient(port: port)
            defer { for client in [silent, downloading] + answered { client.close() } }
            let connections = try waitForAccepted(server, 4)
            for connection in connections { try answerRequests(connection, on: harness) }
            let download = try connection(of: downloading, in: connections)
            for client in answered {
                try client.sendAll([1])
                XCTAssertTrue(try client.receive(exactly: 1 << 16) == answer(1), "the answer before the drain")
            }
            try downloading.sendAll([255])
            let head = try downloading.receive(exactly: 1 << 20)
            // Far more than the kernel's buffers hold is still queued on the server.
            XCTAssertGreaterThan(try harness.onLoop { download.queuedWriteByteCount }, 1 << 20)

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            for (index, client) in ([silent] + answered).enumerated() {
                let end = client.receiveUntilEnd()
                XCTAssertEqual(end.bytes, [], "idle client \(index) was sent nothing more")
                XCTAssertEqual(end.end, .endOfFile, "idle client \(index): FIN at the drain's start")
            }
            XCTAssertNil(server.terminal, "the server completed while an answer was still going out")
            XCTAssertTrue(try harness.onLoop { download.isOpen }, "the downloading client's connection closed before its answer went out")
            let rest = try downloading.receiveUntilEOF()
            XCTAssertTrue(head + rest == answer(255), "the answer during the drain differs (\(head.count + rest.count) bytes)")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    /// A handler in the middle of a request hears the drain (`draining`), is left open (it has
    /// not marked itself idle), finishes its answer, marks itself idle, and that closes it: the
    /// client reads the whole answer, then EOF, and the server completes.
    func testARequestInFlightFinishesThenItsConnectionCloses() throws {
        LoopHarness.run { harness in
            let (drain, server, client, connection, heard) = try oneClient(harness)
            defer { client.close() }
            let finish = Subject<Void>()
            try harness.onLoop {
                _ = connection.bytes.subscribeNext { _ in
                    connection.send(answer(1))
                    // The second half waits for `finish`: the request is in flight until then.
                    _ = finish.take(1).subscribeNext {
                        connection.send(answer(2))
                        connection.markIdle()
                    }
                }
            }
            try client.sendAll([0])
            XCTAssertTrue(try client.receive(exactly: 1 << 16) == answer(1))

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            XCTAssertTrue(try heard.waitForTermination().isCompleted, "\(heard.events)")
            XCTAssertEqual(heard.values.count, 1, "the connection heard the drain once")
            XCTAssertTrue(try harness.onLoop { connection.isOpen }, "a connection in the middle of a request was closed")
            XCTAssertNil(server.terminal)

            finish.sendNext(())
            XCTAssertTrue(try client.receiveUntilEOF() == answer(2), "the rest of the answer, then EOF")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    /// The deadline resets only what is left: the idle client read EOF at the drain's start and
    /// is not reset; the busy one (its request never answered) is reset at the deadline, not
    /// before, and then the server completes.
    func testTheDeadlineResetsOnlyTheConnectionsStillOpen() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startServer(harness, drain: drain)
            let idle = try BlockingClient(port: port)
            let busy = try BlockingClient(port: port)
            defer { for client in [idle, busy] { client.close() } }
            let connections = try waitForAccepted(server, 2)
            // Reads and never answers: busy from its first byte.
            let read = try harness.record(try connection(of: busy, in: connections).bytes, label: "busy connection's bytes")
            try busy.sendAll([7])
            _ = try read.waitForValues(1)

            let deadline = Duration.milliseconds(300)
            let began = ContinuousClock.now
            drain.sendNext(.graceful(timeout: deadline, closingIdle: true))
            XCTAssertEqual(idle.receiveUntilEnd().end, .endOfFile, "the idle client was closed, not reset")
            XCTAssertEqual(busy.receiveUntilEnd().end, .reset, "the busy client was reset at the deadline")
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - began, deadline, "the busy client was reset before the deadline")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    /// Without `closingIdle` every connection hears the drain and stays open (still served); one
    /// subscribing during the drain hears it at once. A later graceful request with `closingIdle`
    /// closes the idle ones then: each client reads EOF and the server completes.
    func testEveryConnectionHearsAPlainDrainAndALaterRequestClosesTheIdleOnes() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startServer(harness, drain: drain)
            let clients = try (0..<2).map { _ in try BlockingClient(port: port) }
            defer { for client in clients { client.close() } }
            let connections = try waitForAccepted(server, 2)
            let heard = try connections.map { try harness.record($0.draining, label: "draining") }
            for connection in connections { try answerRequests(connection, on: harness) }

            drain.sendNext(.graceful(timeout: .seconds(60)))
            for (index, recorder) in heard.enumerated() {
                XCTAssertTrue(try recorder.waitForTermination().isCompleted, "connection \(index): \(recorder.events)")
                XCTAssertEqual(recorder.values.count, 1, "connection \(index) heard the drain once")
            }
            let late = try harness.record(connections[0].draining, label: "subscribed during the drain")
            XCTAssertTrue(try late.waitForTermination().isCompleted)
            XCTAssertEqual(late.values.count, 1, "a subscriber during the drain hears it at once")
            for (index, client) in clients.enumerated() {
                try client.sendAll([1])
                XCTAssertTrue(try client.receive(exactly: 1 << 16) == answer(1), "client \(index) is still served")
            }
            XCTAssertNil(server.terminal)

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            for (index, client) in clients.enumerated() {
                XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "client \(index) was closed as idle")
            }
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    /// A connection that ends before any drain completes its `draining` with no value; a
    /// client's connection (no server accepted it) hears nothing of the server's drain.
    func testDrainingCompletesEmptyWhenTheConnectionEndsAndStaysSilentOnAClient() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startServer(harness, drain: drain)
            let leaving = try BlockingClient(port: port)
            defer { leaving.close() }
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port), label: "client")
            let clientConnection = try client.waitForValues(1)[0]
            let connections = try waitForAccepted(server, 2)
            let heard = try connections.map { try harness.record($0.draining, label: "draining") }
            let clientHeard = try harness.record(clientConnection.draining, label: "client's draining")
            let leavingConnection = try connection(of: leaving, in: connections)
            let leaver = connections.firstIndex { $0 === leavingConnection }!
            let clientBytes = try harness.record(clientConnection.bytes, label: "client's bytes")
            try answerRequests(connections[leaver], on: harness)

            leaving.shutdownWrite()
            XCTAssertEqual(leaving.receiveUntilEnd().end, .endOfFile)
            XCTAssertTrue(try heard[leaver].waitForTermination().isCompleted, "\(heard[leaver].events)")
            XCTAssertEqual(heard[leaver].values.count, 0, "a connection that ended heard no drain")

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            XCTAssertTrue(try heard[1 - leaver].waitForTermination().isCompleted)
            XCTAssertEqual(heard[1 - leaver].values.count, 1)
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertTrue(try clientBytes.waitForTermination().isCompleted, "the client's connection read EOF: \(clientBytes.events)")
            try harness.onLoop {}
            XCTAssertEqual(clientHeard.events.count, 0, "a client's connection heard a drain: \(clientHeard.events)")
        }
    }

    /// Bytes the kernel holds unread make a connection busy: closing it then would reset the
    /// client. The drain leaves it open; once the handler reads the request, answers and marks
    /// it idle, it closes, and the client reads the answer, then EOF.
    func testBytesWaitingUnreadKeepAConnectionOpenUntilItsRequestIsAnswered() throws {
        LoopHarness.run { harness in
            let (drain, server, client, connection, heard) = try oneClient(harness)
            defer { client.close() }
            try client.sendAll([1])
            try harness.wait(for: "the request to wait unread on the server") {
                (try? harness.onLoop { connection.io.unreadByteCount }) == 1
            }

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            XCTAssertTrue(try heard.waitForTermination().isCompleted, "\(heard.events)")
            XCTAssertTrue(try harness.onLoop { connection.isOpen }, "a connection with a request unread was closed")
            try answerRequests(connection, on: harness)
            XCTAssertTrue(try client.receiveUntilEOF() == answer(1), "the answer, then EOF")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    /// A write queued since the last `markIdle()` (a greeting sent on accept) makes a connection
    /// busy: the drain leaves it open until the handler marks it idle; then the client reads the
    /// greeting, then EOF.
    func testAWriteQueuedSinceTheLastMarkKeepsAConnectionOpenUntilItIsMarkedIdle() throws {
        LoopHarness.run { harness in
            let (drain, server, client, connection, heard) = try oneClient(harness)
            defer { client.close() }
            try harness.onLoop { connection.send(answer(1)) }

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            XCTAssertTrue(try heard.waitForTermination().isCompleted, "\(heard.events)")
            XCTAssertTrue(try harness.onLoop { connection.isOpen }, "a connection that had just written was closed as idle")
            connection.markIdle()  // from this thread: it hops to the loop
            XCTAssertTrue(try client.receiveUntilEOF() == answer(1), "the greeting, then EOF")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    // MARK: - support

    /// The server's end of `client`'s connection, found by the client's port.
    private func connection(of client: BlockingClient, in connections: [TCPConnection]) throws -> TCPConnection {
        guard let found = connections.first(where: { $0.peerAddress?.port == client.localPort }) else {
            throw TestFailure("no accepted connection from port \(client.localPort)")
        }
        return found
    }

    /// A server with one client: its drain requests, the server's events, the client, its connection
    /// and what the connection hears of the drain.
    private func oneClient(_ harness: LoopHarness) throws -> (Subject<TCPServer.DrainRequest>, EventRecorder<TCPServer.Event>,
                                                               BlockingClient, TCPConnection, EventRecorder<Void>) {
        let drain = Subject<TCPServer.DrainRequest>()
        let (server, port) = try startServer(harness, drain: drain)
        let client = try BlockingClient(port: port)
        let connection = try waitForAccepted(server, 1)[0]
        return (drain, server, client, connection, try harness.record(connection.draining, label: "draining"))
    }

    private func startServer(_ harness: LoopHarness, drain: Signal<TCPServer.DrainRequest>) throws -> (EventRecorder<TCPServer.Event>, Int) {
        let server = try harness.record(TCPServer.serve(port: 0, drain: drain), label: "server")
        guard case .listening(let address) = try server.waitForValues(1)[0] else {
            throw TestFailure("the first event was not .listening: \(server.events)")
        }
        return (server, address.port)
    }
}

/// The answer to a request byte `n`: `n` × 64 KiB of a pattern seeded with `n`.
func answer(_ request: UInt8) -> [UInt8] {
    bytePattern(Int(request) << 16, seed: Int(request))
}

/// Serves `connection` on the harness's loop: each request byte gets its `answer`, and then the
/// connection is marked idle; closed after the peer's EOF.
func answerRequests(_ connection: StreamConnection, on harness: LoopHarness) throws {
    try harness.onLoop {
        _ = connection.bytes.subscribe(next: { requests in
            for request in requests { connection.send(answer(request)) }
            connection.markIdle()
        }, completed: { connection.close() })
    }
}
