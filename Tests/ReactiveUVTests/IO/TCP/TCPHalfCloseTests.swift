import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The half-close default (`TCPOptions.allowHalfOpen`, false by default): after the peer's EOF a
/// connection closes itself once the application has had its turn and its writes are flushed.
final class TCPHalfCloseTests: XCTestCase {
    /// A server that reads to the end and never calls `close()`: the client's half-close closes it (the client reads EOF).
    func testAServerThatNeverClosesIsClosedAfterTheClientHalfCloses() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60))
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "server bytes")
            try client.sendAll(Array("hello".utf8))
            XCTAssertEqual(try waitForBytes(bytes, 5), Array("hello".utf8))
            client.shutdownWrite()
            XCTAssertTrue(try bytes.waitForTermination().isCompleted)
            XCTAssertEqual(try client.receiveUntilEOF(), [], "the client reads EOF: the server closed its side by itself")
            try harness.wait(for: "the connection closed, only the listener left") { (try? harness.loop.openHandles().count) == 1 }
            XCTAssertFalse(connection.isOpen)
        }
    }

    /// With `allowHalfOpen: true` the connection stays open after the peer's EOF and can still write.
    func testWithAllowHalfOpenTheConnectionStaysWritableAfterThePeersEOF() throws {
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(allowHalfOpen: true))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60))
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "server bytes")
            client.shutdownWrite()
            XCTAssertTrue(try bytes.waitForTermination().isCompleted)
            // A later turn of the loop: an automatic close would have been started by now.
            try harness.onLoop {}
            try harness.onLoop {}
            XCTAssertTrue(connection.isOpen, "the connection closed itself although allowHalfOpen is set")
            let late = try harness.record(connection.write(Array("late answer".utf8)), label: "late write")
            XCTAssertTrue(try late.waitForTermination().isCompleted)
            connection.close()
            XCTAssertEqual(try client.receiveUntilEOF(), Array("late answer".utf8))
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// A task echoing over `bytes.values` and adding a trailer after its loop, without calling
    /// `close()`: the client half-closes at once, and still gets every byte, the trailer, then EOF.
    ///
    /// The close waits for the task to take the end (not for the end to reach the buffer,
    /// which happens while up to 256 KiB of chunks still wait for the task).
    func testAnEchoOverValuesGetsItsTurnBeforeTheAutomaticClose() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let trailer = Array("that was all".utf8)
            let echoed = Locked(0)
            let finished = Locked(false)
            Task(executorPreference: harness.loop) {
                defer { finished.withLock { $0 = true } }
                for try await chunk in connection.bytes.values {
                    connection.send(chunk)
                    echoed.withLock { $0 += chunk.count }
                    await Task.yield()  // a slow consumer: the end waits in the buffer behind chunks
                }
                connection.send(trailer)
            }
            let payload = bytePattern(3 << 20, seed: 31)
            let received = Locked<Result<[UInt8], any Error>?>(nil)
            Thread {
                let result = Result<[UInt8], any Error> { try client.receiveUntilEOF() }
                received.withLock { $0 = result }
            }.start()
            try client.sendAll(payload)
            client.shutdownWrite()
            try harness.wait(for: "the echo to end", timeout: .seconds(120)) { received.current != nil }
            let back = try XCTUnwrap(received.current).get()
            XCTAssertEqual(back.count, payload.count + trailer.count, "bytes before the server's EOF (echoed \(echoed.current))")
            XCTAssertTrue(back == payload + trailer, "the echo and trailer differ from what was sent")
            try harness.wait(for: "the task to end") { finished.current }
            try harness.wait(for: "the connection closed, only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
