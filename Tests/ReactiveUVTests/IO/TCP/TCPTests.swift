import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class TCPTests: XCTestCase {
    /// Connect, write both ways, half-close, reply after EOF, close: each step observed on both ends.
    func testAConversationBothWaysWithHalfCloseAndClose() throws {
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(allowHalfOpen: true))
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port), label: "client")
            let clientConnection = try client.waitForValues(1)[0]
            let serverConnection = try waitForAccepted(server, 1)[0]

            XCTAssertEqual(clientConnection.peerAddress, try SocketAddress(host: "127.0.0.1", port: port))
            XCTAssertEqual(serverConnection.peerAddress, clientConnection.localAddress)
            XCTAssertEqual(serverConnection.localAddress, clientConnection.peerAddress)

            let serverBytes = try harness.record(serverConnection.bytes, label: "server bytes")
            let clientBytes = try harness.record(clientConnection.bytes, label: "client bytes")
            let written = try harness.record(clientConnection.write(Array("hello".utf8)), label: "write")
            XCTAssertTrue(try written.waitForTermination().isCompleted)
            XCTAssertEqual(try waitForBytes(serverBytes, 5), Array("hello".utf8))

            serverConnection.send(Array("world".utf8))  // from the test thread: hopped to the loop
            XCTAssertEqual(try waitForBytes(clientBytes, 5), Array("world".utf8))

            // The client half-closes: the server reads EOF but can still answer.
            XCTAssertTrue(try harness.record(clientConnection.shutdown()).waitForTermination().isCompleted)
            XCTAssertTrue(try serverBytes.waitForTermination().isCompleted)
            XCTAssertTrue(try harness.record(serverConnection.write(Array("bye".utf8))).waitForTermination().isCompleted)
            XCTAssertEqual(try waitForBytes(clientBytes, 8), Array("worldbye".utf8))

            serverConnection.close()
            XCTAssertTrue(try clientBytes.waitForTermination().isCompleted, "the client reads EOF")
            clientConnection.close()
            XCTAssertTrue(try client.waitForTermination().isCompleted, "the connect signal completes when its connection closes")
            XCTAssertFalse(clientConnection.isOpen)
            try harness.wait(for: "only the listener open") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// `close()` is graceful: what was queued before it is flushed, then FIN, then the socket closes.
    ///
    /// The peer reads nothing until after the close, through a small window, so
    /// most of the 3 MiB is still in the connection's write queue when `close()`
    /// is called (asserted). The close's signal completes only after the flush;
    /// a write after the close is refused with `EPIPE`.
    func testCloseFlushesWhatWasQueuedBeforeItThenSendsEOF() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let payload = bytePattern(3 << 20, seed: 21)
            let queuedAtClose = try harness.onLoop { () -> Int in
                connection.send(payload)
                let queued = connection.queuedWriteByteCount
                connection.close()
                return queued
            }
            XCTAssertGreaterThan(queuedAtClose, 1 << 20, "the kernel took most of it at once: the close had little to flush")
            let late = try harness.record(connection.write([1]), label: "write after close")
            XCTAssertEqual((try late.waitForTermination().error as? UVError)?.name, "EPIPE")
            let closed = try harness.record(connection.close(), label: "close")
            XCTAssertNil(closed.terminal, "the close finished while \(queuedAtClose) bytes waited for a peer that does not read")
            XCTAssertTrue(connection.isOpen, "the connection closed before its queue was flushed")

            let received = try client.receiveUntilEOF()
            XCTAssertEqual(received.count, payload.count, "bytes the peer got before EOF")
            XCTAssertTrue(received == payload, "the bytes differ from what was sent")
            XCTAssertTrue(try closed.waitForTermination().isCompleted)
            try harness.wait(for: "the connection closed, only the listener left") {
                (try? harness.loop.openHandles().count) == 1
            }
            XCTAssertFalse(connection.isOpen)
        }
    }

    /// `reset()` during a graceful close drops the queue: the close's signal fails with ECANCELED, the peer sees a reset.
    func testResetDuringAGracefulCloseFailsTheCloseWithECANCELED() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            try harness.onLoop { connection.send(bytePattern(3 << 20, seed: 22)) }
            let closed = try harness.record(connection.close(), label: "close")
            connection.reset()
            let error = try XCTUnwrap(try closed.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ECANCELED")
            XCTAssertTrue(error.message.contains("before the queued bytes were flushed"), error.message)
            XCTAssertThrowsError(try client.receiveUntilEOF(), "the peer reads a reset, not a clean EOF")
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// "localhost" goes through the resolver; its addresses are tried in order until one answers.
    func testConnectResolvesAHostName() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "localhost", port: port))
            let connection = try client.waitForValues(1)[0]
            try waitForAccepted(server, 1)
            XCTAssertEqual(connection.peerAddress?.host, "127.0.0.1")
        }
    }

    func testListeningOnAPortInUseFailsWithEADDRINUSE() throws {
        try checked { harness in
            let (_, port) = try startServer(harness)
            let second = try harness.record(TCPServer.listen(host: "127.0.0.1", port: port))
            let terminal = try second.waitForTermination()
            let error = try XCTUnwrap(terminal.error as? UVError, "\(terminal)")
            XCTAssertEqual(error.name, "EADDRINUSE")
            XCTAssertTrue(error.description.contains("127.0.0.1:\(port)"), error.description)
        }
    }

    func testListeningOnAnAddressThatIsNotLocalFailsWithEADDRNOTAVAIL() throws {
        try checked { harness in
            let server = try harness.record(TCPServer.listen(host: "192.0.2.1", port: 0))
            try server.waitForTermination()
            XCTAssertEqual(errorName(server), "EADDRNOTAVAIL")
        }
    }

    func testBindingAPrivilegedPortWithoutPrivilegeFailsWithEACCES() throws {
        // As root the check runs as `nobody` (root may bind privileged ports).
        try withoutRootPrivileges {
            try checked { harness in
                let server = try harness.record(TCPServer.listen(host: "127.0.0.1", port: 1))
                try server.waitForTermination()
                XCTAssertEqual(errorName(server), "EACCES")
            }
        }
    }

    func testConnectingWhereNothingListensFailsWithECONNREFUSED() throws {
        let port = try unusedPort()
        try checked { harness in
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port))
            let terminal = try client.waitForTermination()
            let error = try XCTUnwrap(terminal.error as? UVError, "\(terminal)")
            XCTAssertEqual(error.name, "ECONNREFUSED")
            XCTAssertTrue(error.description.contains("127.0.0.1:\(port)"), error.description)
            XCTAssertEqual(client.values.count, 0)
        }
    }

    func testAnUnknownHostIsAResolverError() throws {
        try checked { harness in
            let client = try harness.record(TCP.connect(host: "no-such-host.invalid", port: 80))
            let terminal = try client.waitForTermination()
            let error = try XCTUnwrap(terminal.error as? UVError, "\(terminal)")
            XCTAssertTrue(error.name.hasPrefix("EAI_"), "\(error)")
            XCTAssertTrue(error.description.contains("no-such-host.invalid"), error.description)
        }
    }

    func testBadPortsAreRejected() throws {
        try checked { harness in
            for port in [0, -1, 70_000] {
                let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port))
                try client.waitForTermination()
                XCTAssertEqual(errorName(client), "EINVAL", "port \(port)")
            }
            let server = try harness.record(TCPServer.listen(port: 65_536))
            try server.waitForTermination()
            XCTAssertEqual(errorName(server), "EINVAL")
        }
    }

    /// A listener whose accept queue is full drops new SYNs, so the connect hangs until our timeout.
    func testAConnectThatGetsNoAnswerTimesOutWithETIMEDOUT() throws {
        try checked { harness in
            let listener = try BlockingListener(backlog: 0)
            defer { listener.close() }
            var outcome: Event<TCPConnection>?
            for attempt in 0..<8 {
                let client = try harness.record(TCP.connect(host: "127.0.0.1", port: listener.port, timeout: .milliseconds(300)),
                                                label: "client \(attempt)")
                try client.wait(for: "a connection or an error") { !$0.isEmpty }
                if let terminal = client.terminal {
                    outcome = terminal
                    break
                }
            }
            let error = try XCTUnwrap(outcome?.error as? UVError, "every connect succeeded: \(String(describing: outcome))")
            XCTAssertEqual(error.name, "ETIMEDOUT")
            XCTAssertTrue(error.message.contains("no connection after"), error.message)
        }
    }

    /// A client that resets mid-stream: the server's `bytes` fails with ECONNRESET and its connection closes.
    func testAPeerThatResetsMidStreamFailsTheBytesSignal() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port))
            let clientConnection = try client.waitForValues(1)[0]
            let serverConnection = try waitForAccepted(server, 1)[0]
            let serverBytes = try harness.record(serverConnection.bytes)
            clientConnection.send([UInt8](repeating: 7, count: 1000))
            try waitForBytes(serverBytes, 1000)
            clientConnection.reset()
            let terminal = try serverBytes.waitForTermination()
            XCTAssertEqual((terminal.error as? UVError)?.name, "ECONNRESET", "\(terminal)")
            XCTAssertTrue(try client.waitForTermination().isCompleted)
            try harness.wait(for: "both connections closed, the listener left") {
                (try? harness.loop.openHandles().count) == 1
            }
            XCTAssertFalse(serverConnection.isOpen)
            let late = try harness.record(serverConnection.write([1]))
            XCTAssertEqual(try late.waitForTermination().error.flatMap { ($0 as? UVError)?.name }, "EPIPE")
            let reread = try harness.record(serverConnection.bytes)
            XCTAssertEqual((try reread.waitForTermination().error as? UVError)?.name, "ECONNRESET", "the failure is remembered")
        }
    }

    /// Disposing the server's subscription closes the listener and every connection it accepted.
    func testDisposingTheServerClosesEveryAcceptedConnection() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            var clientBytes: [EventRecorder<[UInt8]>] = []
            for index in 0..<3 {
                let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port), label: "client \(index)")
                clientBytes.append(try harness.record(try client.waitForValues(1)[0].bytes, label: "client \(index) bytes"))
            }
            let serverSide = try waitForAccepted(server, 3)
            let serverBytes = try serverSide.map { try harness.record($0.bytes) }
            XCTAssertEqual(try harness.loop.openHandles().count, 7)

            server.dispose()
            for recorder in clientBytes {
                XCTAssertTrue(try recorder.waitForTermination().isCompleted, "the client reads EOF")
            }
            for recorder in serverBytes {
                XCTAssertTrue(try recorder.waitForTermination().isCompleted, "a local close completes the reader")
            }
            // The clients read EOF and, not being half-open (`TCPOptions.allowHalfOpen`), close themselves.
            try harness.wait(for: "every handle closed") { (try? harness.loop.openHandles().isEmpty) == true }
        }
    }

    /// Disposing a connect subscription closes its connection; the peer sees EOF.
    func testDisposingTheConnectSubscriptionClosesTheConnection() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port))
            let connection = try client.waitForValues(1)[0]
            let serverBytes = try harness.record(try waitForAccepted(server, 1)[0].bytes)
            client.dispose()
            XCTAssertTrue(try serverBytes.waitForTermination().isCompleted)
            XCTAssertFalse(connection.isOpen)
        }
    }

    func testASecondReaderIsRefusedWithEBUSYAndAReaderCanBeReplaced() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let connection = try harness.record(TCP.connect(host: "127.0.0.1", port: port)).waitForValues(1)[0]
            let serverConnection = try waitForAccepted(server, 1)[0]
            let first = try harness.record(connection.bytes, label: "first")
            let second = try harness.record(connection.bytes, label: "second")
            try second.waitForTermination()
            XCTAssertEqual(errorName(second), "EBUSY")
            serverConnection.send([1, 2, 3])
            XCTAssertEqual(try waitForBytes(first, 3), [1, 2, 3])
            first.dispose()
            _ = try harness.onLoop {}
            let third = try harness.record(connection.bytes, label: "third")
            serverConnection.send([4, 5])
            XCTAssertEqual(try waitForBytes(third, 2), [4, 5])
            XCTAssertEqual(received(first), [1, 2, 3], "a disposed reader gets nothing more")
        }
    }

    func testOptionsCanBeChangedOnTheLoopOnly() throws {
        try checked { harness in
            let (_, port) = try startServer(harness, options: TCPOptions(noDelay: false, keepAlive: .seconds(30)))
            let connection = try harness.record(TCP.connect(host: "127.0.0.1", port: port)).waitForValues(1)[0]
            XCTAssertThrowsError(try connection.setNoDelay(true)) { error in
                XCTAssertTrue("\(error)".contains("loop thread"), "\(error)")
            }
            let box = UncheckedBox(connection)
            try harness.onLoop {
                try box.value.setNoDelay(true)
                try box.value.setKeepAlive(.seconds(10))
                try box.value.setKeepAlive(nil)
            }
            connection.close()
            try harness.wait(for: "the connection to close") { !connection.isOpen }
            let closedError = try harness.onLoop { () -> String in
                do { try box.value.setNoDelay(true) } catch { return (error as? UVError)?.name ?? "\(error)" }
                return "no error"
            }
            XCTAssertEqual(closedError, "ENOTCONN")
        }
    }

    /// Shutting the loop down with a server, connections and a reader open tells every subscriber and closes everything.
    func testLoopShutdownEndsServersAndConnectionsWithShutDown() throws {
        let loop = EventLoop(name: "tcp-shutdown")
        let server = Locked<EventRecorder<TCPServer.Event>?>(nil)
        loop.execute { server.withLock { $0 = EventRecorder(TCPServer.serve(port: 0)) } }
        waitUntil("the server") { server.current?.values.isEmpty == false }
        guard case .listening(let address)? = server.current?.values.first else { return XCTFail("no listening event") }
        let client = Locked<EventRecorder<TCPConnection>?>(nil)
        loop.execute { client.withLock { $0 = EventRecorder(TCP.connect(host: "127.0.0.1", port: address.port)) } }
        waitUntil("the connection") { client.current?.values.isEmpty == false }
        let bytes = Locked<EventRecorder<[UInt8]>?>(nil)
        let connection = client.current!.values[0]
        loop.execute { bytes.withLock { $0 = EventRecorder(connection.bytes) } }
        waitUntil("the reader") { bytes.current != nil }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(report.closedHandles.count, 3, "\(report.closedHandles)")
        for terminal in [server.current?.terminal?.error, client.current?.terminal?.error, bytes.current?.terminal?.error] {
            XCTAssertEqual(terminal as? EventLoopError, .shutDown(loop: "tcp-shutdown"))
        }
    }

    /// The callback form of write: nil once flushed, on the loop thread; EPIPE once closed.
    func testSendWithACompletionReportsFlushAndFailure() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let connection = try harness.record(TCP.connect(host: "127.0.0.1", port: port)).waitForValues(1)[0]
            let serverBytes = try harness.record(try waitForAccepted(server, 1)[0].bytes)
            let results = Locked<[(String?, String?)]>([])
            let record: @Sendable ((any Error)?) -> Void = { error in
                results.withLock { $0.append(((error as? UVError)?.name, EventLoop.current?.name)) }
            }
            connection.send(bytePattern(200_000, seed: 1), completion: record)  // from the test thread
            try harness.wait(for: "the first completion") { results.current.count == 1 }
            XCTAssertTrue(try waitForBytes(serverBytes, 200_000) == bytePattern(200_000, seed: 1), "bulk reads arrive intact")
            connection.close()
            connection.send([1], completion: record)
            try harness.wait(for: "the second completion") { results.current.count == 2 }
            let outcome = results.current
            XCTAssertEqual(outcome[0].0, nil)
            XCTAssertEqual(outcome[0].1, "harness", "completions run on the connection's loop")
            XCTAssertEqual(outcome[1].0, "EPIPE")
        }
    }

    /// A peer that sends but does not read: the server's unflushed echo stays near the high-water mark
    /// (reading pauses), and once the peer reads, reading resumes and every byte arrives in order.
    func testReadingPausesAboveTheHighWaterMarkAndResumesBelowTheLowOne() throws {
        let limits = TCPBufferLimits(highWaterMark: 256 << 10, lowWaterMark: 64 << 10)
        let total = 16 << 20
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(limits: limits))
            // The client must read the echo for its own 16 MiB to drain: it must not pause (see TCPBufferLimits).
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port,
                                                        options: TCPOptions(limits: TCPBufferLimits(pausesReading: false))))
            let clientConnection = try client.waitForValues(1)[0]
            let serverConnection = try waitForAccepted(server, 1)[0]
            let maxQueued = Locked(0), echoed = Locked(0)
            let echo = try harness.onLoop {
                UncheckedBox(serverConnection.bytes.subscribeNext { chunk in
                    serverConnection.send(chunk)
                    let queued = serverConnection.queuedWriteByteCount
                    maxQueued.withLock { $0 = max($0, queued) }
                    echoed.withLock { $0 += chunk.count }
                })
            }
            let payload = bytePattern(total, seed: 9)
            for start in stride(from: 0, to: total, by: 1 << 20) {
                clientConnection.send(Array(payload[start..<(start + (1 << 20))]))
            }
            try harness.wait(for: "the echo queue to pass the high-water mark") { maxQueued.current > limits.highWaterMark }
            XCTAssertGreaterThan(clientConnection.queuedWriteByteCount, 0, "the sender is held back by flow control")
            XCTAssertLessThan(echoed.current, total, "the server stopped reading before it had everything")

            let clientBytes = try harness.record(clientConnection.bytes)
            let back = try waitForBytes(clientBytes, total, timeout: .seconds(60))
            XCTAssertEqual(back.count, total)
            XCTAssertTrue(back == payload, "the echo differs from what was sent")
            XCTAssertLessThanOrEqual(maxQueued.current, limits.highWaterMark + 65_536,
                                     "the echo queue grew past the high-water mark plus one read chunk")
            echo.value.dispose()
        }
    }

    /// Small reads refill the array of the previous chunk when the reader let go of it: a chunk
    /// the reader keeps never changes, whether the next read has its size or a smaller one.
    func testChunksAReaderKeepsNeverChangeWhenReadBuffersAreRecycled() throws {
        let sizes = [10, 10, 10, 7, 7, 12, 12, 5, 64, 64, 64, 3, 3, 4096, 100, 100, 1, 1, 1, 30]
        let messages = sizes.enumerated().map { bytePattern($0.element, seed: $0.offset + 1) }
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port)).waitForValues(1)[0]
            let serverConnection = try waitForAccepted(server, 1)[0]
            let clientBytes = try harness.record(client.bytes, label: "acks")
            let kept = Locked<[[UInt8]]>([]), received = Locked<[[UInt8]]>([])
            // On the loop: every other chunk is kept, the others are dropped at once (and recycled).
            let reading = try harness.onLoop {
                UncheckedBox(serverConnection.bytes.subscribeNext { chunk in
                    let index = received.withLock { all -> Int in
                        // A real copy (Array(chunk) would share the storage and keep every chunk held).
                        all.append(chunk.withUnsafeBufferPointer { Array($0) })
                        return all.count
                    }
                    if index % 2 == 0 { kept.withLock { $0.append(chunk) } }
                    serverConnection.send([1])
                })
            }
            for (index, message) in messages.enumerated() {
                client.send(message)  // one message in flight: each arrives as a read of its own
                _ = try waitForBytes(clientBytes, index + 1)
            }
            XCTAssertEqual(received.current.reduce([], +), messages.reduce([], +), "the bytes arrived intact, in order")
            if received.current.count == messages.count {
                let expected = stride(from: 1, to: messages.count, by: 2).map { messages[$0] }
                let changed = zip(kept.current, expected).enumerated().filter { $0.element.0 != $0.element.1 }.map { 2 * $0.offset + 1 }
                XCTAssertEqual(kept.current.count, expected.count)
                XCTAssertEqual(changed, [], "kept chunks (by message index) changed after a later read")
            }
            reading.value.dispose()
        }
    }

    /// A write past the queue limit is refused with ENOBUFS; the connection stays usable.
    func testAWritePastTheQueueLimitIsRefusedWithENOBUFS() throws {
        let limits = TCPBufferLimits(highWaterMark: 64 << 10, lowWaterMark: 16 << 10, maxQueuedBytes: 1 << 20)
        try checked { harness in
            let (server, port) = try startServer(harness)
            let connection = try harness.record(TCP.connect(host: "127.0.0.1", port: port, options: TCPOptions(limits: limits)))
                .waitForValues(1)[0]
            try waitForAccepted(server, 1)  // the server never reads: the kernel buffers fill, then our queue
            var refused: EventRecorder<Void>?
            for round in 0..<200 {
                let write = try harness.record(connection.write([UInt8](repeating: 1, count: 512 << 10)), label: "write \(round)")
                if let terminal = write.terminal, terminal.error != nil {
                    refused = write
                    break
                }
            }
            let error = try XCTUnwrap(refused.flatMap { $0.terminal?.error as? UVError }, "no write was refused")
            XCTAssertEqual(error.name, "ENOBUFS")
            XCTAssertTrue(error.message.contains("limit 1048576"), error.message)
            XCTAssertTrue(connection.isOpen, "a refused write() leaves the connection open")
            XCTAssertLessThanOrEqual(connection.queuedWriteByteCount, limits.maxQueuedBytes)
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// A plain listening socket that never accepts: its queue fills and further SYNs go unanswered.
final class BlockingListener {
    let descriptor: Int32
    let port: Int

    init(backlog: Int32) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed: \(errno)") }
        self.descriptor = descriptor
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && listen(descriptor, backlog) == 0
                    && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard ok else {
            Glibc.close(descriptor)
            throw TestFailure("bind/listen failed: \(errno)")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { Glibc.close(descriptor) }
}
