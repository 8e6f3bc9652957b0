import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// What an accepted connection leaves until it is needed: its addresses are read when asked, its
/// labels composed when needed, and a `close()` with nothing left to send closes at once.
final class TCPConnectionCostTests: XCTestCase {
    /// Both addresses, asked on the loop and on another thread, name the two ends and stay the same.
    func testAddressesAreReadWhenAskedAndKept() throws {
        try checked { harness in
            let (_, port, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let onLoop = try harness.onLoop { (connection.localAddress, connection.peerAddress) }
            XCTAssertEqual(onLoop.0?.port, port)
            XCTAssertEqual(onLoop.1?.port, client.localPort)
            XCTAssertEqual(onLoop.1?.host, "127.0.0.1")
            XCTAssertEqual(connection.peerAddress, onLoop.1, "read again off the loop: the kept answer")
            XCTAssertEqual(connection.localAddress, onLoop.0)
            XCTAssertEqual(connection.description, "tcp 127.0.0.1:\(port) -> 127.0.0.1:\(client.localPort)")
            connection.reset()
        }
    }

    /// Nothing is read at accept: an address first asked after the connection closed is nil (the
    /// documented answer; the socket is gone), and the description says "?" for it.
    func testAnAddressFirstAskedAfterTheConnectionClosedIsNil() throws {
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            try harness.onLoop { connection.reset() }
            XCTAssertFalse(connection.isOpen)
            XCTAssertNil(connection.peerAddress, "read at accept, not when asked")
            XCTAssertNil(connection.localAddress)
            XCTAssertEqual(connection.description, "tcp ? -> ?")
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// A peer that reset the connection: the `ECONNRESET` names it by address, and the address,
    /// first asked after that end, is still the peer's (read while composing the error, by
    /// `SO_PEERNAME`, which answers after a reset where `getpeername` fails with `ENOTCONN`).
    func testAPeerThatResetIsNamedByTheErrorAndByItsAddressAfterTheEnd() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port)
            let clientPort = client.localPort
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "server bytes")
            client.reset()
            let error = try XCTUnwrap(bytes.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ECONNRESET")
            XCTAssertTrue("\(error)".contains("127.0.0.1:\(clientPort)"), "the error does not name the peer: \(error)")
            XCTAssertFalse(connection.isOpen)
            XCTAssertEqual(connection.peerAddress?.port, clientPort)
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// The labels are composed when asked, and still name the peer's address: in a leak report
    /// (`openHandles`) with the listener that accepted it, and in a second reader's `EBUSY`.
    func testLabelsStillNameTheAddressAndTheListener() throws {
        try checked { harness in
            let (_, port, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let peer = "127.0.0.1:\(client.localPort)"
            let labels = try harness.loop.openHandles().compactMap(\.label)
            XCTAssertTrue(labels.contains("tcp connection with \(peer) accepted by TCPServer.listen(127.0.0.1:\(port))"),
                          "\(labels)")
            let first = try harness.record(connection.bytes, label: "first reader")
            let second = try harness.record(connection.bytes, label: "second reader")
            let busy = try XCTUnwrap(second.waitForTermination().error as? UVError)
            XCTAssertEqual(busy.name, "EBUSY")
            XCTAssertTrue("\(busy)".contains("TCPConnection.bytes of \(peer)"), "\(busy)")
            XCTAssertNil(first.terminal)
            connection.reset()
        }
    }

    /// After the peer's EOF, with every write flushed, `close()` closes at once (no `uv_shutdown`
    /// and loop turn first): the connection is closed and the close's signal complete when the
    /// call returns on the loop, the write's completion came before it, and the peer reads every
    /// byte, then EOF (not a reset).
    func testCloseAfterThePeersEOFWithNothingQueuedClosesAtOnceAndThePeerReadsEverything() throws {
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(allowHalfOpen: true))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60))
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "server bytes")
            try client.sendAll(Array("question".utf8))
            client.shutdownWrite()
            XCTAssertTrue(try bytes.waitForTermination().isCompleted)
            let answer = bytePattern(100_000, seed: 7)
            let order = Locked<[String]>([])
            let written = try harness.record(connection.write(answer).on(completed: { order.withLock { $0.append("write") } }),
                                             label: "answer")
            XCTAssertTrue(try written.waitForTermination().isCompleted)
            let (openAfter, closedAtOnce) = try harness.onLoop { () -> (Bool, Bool) in
                let closed = Locked(false)
                _ = connection.close().subscribe(completed: {
                    order.withLock { $0.append("close") }
                    closed.withLock { $0 = true }
                })
                return (connection.isOpen, closed.current)
            }
            XCTAssertFalse(openAfter, "close() went through uv_shutdown (a loop turn) although nothing was queued")
            XCTAssertTrue(closedAtOnce)
            XCTAssertEqual(order.current, ["write", "close"])
            XCTAssertEqual(try client.receiveUntilEOF(), answer, "every byte, then EOF")
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// `send(_:)` tries the write at once (`uv_try_write`) and queues what the kernel did not take:
    /// a send far larger than the socket's buffer, to a client not reading yet, is taken in part
    /// and the rest queued from where the kernel stopped, and a send after it follows it: the
    /// client reads every byte in order, then the trailer, then EOF.
    func testASendLargerThanTheSocketBufferIsTakenInPartAndTheRestQueuedInOrder() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60))
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let payload = bytePattern(16 << 20, seed: 11)
            let trailer = Array("the end".utf8)
            let queued = try harness.onLoop { () -> Int in
                connection.send(payload)
                let queued = connection.queuedWriteByteCount
                connection.send(trailer)
                connection.close()
                return queued
            }
            XCTAssertGreaterThan(queued, 0, "the kernel took all of 16 MiB: the test no longer makes a partial write")
            XCTAssertLessThan(queued, payload.count, "nothing was written at once")
            let received = try client.receiveUntilEOF()
            XCTAssertEqual(received.count, payload.count + trailer.count)
            XCTAssertTrue(received == payload + trailer, "the bytes arrived out of order or changed")
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
