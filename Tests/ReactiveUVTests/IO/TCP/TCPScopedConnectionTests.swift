import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `TCP.withConnection`: the connection is open while the body runs, closed (gracefully, or by reset when the body throws) after.
final class TCPScopedConnectionTests: XCTestCase {
    private struct BodyFailed: Error, Equatable {}

    /// A harness whose loop carries both ends; `finish()` checks nothing is left open.
    private func withHarness(_ test: (LoopHarness) async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async throws {
        await withFinishedHarness(named: "scoped-tcp", test, file: file, line: line)
    }

    /// The first connection the server recorder accepts, with its `bytes` recorded on the loop.
    private func acceptedBytes(_ harness: LoopHarness, _ server: EventRecorder<TCPServer.Event>) throws -> EventRecorder<[UInt8]> {
        try server.wait(for: "a connection") { events in events.contains { if case .accepted? = $0.value { true } else { false } } }
        return try harness.record(accepted(server)[0].bytes, label: "server side")
    }

    func testTheBodyTalksOnAnOpenConnectionThatIsClosedAfterAndThePeerSeesEOF() async throws {
        try await withHarness { harness in
            let echo = try harness.record(EchoServer.run(port: 0), label: "echo")
            let listening = try echo.waitForValues(1)[0]
            guard case .listening(let address) = listening else { throw TestFailure("first event \(listening)") }

            var openInside = false
            var kept: TCPConnection?
            let answer = try await TCP.withConnection(host: "127.0.0.1", port: address.port, on: harness.loop) { connection in
                kept = connection
                openInside = connection.isOpen
                connection.send([1, 2, 3])
                var answer: [UInt8] = []
                for try await chunk in connection.bytes.values {
                    answer += chunk
                    if answer.count >= 3 { break }
                }
                return answer
            }

            XCTAssertEqual(answer, [1, 2, 3], "the body wrote and read the echo")
            XCTAssertTrue(openInside, "the connection is open inside the body")
            XCTAssertEqual(kept?.isOpen, false, "closed once withConnection returned")
            // The echo server sees our FIN (EOF) and ends the session without an error.
            try echo.wait(for: "the client to go away") { events in
                events.contains { if case .disconnected(_, 3, nil, _)? = $0.value { true } else { false } }
            }
        }
    }

    func testWhatTheBodyQueuedIsFlushedBeforeItReturns() async throws {
        try await withHarness { harness in
            let (server, port) = try startServer(harness)
            let payload = bytePattern(4 << 20, seed: 7)
            var kept: TCPConnection?
            var serverRecorder: EventRecorder<[UInt8]>?
            try await TCP.withConnection(host: "127.0.0.1", port: port, on: harness.loop) { connection in
                kept = connection
                serverRecorder = try acceptedBytes(harness, server)  // the server reads as the bytes come
                connection.send(payload)  // no wait: far more than the socket buffers take at once
            }
            XCTAssertEqual(kept?.isOpen, false)
            XCTAssertEqual(kept?.queuedWriteByteCount, 0, "nothing was left queued")
            let serverSide = try XCTUnwrap(serverRecorder)
            XCTAssertNil(try serverSide.waitForTermination().error, "the server reads to a clean EOF")
            XCTAssertEqual(received(serverSide).count, payload.count, "every queued byte arrived before FIN")
            XCTAssertEqual(received(serverSide), payload)
        }
    }

    func testAThrowingBodyResetsTheConnectionAndRethrows() async throws {
        try await withHarness { harness in
            let (server, port) = try startServer(harness)
            var kept: TCPConnection?
            do {
                try await TCP.withConnection(host: "127.0.0.1", port: port, on: harness.loop) { connection in
                    kept = connection
                    throw BodyFailed()
                }
                XCTFail("withConnection returned")
            } catch let error as BodyFailed {
                XCTAssertEqual(error, BodyFailed(), "the body's own error is rethrown")
            }
            XCTAssertEqual(kept?.isOpen, false, "closed before the error was rethrown")
            let serverSide = try acceptedBytes(harness, server)
            XCTAssertEqual(try serverSide.waitForTermination().error as? UVError, UVError.connectionReset,
                           "the peer sees a reset, not a FIN that would make a failed exchange look complete")
        }
    }

    func testAFlushThatFailsIsThrownInsteadOfTheResult() async throws {
        try await withHarness { harness in
            let (server, port) = try startServer(harness)
            do {
                _ = try await TCP.withConnection(host: "127.0.0.1", port: port, on: harness.loop) { connection in
                    try server.wait(for: "a connection") { events in events.contains { if case .accepted? = $0.value { true } else { false } } }
                    // More than the kernel's buffers hold, to a peer that reads nothing and then resets.
                    connection.send(bytePattern(32 << 20, seed: 3))
                    accepted(server)[0].reset()
                    return "answer"
                }
                XCTFail("withConnection returned although its bytes never reached the peer")
            } catch let error as UVError {
                XCTAssertTrue(error == .connectionReset || error == .brokenPipe, "the flush's error: \(error)")
            }
        }
    }

    func testTheBodyMayCloseTheConnectionItself() async throws {
        try await withHarness { harness in
            let (_, port) = try startServer(harness)
            let value = try await TCP.withConnection(host: "127.0.0.1", port: port, on: harness.loop) { connection in
                connection.reset()
                return 42
            }
            XCTAssertEqual(value, 42, "a connection the body closed is not an error")
        }
    }

    func testConnectingWhereNothingListensThrowsConnectionRefused() async throws {
        try await withHarness { harness in
            let port = try unusedPort()
            var bodyRan = false
            do {
                try await TCP.withConnection(host: "127.0.0.1", port: port, on: harness.loop) { _ in bodyRan = true }
                XCTFail("withConnection returned")
            } catch UVError.connectionRefused {
                // expected
            }
            XCTAssertFalse(bodyRan)
        }
    }

    func testCloseCompletesOnlyOnceTheConnectionIsClosed() throws {
        LoopHarness.run { harness in
            let (_, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port), label: "client")
            let connection = try client.waitForValues(1)[0]
            let openAtCompletion = Locked<Bool?>(nil)
            try harness.onLoop {
                connection.send([1, 2, 3])
                // Subscribed on the loop thread: the completion is delivered inside the close itself.
                _ = connection.close().subscribe(completed: { openAtCompletion.withLock { $0 = connection.isOpen } })
            }
            try harness.wait(for: "the close to complete") { openAtCompletion.current != nil }
            XCTAssertEqual(openAtCompletion.current, false, "a waiter of close() finds the connection closed")
        }
    }
}
