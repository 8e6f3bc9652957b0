import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import Synchronization
import XCTest

/// `StreamReader` and `read(with:)`: one set of callbacks reading many connections, with the rules
/// of a `bytes` subscriber (order, one reader at a time, the end told once, the half-close rule).
final class StreamReaderTests: XCTestCase {
    /// What a shared reader was told, in order, with the connection each call was about.
    enum Told: Equatable {
        case next(ObjectIdentifier, [UInt8])
        case completed(ObjectIdentifier)
        case failed(ObjectIdentifier, String)
    }

    /// A reader that logs its calls (and whether each ran on its connection's loop thread), and echoes when asked.
    final class LoggingReader: Sendable {
        let told = Mutex<[Told]>([])
        let offLoopCalls = Atomic<Int>(0)

        func reader(echoing: Bool = false) -> StreamReader {
            StreamReader(next: { connection, chunk in
                self.note(.next(ObjectIdentifier(connection), chunk), on: connection)
                if echoing { connection.send(chunk) }
            }, error: { connection, error in
                self.note(.failed(ObjectIdentifier(connection), (error as? UVError)?.name ?? "\(error)"), on: connection)
            }, completed: { connection in
                self.note(.completed(ObjectIdentifier(connection)), on: connection)
            })
        }

        private func note(_ told: Told, on connection: StreamConnection) {
            if !connection.loop.inEventLoop { offLoopCalls.wrappingAdd(1, ordering: .relaxed) }
            self.told.withLock { $0.append(told) }
        }

        var log: [Told] { told.withLock { $0 } }

        /// The bytes told for `connection`, joined.
        func bytes(of connection: StreamConnection) -> [UInt8] {
            log.flatMap { told -> [UInt8] in
                if case .next(ObjectIdentifier(connection), let chunk) = told { return chunk }
                return []
            }
        }

        /// The end told for `connection`, if any.
        func end(of connection: StreamConnection) -> Told? {
            log.first { told in
                switch told {
                case .completed(ObjectIdentifier(connection)), .failed(ObjectIdentifier(connection), _): true
                default: false
                }
            }
        }
    }

    /// One reader echoes three connections at once: each client gets its own bytes back, in order,
    /// each call names the connection it is about and runs on its loop thread; at a client's EOF the
    /// reader is told `completed` for that connection only, and the connection then closes itself
    /// (the half-close rule), so the client reads EOF after its echo.
    func testOneReaderEchoesManyConnectionsAndEachEndsOnItsOwn() throws {
        try checked { harness in
            let (clients, connection) = try acceptThreeClients(harness)
            defer { for client in clients { client.close() } }
            let connections = try clients.map(connection)
            let log = LoggingReader()
            let reader = log.reader(echoing: true)
            for connection in connections { connection.read(with: reader) }
            for (index, client) in clients.enumerated() {
                let message = Array("message \(index) ".utf8) + bytePattern(20_000, seed: index)
                try client.sendAll(message)
                XCTAssertEqual(try client.receive(exactly: message.count), message, "client \(index)'s echo")
                XCTAssertEqual(log.bytes(of: try connection(client)), message)
            }
            clients[1].shutdownWrite()
            XCTAssertEqual(try clients[1].receiveUntilEOF(), [], "the server did not close after the client's EOF")
            let second = try connection(clients[1])
            XCTAssertEqual(log.end(of: second), .completed(ObjectIdentifier(second)))
            try harness.wait(for: "the second connection closed") { !second.isOpen }
            for index in [0, 2] {
                let other = try connection(clients[index])
                XCTAssertNil(log.end(of: other), "connection \(index) was told an end")
                XCTAssertTrue(other.isOpen)
                try clients[index].sendAll([7, 7])
                XCTAssertEqual(try clients[index].receive(exactly: 2), [7, 7], "connection \(index) stopped reading")
            }
            XCTAssertEqual(log.offLoopCalls.load(ordering: .relaxed), 0, "a callback ran off its connection's loop thread")
            for connection in connections { connection.reset() }
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// One reader at a time, whichever kind: a `bytes` subscriber makes `read(with:)` fail with
    /// `EBUSY` (the subscriber reads on), and a shared reader makes a `bytes` subscriber fail the
    /// same way (the shared reader reads on).
    func testASecondReaderOfEitherKindIsRefusedWithEBUSY() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let first = try BlockingClient(port: port, receiveTimeout: .seconds(60))
            let second = try BlockingClient(port: port, receiveTimeout: .seconds(60))
            defer { first.close(); second.close() }
            let connections = try waitForAccepted(server, 2)
            let subscribed = try XCTUnwrap(connections.first { $0.peerAddress?.port == first.localPort })
            let shared = try XCTUnwrap(connections.first { $0.peerAddress?.port == second.localPort })
            let log = LoggingReader()
            let reader = log.reader()

            let bytes = try harness.record(subscribed.bytes, label: "bytes")
            try harness.onLoop { subscribed.read(with: reader) }
            XCTAssertEqual(log.log, [.failed(ObjectIdentifier(subscribed), "EBUSY")])
            try first.sendAll([1, 2, 3])
            XCTAssertEqual(try waitForBytes(bytes, 3), [1, 2, 3], "the subscriber stopped reading")

            try harness.onLoop { shared.read(with: reader) }
            let refused = try harness.record(shared.bytes, label: "bytes of the shared reader's connection")
            XCTAssertEqual(errorName(refused), "EBUSY")
            try second.sendAll([4, 5])
            try harness.wait(for: "the shared reader read on") { log.bytes(of: shared) == [4, 5] }
            XCTAssertNil(log.end(of: shared))
            for connection in connections { connection.reset() }
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// `stopReading()` stops the shared reader without telling it anything: bytes sent meanwhile
    /// wait in the socket, and a later `read(with:)` (from another thread here) gets them, in order.
    func testStopReadingPausesAndReadingAgainGetsWhatWaited() throws {
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let log = LoggingReader()
            let reader = log.reader()
            connection.read(with: reader)
            try client.sendAll([1])
            try harness.wait(for: "the first byte") { log.bytes(of: connection) == [1] }
            connection.stopReading()
            try harness.onLoop {}  // the stop has reached the loop
            try client.sendAll([2, 3])
            // Two loop turns with the bytes waiting in the socket: nothing is read.
            try harness.onLoop {}
            try harness.onLoop {}
            XCTAssertEqual(log.log, [.next(ObjectIdentifier(connection), [1])], "a stopped reader was told more")
            connection.read(with: reader)
            try harness.wait(for: "the waiting bytes") { log.bytes(of: connection) == [1, 2, 3] }
            // Stopping leaves the connection free for a `bytes` subscriber.
            connection.stopReading()
            let bytes = try harness.record(connection.bytes, label: "bytes after the shared reader")
            try client.sendAll([4])
            XCTAssertEqual(try waitForBytes(bytes, 1), [4])
            XCTAssertEqual(log.bytes(of: connection), [1, 2, 3])
            connection.reset()
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// The end reaches a shared reader as it reaches a subscriber: the peer's reset fails it with
    /// `ECONNRESET`; on a connection that has already ended, `read(with:)` is answered at once
    /// (after `reset()` here: completed); `close()` here completes it.
    func testTheReaderIsToldResetsClosesAndEndsBeforeIt() throws {
        try checked { harness in
            let (clients, connection) = try acceptThreeClients(harness)
            defer { for client in clients { client.close() } }
            let log = LoggingReader()
            let reader = log.reader()
            let resetByPeer = try connection(clients[0])
            let resetHere = try connection(clients[1])
            let closedHere = try connection(clients[2])
            resetByPeer.read(with: reader)
            closedHere.read(with: reader)
            clients[0].reset()
            try harness.wait(for: "the reset told") { log.end(of: resetByPeer) != nil }
            XCTAssertEqual(log.end(of: resetByPeer), .failed(ObjectIdentifier(resetByPeer), "ECONNRESET"))

            try harness.onLoop { resetHere.reset() }
            try harness.onLoop { resetHere.read(with: reader) }
            XCTAssertEqual(log.end(of: resetHere), .completed(ObjectIdentifier(resetHere)), "a reader of an ended connection was not told at once")

            let closed = try harness.record(closedHere.close(), label: "close")
            XCTAssertTrue(try closed.waitForTermination().isCompleted)
            XCTAssertEqual(log.end(of: closedHere), .completed(ObjectIdentifier(closedHere)))
            XCTAssertEqual(log.log.count, 3, "an end was told twice: \(log.log)")
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// A loop's shutdown fails a connection's shared reader with `EventLoopError.shutDown`, and
    /// `read(with:)` called from another thread after the shutdown gets the same error on that thread.
    func testTheLoopsShutdownFailsTheReaderAndLaterReads() throws {
        let loop = EventLoop(name: "stream-reader-shutdown")
        let server = Locked<EventRecorder<TCPServer.Event>?>(nil)
        loop.execute { server.withLock { $0 = EventRecorder(TCPServer.serve(host: "127.0.0.1", port: 0)) } }
        waitUntil("the server") { server.current?.values.isEmpty == false }
        guard case .listening(let address)? = server.current?.values.first else { return XCTFail("no listening event") }
        let client = try BlockingClient(port: address.port)
        defer { client.close() }
        waitUntil("the connection") { (server.current?.values.count ?? 0) >= 2 }
        guard case .accepted(let connection)? = server.current?.values[1] else { return XCTFail("no accepted connection") }
        let log = LoggingReader()
        let reader = log.reader()
        connection.read(with: reader)  // from this thread: hopped to the loop
        try client.sendAll([9])
        waitUntil("the reader read") { log.bytes(of: connection) == [9] }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(log.end(of: connection), .failed(ObjectIdentifier(connection), "\(EventLoopError.shutDown(loop: loop.name))"))
        connection.read(with: reader)
        XCTAssertEqual(log.log.count, 3, "a read after the shutdown was not refused on the calling thread: \(log.log)")
        XCTAssertEqual(log.log.last, .failed(ObjectIdentifier(connection), "\(EventLoopError.shutDown(loop: loop.name))"))
    }

    /// A server with three blocking clients connected, and the connection each was accepted as
    /// (matched by port: the accepted order need not be the clients' order). The caller closes the clients.
    private func acceptThreeClients(
        _ harness: LoopHarness
    ) throws -> ([BlockingClient], (BlockingClient) throws -> TCPConnection) {
        let (server, port) = try startServer(harness)
        let clients = try (0..<3).map { _ in try BlockingClient(port: port, receiveTimeout: .seconds(60)) }
        let connections = try waitForAccepted(server, 3)
        return (clients, { client in try XCTUnwrap(connections.first { $0.peerAddress?.port == client.localPort }) })
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
