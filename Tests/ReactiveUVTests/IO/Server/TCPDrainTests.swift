import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `TCPServer.serve(..., drain:)` on one loop: stop accepting, tell the application, wait for
/// the connections up to a deadline, reset the rest, complete. (On a group:
/// `TCPGroupServerTests.testDrainOnAGroup...`.)
final class TCPDrainTests: XCTestCase {
    /// A client in the middle of a 4 MiB transfer when the drain begins gets every byte of
    /// its echo; the server signal completes only after that connection closed.
    func testAClientMidTransferFinishesItsBytesDuringADrain() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startDrainableServer(harness, drain: drain)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            try echo(connection, on: harness)

            let payload = bytePattern(4 << 20, seed: 7)
            let chunk = 64 << 10
            var echoed: [UInt8] = []
            var offset = 0
            func exchange(until end: Int) throws {
                while offset < end {
                    let next = min(offset + chunk, end)
                    try client.sendAll(Array(payload[offset..<next]))
                    echoed += try client.receive(exactly: next - offset)
                    offset = next
                }
            }
            try exchange(until: 1 << 20)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            try server.wait(for: ".draining") { $0.contains { if case .next(.draining(open: 1)) = $0 { true } else { false } } }
            try exchange(until: payload.count)
            XCTAssertNil(server.terminal, "the server completed while a connection was still open")
            client.shutdownWrite()
            XCTAssertEqual(try client.receiveUntilEOF(), [], "nothing after the echo")
            XCTAssertTrue(echoed == payload, "the echo of the 4 MiB differs from what was sent")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertFalse(connection.isOpen)
        }
    }

    /// A client that never sends nor closes is reset at the drain's deadline, not before,
    /// and then the server signal completes.
    func testASilentClientIsResetAtTheDeadline() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startDrainableServer(harness, drain: drain)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "silent client's bytes")
            let deadline = Duration.milliseconds(300)
            let began = ContinuousClock.now
            drain.sendNext(.graceful(timeout: deadline))
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            let elapsed = ContinuousClock.now - began
            XCTAssertGreaterThanOrEqual(elapsed, deadline, "the silent client was closed before the deadline")
            XCTAssertEqual(client.receiveUntilEnd().end, .reset, "the client was reset at the deadline")
            XCTAssertTrue(try bytes.waitForTermination().isCompleted, "its bytes complete: \(bytes.events)")
            XCTAssertFalse(connection.isOpen)
        }
    }

    /// Once the drain began the listening socket is closed: a new client is refused, while
    /// the connected one is still served; `.force` then resets it and the server completes.
    func testNoNewConnectionIsAcceptedAfterTheDrainBeganAndForceEndsIt() throws {
        LoopHarness.run { harness in
            let (drain, server, port, client, _) = try drainingWithOneEchoClient(harness)
            defer { client.close() }
            XCTAssertThrowsError(try BlockingClient(port: port), "a client connected after the drain began") { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
            }
            try client.sendAll([1, 2, 3])
            XCTAssertEqual(try client.receive(exactly: 3), [1, 2, 3], "the connected client is still served")
            XCTAssertNil(server.terminal)
            drain.sendNext(.force)
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertEqual(client.receiveUntilEnd().end, .reset, "forced: the client was reset")
            XCTAssertEqual(accepted(server).count, 1, "only the client before the drain was accepted")
        }
    }

    /// The server signal completes after the last connection closed, not after the first:
    /// `.draining(open: 2)`, one client leaves, still running; the other leaves, completed.
    func testTheServerCompletesAfterTheLastConnectionClosed() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startDrainableServer(harness, drain: drain)
            let first = try BlockingClient(port: port)
            defer { first.close() }
            let second = try BlockingClient(port: port)
            defer { second.close() }
            for connection in try waitForAccepted(server, 2) { try echo(connection, on: harness) }
            drain.sendNext(.graceful(timeout: .seconds(60)))
            try server.wait(for: ".draining") { $0.count == 4 }
            guard case .draining(let open) = server.values[3] else { return XCTFail("\(server.values[3])") }
            XCTAssertEqual(open, 2)

            first.shutdownWrite()
            XCTAssertEqual(try first.receiveUntilEOF(), [], "the first client's connection closed")
            try harness.onLoop {}  // the server's loop has handled that close
            XCTAssertNil(server.terminal, "completed with a connection still open")
            try second.sendAll([9])
            XCTAssertEqual(try second.receive(exactly: 1), [9])
            second.shutdownWrite()
            XCTAssertEqual(try second.receiveUntilEOF(), [])
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            // Later requests do nothing (the drain is over).
            drain.sendNext(.force)
        }
    }

    /// Disposing the server in the middle of a graceful drain ends the drain with it: the open
    /// connection is closed, the drain's 60 s deadline no longer holds the loop, the server says
    /// nothing more (no completion: it was disposed), and a later request is not followed.
    func testDisposingADrainingServerEndsTheDrainAndItsDeadline() throws {
        LoopHarness.run { harness in
            let (drain, server, _, client, connection) = try drainingWithOneEchoClient(harness)
            defer { client.close() }
            let eventsBefore = server.events.count
            server.dispose()
            XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "the server's disposal closes the connection")
            try harness.wait(for: "nothing open on the loop (the deadline's timer included)") {
                (try? harness.loop.openHandles()) == []
            }
            drain.sendNext(.force)
            try harness.onLoop {}
            XCTAssertEqual(server.events.count, eventsBefore, "the disposed server reported more: \(server.events)")
            XCTAssertFalse(connection.isOpen)
        }
    }

    /// A drain with no connection open completes at once; the listening socket is closed.
    func testADrainWithNoConnectionCompletesAtOnce() throws {
        LoopHarness.run { harness in
            let drain = Subject<TCPServer.DrainRequest>()
            let (server, port) = try startDrainableServer(harness, drain: drain)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertEqual(server.values.count, 2, "\(server.values)")
            XCTAssertThrowsError(try BlockingClient(port: port)) { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
            }
        }
    }

    /// The streams guide's drain example is this code, and it drains a group: a client connected
    /// before the request still gets its echo, a new one is refused, and once the client
    /// left every loop has closed everything (the completion disposed the server).
    func testTheStreamsGuideDrainExampleIsThisCodeAndDrains() throws {
        try assertDocumentBlock("docs/guides/streams.md", containing: "shutdownRequested.map", matches: "GUIDE-STREAMS-DRAIN")
        let port = try unusedPort()
        let group = EventLoopGroup(loopCount: 2)
        let shutdownRequested = Subject<Void>()
        // GUIDE-STREAMS-DRAIN-BEGIN
        // When shutdownRequested fires: stop accepting, let the connected clients finish, reset
        // whoever is still connected 10 s later; the server signal completes once all have gone.
        let drain = shutdownRequested.map { TCPServer.DrainRequest.graceful(timeout: .seconds(10)) }
        let server = TCPServer.serve(port: port, on: group, onAccepted: { connection in
            connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
        }, drain: drain).subscribe(
            next: { event in if case .draining(let open) = event { print("draining", open, "connection(s)") } },
            completed: { print("every client has left") })
        // GUIDE-STREAMS-DRAIN-END
        LoopHarness.run { harness in
            var connected: BlockingClient?
            try harness.wait(for: "the server to listen") {
                connected = try? BlockingClient(port: port)
                return connected != nil
            }
            let client = connected!
            defer { client.close() }
            try client.sendAll([1])
            XCTAssertEqual(try client.receive(exactly: 1), [1])
            shutdownRequested.sendNext(())
            try harness.wait(for: "the listening sockets to close") {
                do {
                    try BlockingClient(port: port).close()  // accepted before the drain reached its loop
                    return false
                } catch {
                    return (error as? BlockingClientError)?.errno == ECONNREFUSED
                }
            }
            try client.sendAll(Array("after".utf8))
            XCTAssertEqual(try client.receive(exactly: 5), Array("after".utf8), "the echo during the drain")
            client.shutdownWrite()
            XCTAssertEqual(try client.receiveUntilEOF(), [])
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) has nothing open") { (try? loop.openHandles()) == [] }
            }
        }
        server.dispose()
        let reports = try group.tryShutdown()
        XCTAssertEqual(reports.map(\.loopCloseResult), [0, 0])
    }

    // MARK: - support

    /// A drainable server with one echoing client, once a 60 s graceful drain began (`.draining(open: 1)` seen).
    private func drainingWithOneEchoClient(_ harness: LoopHarness) throws -> (
        drain: Subject<TCPServer.DrainRequest>, server: EventRecorder<TCPServer.Event>, port: Int,
        client: BlockingClient, connection: TCPConnection
    ) {
        let drain = Subject<TCPServer.DrainRequest>()
        let (server, port) = try startDrainableServer(harness, drain: drain)
        let client = try BlockingClient(port: port)
        do {
            let connection = try waitForAccepted(server, 1)[0]
            try echo(connection, on: harness)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            try server.wait(for: ".draining") { $0.contains { if case .next(.draining(open: 1)) = $0 { true } else { false } } }
            return (drain, server, port, client, connection)
        } catch {
            client.close()
            throw error
        }
    }

    private func startDrainableServer(_ harness: LoopHarness, drain: Signal<TCPServer.DrainRequest>,
                                      options: TCPOptions = TCPOptions()) throws -> (EventRecorder<TCPServer.Event>, Int) {
        let server = try harness.record(TCPServer.serve(port: 0, options: options, drain: drain), label: "server")
        guard case .listening(let address) = try server.waitForValues(1)[0] else {
            throw TestFailure("the first event was not .listening: \(server.events)")
        }
        return (server, address.port)
    }
}

/// Echoes `connection` on the harness's loop, closing it when the peer half-closes.
func echo(_ connection: TCPConnection, on harness: LoopHarness) throws {
    try harness.onLoop {
        _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
    }
}
