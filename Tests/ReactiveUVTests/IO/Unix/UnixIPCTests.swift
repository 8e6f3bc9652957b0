import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Descriptor passing over IPC Unix connections: a listener on one loop hands TCP connections to another loop.
final class UnixIPCTests: XCTestCase {
    private let ipc = UnixSocketOptions(ipc: true)

    /// A TCP connection accepted on loop A is passed over a socket pair to loop B, which echoes every byte;
    /// A's copy closes, so the client's EOF reaches B and B's close reaches the client.
    func testAConnectionPassedToAnotherLoopEchoesEveryByteAndClosesThere() throws {
        try twoLoops { listener, worker in
            let (listenerEnd, workerEnd) = try UnixSocket.pair()
            let channelA = try listener.record(UnixSocket.open(listenerEnd, options: ipc), label: "channel A").waitForValues(1)[0]
            let channelB = try worker.record(UnixSocket.open(workerEnd, options: ipc), label: "channel B").waitForValues(1)[0]
            XCTAssertTrue(channelA.isIPC)
            let incoming = try worker.record(channelB.incoming, label: "incoming")

            let (server, port) = try startServer(listener)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let accepted = try waitForAccepted(server, 1)[0]
            let handedOver = try listener.record(channelA.send(accepted, with: [7]), label: "send")
            XCTAssertTrue(try handedOver.waitForTermination().isCompleted, "\(handedOver.events)")
            try listener.wait(for: "the listener's copy to close") { !accepted.isOpen }

            let passed = try waitForPassedTCP(incoming)
            XCTAssertTrue(passed.loop === worker.loop, "the passed connection lives on the receiving loop")
            XCTAssertEqual(passed.peerAddress?.port, client.localPort)
            guard case .bytes(let message)? = incoming.values.first else { return XCTFail("\(incoming.values)") }
            XCTAssertEqual(message, [7], "the message came before the connection passed with it")

            let echoed = try worker.record(passed.bytes.map { chunk in
                passed.send(chunk)
                return chunk
            }, label: "echo")
            // 32 rounds of 8 KiB, each read back before the next (a blocked writer never waits on a full reader).
            for round in 0..<32 {
                let payload = bytePattern(8 * 1024, seed: round)
                try client.sendAll(payload)
                XCTAssertEqual(try client.receive(exactly: payload.count), payload, "round \(round): every byte echoed by the other loop")
            }
            client.shutdownWrite()
            XCTAssertTrue(try echoed.waitForTermination().isCompleted, "the client's EOF reached loop B: A's copy was closed")
            passed.close()
            XCTAssertEqual(try client.receiveUntilEOF(), [], "B's close reached the client")
        }
    }

    /// Passing over a connection opened without `ipc`, an empty message, and `incoming` there: clear EINVALs; the connection stays open.
    func testPassingOverANonIPCConnectionIsEINVALAndKeepsTheConnection() throws {
        try twoLoops { listener, worker in
            let (plainA, plainB) = try UnixSocket.pair()
            let channelA = try listener.record(UnixSocket.open(plainA), label: "plain A").waitForValues(1)[0]
            let channelB = try worker.record(UnixSocket.open(plainB), label: "plain B").waitForValues(1)[0]
            XCTAssertFalse(channelA.isIPC)
            let (server, port) = try startServer(listener)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let accepted = try waitForAccepted(server, 1)[0]

            let refused = try listener.record(channelA.send(accepted, with: [1]), label: "send")
            let error = try XCTUnwrap(refused.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("IPC"), error.message)
            XCTAssertTrue(accepted.isOpen, "a refused pass closed the connection")

            let incoming = try worker.record(channelB.incoming, label: "incoming")
            let incomingError = try XCTUnwrap(incoming.waitForTermination().error as? UVError)
            XCTAssertEqual(incomingError.name, "EINVAL")
            XCTAssertTrue(incomingError.message.contains("IPC"), incomingError.message)

            let (ipcA, ipcB) = try UnixSocket.pair()
            let channelIPC = try listener.record(UnixSocket.open(ipcA, options: ipc), label: "ipc A").waitForValues(1)[0]
            _ = try worker.record(UnixSocket.open(ipcB, options: ipc), label: "ipc B").waitForValues(1)
            let empty = try listener.record(channelIPC.send(accepted, with: []), label: "empty message")
            let emptyError = try XCTUnwrap(empty.waitForTermination().error as? UVError)
            XCTAssertEqual(emptyError.name, "EINVAL")
            XCTAssertTrue(emptyError.message.contains("empty"), emptyError.message)
            XCTAssertTrue(accepted.isOpen)
            try client.sendAll([1, 2, 3])
            let bytes = try listener.record(accepted.bytes, label: "still served here")
            XCTAssertEqual(try waitForBytes(bytes, 3), [1, 2, 3])

            let reopened = try listener.record(UnixSocket.open(ipcA), label: "the same end again")
            _ = try reopened.waitForTermination()
            XCTAssertEqual(errorName(reopened), "EBADF")
        }
    }

    /// The receiver's end releases what was passed: disposing `incoming` closes the connection it sent, and
    /// closing the channel releases the one still in flight (each client reads EOF; the harnesses see no handle left).
    func testTheReceiversEndReleasesReceivedAndPendingConnections() throws {
        try twoLoops { listener, worker in
            let (listenerEnd, workerEnd) = try UnixSocket.pair()
            let channelA = try listener.record(UnixSocket.open(listenerEnd, options: ipc), label: "channel A").waitForValues(1)[0]
            let channelB = try worker.record(UnixSocket.open(workerEnd, options: ipc), label: "channel B")
            let receiving = try channelB.waitForValues(1)[0]
            let (server, port) = try startServer(listener)
            let first = try BlockingClient(port: port)
            defer { first.close() }
            let second = try BlockingClient(port: port)
            defer { second.close() }
            let connections = try waitForAccepted(server, 2)
            for (index, connection) in connections.enumerated() {
                let sent = try listener.record(channelA.send(connection, with: [UInt8(index)]), label: "send \(index)")
                XCTAssertTrue(try sent.waitForTermination().isCompleted, "\(sent.events)")
            }

            let firstOnly = try worker.record(receiving.incoming.filter { incoming in
                if case .tcp = incoming { return true } else { return false }
            }.take(1), label: "first passed connection")
            XCTAssertTrue(try firstOnly.waitForTermination().isCompleted)
            XCTAssertEqual(try first.receiveUntilEOF(), [], "the connection sent was closed with the subscription")
            XCTAssertTrue(receiving.isOpen)

            receiving.reset()
            XCTAssertEqual(try second.receiveUntilEOF(), [], "the descriptor still in flight was released with the channel")
        }
    }

    /// A descriptor arriving at a `bytes` reader ends it with EPROTO; it stays queued, and `incoming` then gets it.
    func testADescriptorAtABytesReaderIsEPROTOAndWaitsForIncoming() throws {
        try twoLoops { listener, worker in
            let (listenerEnd, workerEnd) = try UnixSocket.pair()
            let channelA = try listener.record(UnixSocket.open(listenerEnd, options: ipc), label: "channel A").waitForValues(1)[0]
            let channelB = try worker.record(UnixSocket.open(workerEnd, options: ipc), label: "channel B").waitForValues(1)[0]
            let plainReader = try worker.record(channelB.bytes, label: "bytes")
            let (server, port) = try startServer(listener)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let accepted = try waitForAccepted(server, 1)[0]
            XCTAssertTrue(try listener.record(channelA.send(accepted, with: [9, 9])).waitForTermination().isCompleted)

            let error = try XCTUnwrap(plainReader.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EPROTO")
            XCTAssertTrue(error.message.contains("incoming"), error.message)
            XCTAssertEqual(received(plainReader), [9, 9], "the bytes before the descriptor were delivered")
            XCTAssertTrue(channelB.isOpen, "the channel stays open")

            let incoming = try worker.record(channelB.incoming, label: "incoming")
            let passed = try waitForPassedTCP(incoming)
            try client.sendAll([4, 2])
            let bytes = try worker.record(passed.bytes, label: "passed bytes")
            XCTAssertEqual(try waitForBytes(bytes, 2), [4, 2])
        }
    }

    /// A peer passing a descriptor that is not a stream socket (a pipe's end): `incoming` fails with ENOTSUP and it is closed.
    func testAPassedDescriptorThatIsNotAStreamSocketIsENOTSUPAndClosed() throws {
        try twoLoops { _, worker in
            let (rawEnd, workerEnd) = try UnixSocket.pair()
            let raw = try XCTUnwrap(rawEnd.takeDescriptor())
            defer { close(raw) }
            let channel = try worker.record(UnixSocket.open(workerEnd, options: ipc), label: "channel").waitForValues(1)[0]
            let incoming = try worker.record(channel.incoming, label: "incoming")
            var ends: [Int32] = [-1, -1]
            XCTAssertEqual(pipe(&ends), 0)
            defer { close(ends[0]) }
            XCTAssertEqual(ruv_test_send_descriptor(raw, ends[1], 5), 1)
            close(ends[1])  // only the copy in flight keeps the write end open now

            let error = try XCTUnwrap(incoming.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENOTSUP")
            XCTAssertTrue(error.message.contains("pipe"), error.message)
            guard case .bytes([5])? = incoming.values.first else { return XCTFail("\(incoming.values)") }
            var byte: UInt8 = 0
            XCTAssertEqual(read(ends[0], &byte, 1), 0, "the passed write end was closed: its reader sees EOF")
        }
    }

    /// Descriptors libuv has no handle name for (a Unix datagram socket, a directory) and listening
    /// sockets (a server's, TCP or Unix): `incoming` fails with ENOTSUP naming what came, and closes it.
    /// libuv names no handle type for the first (`uv_handle_type_name` gives NULL); a listening socket
    /// would arrive as a connection whose `bytes` never says a word.
    func testPassedDescriptorsThatAreNoConnectionAreENOTSUPNamingWhatCame() throws {
        try twoLoops { _, worker in
            let listeningTCP = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listeningTCP, $0, length) == 0 && getsockname(listeningTCP, $0, &length) == 0 }
            }
            XCTAssertTrue(bound)
            XCTAssertEqual(listen(listeningTCP, 8), 0)
            let port = Int(UInt16(bigEndian: address.sin_port))
            let listeningUnix = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var unixAddress = sockaddr_un()
            unixAddress.sun_family = sa_family_t(AF_UNIX)  // no path: autobind to an abstract name
            XCTAssertEqual(withUnsafePointer(to: &unixAddress) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listeningUnix, $0, socklen_t(MemoryLayout<sa_family_t>.size)) }
            }, 0)
            XCTAssertEqual(listen(listeningUnix, 8), 0)
            let passed: [(descriptor: Int32, kind: String)] = [
                (socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0), "Unix datagram socket"),
                (open(NSTemporaryDirectory(), O_RDONLY | O_DIRECTORY), "directory"),
                (listeningTCP, "listening IPv4 stream socket"),
                (listeningUnix, "listening Unix stream socket"),
            ]
            for (descriptor, kind) in passed {
                XCTAssertGreaterThanOrEqual(descriptor, 0, kind)
                let (rawEnd, workerEnd) = try UnixSocket.pair()
                let raw = try XCTUnwrap(rawEnd.takeDescriptor())
                defer { close(raw) }
                let channel = try worker.record(UnixSocket.open(workerEnd, options: ipc), label: "channel").waitForValues(1)[0]
                let incoming = try worker.record(channel.incoming, label: "incoming of a \(kind)")
                XCTAssertEqual(ruv_test_send_descriptor(raw, descriptor, 5), 1, kind)
                close(descriptor)  // only the copy in flight is left

                let error = try XCTUnwrap(incoming.waitForTermination().error as? UVError, kind)
                XCTAssertEqual(error.name, "ENOTSUP", kind)
                XCTAssertTrue(error.message.contains("passed a \(kind) descriptor"), error.message)
                XCTAssertEqual(incoming.values.count, 1, "only the message's byte came: \(incoming.values)")
                channel.close()
            }
            // The listening socket's one copy was closed by the receiver: nobody listens on its port now.
            XCTAssertThrowsError(try BlockingClient(port: port), "the passed listening socket was left open")
        }
    }

    /// `open(descriptor:)` checks the descriptor: not a socket is ENOTSOCK, a TCP socket EINVAL; both are left open.
    func testOpeningADescriptorThatIsNotAUnixStreamSocketIsRefusedAndLeftOpen() throws {
        try twoLoops { _, worker in
            var ends: [Int32] = [-1, -1]
            XCTAssertEqual(pipe(&ends), 0)
            defer { close(ends[0]); close(ends[1]) }
            let notSocket = try worker.record(UnixSocket.open(descriptor: ends[0]), label: "pipe end")
            _ = try notSocket.waitForTermination()
            XCTAssertEqual(errorName(notSocket), "ENOTSOCK")
            let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(tcp) }
            let tcpOpen = try worker.record(UnixSocket.open(descriptor: tcp), label: "tcp socket")
            _ = try tcpOpen.waitForTermination()
            XCTAssertEqual(errorName(tcpOpen), "EINVAL")
            XCTAssertNotEqual(fcntl(ends[0], F_GETFD), -1, "the refused descriptor was closed")
            XCTAssertNotEqual(fcntl(tcp, F_GETFD), -1, "the refused descriptor was closed")
        }
    }

    /// The Unix-socket guide's hand-over example, run: a client of the listener's loop is echoed by the worker's loop.
    func testTheUnixGuideHandOverExampleServesTheClientOnTheWorkerLoop() throws {
        try assertDocumentBlock("docs/guides/unix-sockets.md", containing: "UnixSocket.pair()", matches: "GUIDE-UNIX-IPC")
        try twoLoops { listenerHarness, workerHarness in
            let listenerLoop = listenerHarness.loop
            let workerLoop = workerHarness.loop
            let port = try unusedPort()
            let servedOn = Locked<[Bool]>([])
            @Sendable func serve(_ connection: TCPConnection) {
                servedOn.append(connection.loop === workerLoop)
                _ = connection.bytes.subscribeNext { connection.send($0) }
            }
            // GUIDE-UNIX-IPC-BEGIN
            let (listenerEnd, workerEnd) = try UnixSocket.pair()
            // The worker's loop serves whatever is passed to it.
            let worker = UnixSocket.open(workerEnd, options: UnixSocketOptions(ipc: true), on: workerLoop)
                .flatMap { channel in channel.incoming }
                .subscribeNext { incoming in
                    if case .tcp(let connection) = incoming { serve(connection) }
                }
            // The listener's loop accepts clients and hands each one over (the server on the same loop).
            let listener = UnixSocket.open(listenerEnd, options: UnixSocketOptions(ipc: true), on: listenerLoop)
                .flatMap { channel in
                    TCPServer.listen(port: port, on: listenerLoop).flatMap { client in channel.send(client, with: [1]) }
                }
                .subscribeError { print("hand-over failed:", $0) }
            // GUIDE-UNIX-IPC-END
            let client = try connectWhenListening(port: port, harness: listenerHarness)
            defer { client.close() }
            try client.sendAll(Array("ping".utf8))
            XCTAssertEqual(try client.receive(exactly: 4), Array("ping".utf8))
            XCTAssertEqual(servedOn.withLock { $0 }, [true], "served once, with the connection on the worker's loop")
            // Disposed from the test thread: the disposal reaches each loop through the subscriptions' home loop.
            listener.dispose()
            worker.dispose()
            for harness in [listenerHarness, workerHarness] {
                try harness.wait(for: "the example's handles to close") { (try? harness.loop.openHandles().count) == 0 }
            }
        }
    }

    // MARK: - helpers

    /// Connects to `port` once a server listens there (the listen is queued to the loop).
    private func connectWhenListening(port: Int, harness: LoopHarness) throws -> BlockingClient {
        var client: BlockingClient?
        try harness.wait(for: "the server to listen on \(port)") {
            client = try? BlockingClient(port: port)
            return client != nil
        }
        return client!
    }

    /// Runs `body` with two harness loops (a listener's and a worker's) and checks both are left clean.
    private func twoLoops(_ body: (LoopHarness, LoopHarness) throws -> Void) throws {
        let listener = LoopHarness(name: "listener")
        let worker = LoopHarness(name: "worker")
        do {
            try body(listener, worker)
        } catch {
            XCTFail("\(error)")
        }
        let workerReport = worker.finish()
        let listenerReport = listener.finish()
        XCTAssertTrue(workerReport.isClean, "worker: \(workerReport.problems)")
        XCTAssertTrue(listenerReport.isClean, "listener: \(listenerReport.problems)")
    }

    private func waitForPassedTCP(_ incoming: EventRecorder<UnixConnection.Incoming>) throws -> TCPConnection {
        try incoming.wait(for: "a passed TCP connection") { events in
            events.contains { if case .next(.tcp) = $0 { return true } else { return $0.isTerminating } }
        }
        for value in incoming.values {
            if case .tcp(let connection) = value { return connection }
        }
        throw TestFailure("no TCP connection came: \(incoming.events)")
    }
}
