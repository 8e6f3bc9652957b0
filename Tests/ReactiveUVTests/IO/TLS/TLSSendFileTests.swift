import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `sendFile` on a TLS connection: the file is read in chunks on the pool, sealed and queued on the
/// loop, bounded by the connection's write queue (`SealedFileSend`).
final class TLSSendFileTests: TLSTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = NSTemporaryDirectory() + "reactiveuv-tls-sendfile-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
        try super.tearDownWithError()
    }

    /// A Python `ssl` client: connects to 127.0.0.1:port trusting the CA, writes every plaintext
    /// byte it reads to a file until close_notify or EOF, prints "RECEIVED n".
    /// Arguments: port, CA file, output path.
    private let pythonReceiver = """
    import socket, ssl, sys
    port, ca, out = sys.argv[1:4]
    context = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", int(port)))
    connection = context.wrap_socket(raw, server_hostname="localhost")
    total = 0
    with open(out, "wb") as sink:
        while True:
            try:
                data = connection.recv(65536)
            except ssl.SSLError as error:
                print("READ-FAILED", error, flush=True)
                break
            if not data:
                break
            sink.write(data)
            total += len(data)
    print("RECEIVED", total, flush=True)
    """

    /// Our TLS server sends a 5 MiB file and closes; Python's `ssl` reads the plaintext byte for byte,
    /// then our close_notify (the close waited behind the file).
    func testOurServerSendsAFileToAPythonClientByteExact() throws {
        let path = directory + "/five.bin"
        let contents = bytePattern(5 << 20, seed: 21)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        let output = directory + "/received.bin"
        withHarness { harness in
            let server = try harness.record(TCPServer.serve(host: "127.0.0.1", port: 0, tls: certificates.server(), on: harness.loop), label: "tls server")
            guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
            let client = try startPython(pythonReceiver, ["\(address.port)", certificates.caCertificate, output])
            let connection = try waitForAccepted(server, 1)[0]
            let file = try open(harness, path)
            let readsBefore = SealedFileSend.readsStarted.load(ordering: .relaxed)
            let sent = try harness.record(harness.onLoop {
                let sent = connection.sendFile(file)
                connection.close()
                return sent
            })
            XCTAssertEqual(try sent.waitForValues(1, timeout: .seconds(120)), [contents.count])
            let finished = client.finish()
            XCTAssertTrue(finished.text.contains("RECEIVED \(contents.count)"), finished.text)
            XCTAssertFalse(finished.text.contains("READ-FAILED"), finished.text)
            XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(contents), "the plaintext is the file")
            let reads = SealedFileSend.readsStarted.load(ordering: .relaxed) - readsBefore
            XCTAssertGreaterThanOrEqual(reads, contents.count / SealedFileSend.chunkSize, "read in chunks, not at once")
            XCTAssertTrue(try harness.record(file.close()).waitForTermination().isCompleted)
        }
    }

    /// Our TLS client sends a range of a file between two writes to our TLS echo server, then shuts
    /// down (behind the file); the echo is the head, the range and the tail, in order. A count past
    /// the end of the file sends what there is and says how much.
    func testOurClientSendsARangeInOrderWithItsWritesToOurServer() throws {
        let path = directory + "/range.bin"
        let contents = bytePattern(3 << 20, seed: 22)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        withHarness { harness in
            let (_, port, failures) = try startTLSEchoServer(harness, tls: certificates.server(), options: TCPOptions(allowHalfOpen: true))
            // The client writes megabytes before it reads the echo: its reading must not pause for its queue.
            let options = TCPOptions(limits: StreamBufferLimits(pausesReading: false))
            let connect = try harness.record(TCP.connect(host: "localhost", port: port, tls: certificates.client(), options: options, on: harness.loop))
            let connection = try connect.waitForValues(1)[0]
            let bytes = try harness.record(connection.bytes)
            let file = try open(harness, path)
            let head = Array("head".utf8), tail = Array("tail".utf8)
            let (range, short, written, shutdown) = try harness.onLoop {
                connection.send(head)
                let range = connection.sendFile(file, offset: 1_000, count: contents.count - 3_000)
                let short = connection.sendFile(file, offset: contents.count - 500, count: 100_000)
                let written = connection.write(tail)
                return (range, short, written, connection.shutdown())
            }
            XCTAssertTrue(try bytes.waitForTermination(timeout: .seconds(120)).isCompleted, "\(bytes.events.last.map { "\($0)" } ?? "")")
            let expected = head + contents[1_000..<(contents.count - 2_000)] + contents[(contents.count - 500)...] + tail
            XCTAssertEqual(received(bytes).count, expected.count)
            XCTAssertTrue(received(bytes) == expected, "the head, the range, the file's last 500 bytes, the tail")
            XCTAssertEqual(try harness.record(range).waitForValues(1), [contents.count - 3_000])
            XCTAssertEqual(try harness.record(short).waitForValues(1), [500], "a file shorter than asked sends what it has")
            XCTAssertTrue(try harness.record(written).waitForTermination().isCompleted)
            XCTAssertNil(try harness.record(shutdown).waitForTermination().error)
            XCTAssertTrue(failures.current.isEmpty, "\(failures.current)")
            connection.close()
            XCTAssertTrue(try harness.record(file.close()).waitForTermination().isCompleted)
        }
    }

    /// A client that does not read holds the file back, not memory: the transfer stops reading the
    /// file once the write queue is past its low-water mark, with the queue at most one sealed chunk
    /// above it. When the client reads, every byte arrives.
    func testAClientThatDoesNotReadHoldsTheFileBackAndThenGetsItAll() throws {
        let path = directory + "/held.bin"
        let contents = bytePattern(16 << 20, seed: 23)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        withHarness { harness in
            let limits = StreamBufferLimits(highWaterMark: 256 << 10, lowWaterMark: 64 << 10)
            let (server, connection, client) = try connectedPair(harness, serverOptions: TCPOptions(limits: limits))
            _ = server
            let file = try open(harness, path)
            let readsBefore = SealedFileSend.readsStarted.load(ordering: .relaxed)
            let sent = try harness.record(connection.sendFile(file))
            // Nobody reads on the client (its reading starts with a reader): the kernel's buffers fill, then
            // bytes wait in the queue. Its cost (a write counts until libuv calls it back) is what holds reads.
            try harness.wait(for: "bytes to wait in the queue") { connection.queuedWriteByteCount > 0 }
            let cost = try harness.onLoop { connection.queuedWriteCost }
            // Sealing adds a record header and tag per 16 KiB record; each write counts its overhead.
            XCTAssertLessThanOrEqual(cost, limits.lowWaterMark + SealedFileSend.chunkSize + 2_048, "one sealed chunk past the low-water mark")
            let reads = SealedFileSend.readsStarted.load(ordering: .relaxed) - readsBefore
            XCTAssertLessThan(reads * SealedFileSend.chunkSize, contents.count, "the file was not read ahead of the peer")
            XCTAssertTrue(sent.events.isEmpty, "still sending")
            let bytes = try harness.record(client.bytes)
            let got = try waitForBytes(bytes, contents.count, timeout: .seconds(120))
            XCTAssertTrue(got == contents, "every byte, in order")
            XCTAssertEqual(try sent.waitForValues(1), [contents.count])
            client.close()
            XCTAssertTrue(try harness.record(file.close()).waitForTermination().isCompleted)
        }
    }

    /// The peer resets mid-file: the transfer fails with the socket's error, the connection ends, the
    /// file stays open (it is the caller's) and nothing is left (the harness checks). A connection
    /// closed here mid-file fails its transfer with ECANCELED; a file closed mid-file with EBADF.
    func testAResetACloseOrAClosedFileMidTransferEndItWithANamedError() throws {
        let path = directory + "/reset.bin"
        let contents = bytePattern(16 << 20, seed: 24)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        withHarness { harness in
            let (server, connection, client) = try connectedPair(harness)
            let file = try open(harness, path)
            let sent = try harness.record(connection.sendFile(file))
            let bytes = try harness.record(client.bytes)
            try waitForBytes(bytes, 100_000)
            client.reset()
            let error = try XCTUnwrap(try sent.waitForTermination(timeout: .seconds(120)).error as? UVError, "\(sent.events)")
            XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(error.name), error.description)
            try harness.wait(for: "the connection to close") { !connection.isOpen }
            XCTAssertFalse(file.isClosed, "the file stays open: it is the caller's")

            // Closed here while the file waits for the peer: ECANCELED.
            let (_, second, secondClient) = try connectedPair(harness, server: server)
            let cancelled = try harness.record(second.sendFile(file))
            try harness.wait(for: "the queue to fill") { second.queuedWriteByteCount > 0 }
            second.reset()
            XCTAssertEqual((try cancelled.waitForTermination().error as? UVError)?.name, "ECANCELED")
            secondClient.close()

            // The file closed while it waits for the peer: EBADF, the connection goes on.
            let (_, third, thirdClient) = try connectedPair(harness, server: server)
            let closedFile = try harness.record(third.sendFile(file))
            try harness.wait(for: "the queue to fill") { third.queuedWriteByteCount > 0 }
            XCTAssertTrue(try harness.record(file.close()).waitForTermination().isCompleted)
            let thirdBytes = try harness.record(thirdClient.bytes)
            let closedError = try XCTUnwrap(try closedFile.waitForTermination(timeout: .seconds(120)).error as? UVError)
            XCTAssertEqual(closedError.name, "EBADF")
            XCTAssertTrue(closedError.message.contains("close()"), closedError.description)
            XCTAssertTrue(try harness.onLoop { third.isOpen }, "a failed read leaves the connection open")
            thirdClient.close()
            _ = try thirdBytes.waitForTermination()
            third.close()
        }
    }

    /// A /proc file says its size is 0: without a count it is `EINVAL` as on a plain connection; with
    /// one it is read and sealed like any file (no `sendfile(2)` to refuse it). The connection goes on.
    func testAProcFileIsEINVALWithoutACountAndSentWithOne() throws {
        withHarness { harness in
            let (_, connection, client) = try connectedPair(harness)
            let bytes = try harness.record(client.bytes)
            let proc = try open(harness, "/proc/self/status")
            let whole = try harness.record(connection.sendFile(proc))
            let wholeError = try XCTUnwrap(try whole.waitForTermination().error as? UVError, "\(whole.events)")
            XCTAssertEqual(wholeError.name, "EINVAL")
            XCTAssertTrue(wholeError.message.contains("says its size is 0 but holds bytes"), wholeError.description)
            let counted = try harness.record(connection.sendFile(proc, count: 10))
            XCTAssertEqual(try counted.waitForValues(1), [10])
            connection.send(Array("!".utf8))
            let got = try waitForBytes(bytes, 11)
            XCTAssertEqual(Array(got.prefix(5)), Array("Name:".utf8), "the first bytes of the /proc file, then the send")
            XCTAssertEqual(got.last, UInt8(ascii: "!"))
            connection.close()
            client.close()
            XCTAssertTrue(try harness.record(proc.close()).waitForTermination().isCompleted)
        }
    }

    // MARK: - helpers

    /// Our TLS server's connection and our TLS client's, connected (a server is started unless given).
    private func connectedPair(_ harness: LoopHarness, server given: EventRecorder<TCPServer.Event>? = nil, serverOptions: TCPOptions = TCPOptions())
        throws -> (EventRecorder<TCPServer.Event>, TCPConnection, TCPConnection) {
        let server = try given ?? harness.record(TCPServer.serve(host: "127.0.0.1", port: 0, options: serverOptions, tls: certificates.server(),
                                                                   on: harness.loop), label: "tls server")
        guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
        let before = accepted(server).count
        let connect = try harness.record(TCP.connect(host: "localhost", port: address.port, tls: certificates.client(), on: harness.loop))
        let client = try connect.waitForValues(1)[0]
        let connection = try waitForAccepted(server, before + 1)[before]
        return (server, connection, client)
    }

    private func open(_ harness: LoopHarness, _ path: String) throws -> OpenFile {
        try XCTUnwrap(try harness.record(Files.open(path, on: harness.loop)).waitForValues(1).first)
    }
}
