import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `StreamConnection.sendFile`: a file sent by `sendfile(2)` in order with the connection's writes.
final class SendFileTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-sendfile-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// 64 MiB to a client that reads slowly through a small receive buffer: the socket fills again and again
    /// (the transfer waits for writability on the loop), the bytes arrive intact, and the server loop's
    /// timer keeps firing meanwhile.
    func testSixtyFourMiBToASlowReaderArriveIntactWhileTheLoopRunsTimers() throws {
        let path = directory + "/big.bin"
        let contents = bytePattern(64 << 20, seed: 9)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let file = try open(harness, path)
            let ticks = try harness.record(Signal<Int>.interval(.milliseconds(2)))
            let callsBefore = FileSendOperation.callsStarted.load(ordering: .relaxed)
            let sent = try harness.record(connection.sendFile(file))
            var count = 0, reads = 0, intact = true
            while count < contents.count {
                guard let chunk = client.receive(upTo: 16_384), !chunk.isEmpty, count + chunk.count <= contents.count else { break }
                // Compared piece by piece with what the file holds (memcmp: a byte loop is slow in debug builds).
                intact = intact && chunk.withUnsafeBytes { got in
                    contents.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress! + count, got.count) == 0 }
                }
                count += chunk.count
                reads += 1
                if reads % 64 == 0 { usleep(1_000) }  // a slow reader: the server's socket stays full
            }
            XCTAssertEqual(count, contents.count)
            XCTAssertTrue(intact, "the bytes arrived intact")
            XCTAssertEqual(try sent.waitForValues(1, timeout: .seconds(60)), [contents.count])
            XCTAssertGreaterThanOrEqual(ticks.values.count, 10, "the loop ran its timer during the transfer")
            // Each call after a full socket waits for writability, which needs the reader to have read: a
            // transfer that retried at once (a spin) would make many calls per read of the client.
            let calls = FileSendOperation.callsStarted.load(ordering: .relaxed) - callsBefore
            XCTAssertLessThanOrEqual(calls * 4, reads, "\(calls) sendfile calls for \(reads) reads")
            XCTAssertGreaterThan(calls, 1, "the socket filled up: the transfer waited for writability")
        }
    }

    /// Bytes sent before the file go first, bytes sent after it wait behind it, and a close() after it
    /// sends EOF only after all of them.
    func testSendsBeforeAndAfterTheFileKeepTheirOrder() throws {
        let path = directory + "/middle.bin"
        let contents = bytePattern(3 << 20, seed: 10)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let file = try open(harness, path)
            let head = bytePattern(16 << 20, seed: 11), tail = Array("tail".utf8)
            let results = try harness.onLoop {
                connection.send(head)  // still in libuv's queue when the file is asked for: the client reads slowly
                let sent = connection.sendFile(file, offset: 100, count: contents.count - 200)
                connection.send(tail)
                let written = connection.write(tail)
                let closed = connection.close()
                return (sent, written, closed)
            }
            let received = try client.receiveUntilEOF()
            XCTAssertEqual(received.count, head.count + contents.count - 200 + 2 * tail.count)
            XCTAssertTrue(received == head + contents[100..<(contents.count - 100)] + tail + tail, "head, the file's range, the tails, then EOF")
            XCTAssertEqual(try results.0.first(timeout: .seconds(10)), contents.count - 200)
            try results.1.waitUntilCompleted(timeout: .seconds(10))
            try results.2.waitUntilCompleted(timeout: .seconds(10))
        }
    }

    /// A Unix connection takes a file too: 8 MiB through a socket pair, read on the other end, with a send behind it.
    func testAUnixConnectionSendsAFileInOrder() throws {
        let path = directory + "/unix.bin"
        let contents = bytePattern(8 << 20, seed: 14)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let (near, far) = try UnixSocket.pair()
            let sender = try XCTUnwrap(try harness.record(UnixSocket.open(near)).waitForValues(1).first)
            let receiver = try XCTUnwrap(try harness.record(UnixSocket.open(far)).waitForValues(1).first)
            let reader = try harness.record(receiver.bytes)
            let file = try open(harness, path)
            let sent = try harness.onLoop {
                let sent = sender.sendFile(file)
                sender.send([1, 2, 3])
                sender.close()
                return sent
            }
            XCTAssertEqual(try sent.first(timeout: .seconds(30)), contents.count)
            XCTAssertTrue(try reader.waitForTermination(timeout: .seconds(30)).isCompleted)
            XCTAssertTrue(received(reader) == contents + [1, 2, 3])
        }
    }

    /// Bytes waiting behind a file count against `maxQueuedBytes`: past it a write fails with ENOBUFS (the
    /// connection stays open), and what was accepted still follows the file.
    func testWritesHeldBehindAFileCountAgainstTheQueueLimit() throws {
        let path = directory + "/limit.bin"
        let contents = bytePattern(8 << 20, seed: 15)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let limits = StreamBufferLimits(highWaterMark: 64 << 10, lowWaterMark: 16 << 10, maxQueuedBytes: 256 << 10)
            let (server, port) = try startServer(harness, options: TCPOptions(limits: limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(30), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let file = try open(harness, path)
            let first = bytePattern(200 << 10, seed: 16)
            let (sent, accepted, refused) = try harness.onLoop {
                (connection.sendFile(file), connection.write(first), connection.write(bytePattern(100 << 10, seed: 17)))
            }
            do {
                try refused.waitUntilCompleted(timeout: .seconds(10))
                XCTFail("a write past the limit behind a file was accepted")
            } catch let error as UVError {
                XCTAssertEqual(error.name, "ENOBUFS")
                XCTAssertTrue(error.message.contains("behind a file"), error.description)
            }
            let received = try client.receive(exactly: contents.count + first.count)
            XCTAssertTrue(received == contents + first, "the file, then the write that was accepted")
            XCTAssertEqual(try sent.first(timeout: .seconds(30)), contents.count)
            try accepted.waitUntilCompleted(timeout: .seconds(30))
            XCTAssertTrue(try harness.onLoop { connection.isOpen }, "a refused write leaves the connection open")
        }
    }

    /// A million 40-byte writes behind a file a client does not read yet (a broadcast to a stalled
    /// peer while it downloads): the held writes count their cost, payload plus the per-write
    /// overhead, as queued writes do, so the live heap grows by less than the 8 MiB limit and the
    /// writes past it fail with ENOBUFS; `writable` goes false past the high-water mark and true
    /// again once the client has read the file and what was held behind it. Counting payload alone
    /// let 8 MiB / 40 writes be held, 24 MiB of heap, and `writable` never went false.
    func testSmallWritesHeldBehindAFileCountTheirCostAndWritableTellsTheSender() throws {
        let path = directory + "/download.bin"
        let contents = bytePattern(16 << 20, seed: 21)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let limits = StreamBufferLimits(highWaterMark: 1 << 20, lowWaterMark: 256 << 10, maxQueuedBytes: 8 << 20)
            let (server, port) = try startServer(harness, options: TCPOptions(limits: limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let writable = try harness.record(connection.writable, label: "writable")
            XCTAssertEqual(try writable.waitForValues(1), [true])
            let file = try open(harness, path)
            let refused = Locked(0)
            let sends = 1_000_000
            let (sent, growth) = try harness.onLoop(timeout: .seconds(120)) { () -> (Signal<Int>, Double) in
                let sent = connection.sendFile(file)
                let before = liveHeapMegabytes()
                for index in 0..<sends {
                    connection.send([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40)) { error in
                        if (error as? UVError)?.name == "ENOBUFS" { refused.withLock { $0 += 1 } }
                    }
                }
                return (sent, liveHeapMegabytes() - before)
            }
            XCTAssertLessThan(growth, 8, "the heap grew by \(growth) MiB for writes held behind a file, limited to 8 MiB")
            let accepted = sends - refused.current
            XCTAssertGreaterThan(refused.current, sends / 2, "writes past the limit were not refused")
            XCTAssertEqual(try writable.waitForValues(2), [true, false], "the held writes passed the high-water mark")

            let received = try client.receive(exactly: contents.count + accepted * 40)
            XCTAssertTrue(received.prefix(contents.count) == contents[...], "the file came first, intact")
            XCTAssertEqual(try sent.first(timeout: .seconds(30)), contents.count)
            XCTAssertEqual(try writable.waitForValues(3), [true, false, true], "writable again once all was taken")
            connection.close()
        }
    }

    /// A /proc file (size 0, full of bytes) sent whole is `EINVAL` saying so, not sent as nothing with
    /// a success of 0; sent with a count, `sendfile` refuses it and the `EINVAL` says why, as a file
    /// opened for writing only is `EBADF` saying so.
    /// The connection goes on: a write after it arrives. An empty regular file is still sent as the
    /// nothing it holds.
    func testAProcFileIsEINVALSayingSoAndAnEmptyFileIsSentAsNothing() throws {
        let empty = directory + "/empty"
        XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let proc = try open(harness, "/proc/self/status")
            let whole = try harness.record(connection.sendFile(proc))
            let wholeError = try XCTUnwrap(try whole.waitForTermination().error as? UVError, "\(whole.events)")
            XCTAssertEqual(wholeError.name, "EINVAL")
            XCTAssertTrue(wholeError.message.contains("says its size is 0 but holds bytes"), wholeError.description)
            let counted = try harness.record(connection.sendFile(proc, count: 100))
            let countedError = try XCTUnwrap(try counted.waitForTermination().error as? UVError, "\(counted.events)")
            XCTAssertEqual(countedError.name, "EINVAL")
            XCTAssertTrue(countedError.message.contains("sendfile(2) cannot read this file"), countedError.description)
            XCTAssertEqual(try harness.record(connection.sendFile(try open(harness, empty))).waitForValues(1), [0])
            let writeOnly = try XCTUnwrap(try harness.record(Files.open(empty, mode: .write)).waitForValues(1).first)
            let unreadable = try harness.record(connection.sendFile(writeOnly, count: 1))
            let unreadableError = try XCTUnwrap(try unreadable.waitForTermination().error as? UVError, "\(unreadable.events)")
            XCTAssertEqual(unreadableError.name, "EBADF")
            XCTAssertTrue(unreadableError.message.contains("opened for writing only"), unreadableError.description)

            XCTAssertTrue(try harness.record(connection.write([1, 2, 3])).waitForTermination().isCompleted)
            XCTAssertEqual(try client.receive(exactly: 3), [1, 2, 3], "nothing of the refused files, then the write")
            connection.close()
        }
    }

    /// A connection passed over an IPC channel after a file (`send(_:with:)`) waits behind the file too:
    /// the receiver gets every byte of the file, then the message that carries the connection.
    func testAConnectionPassedAfterAFileFollowsIt() throws {
        let path = directory + "/ipc.bin"
        let contents = bytePattern(4 << 20, seed: 18)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let ipc = UnixSocketOptions(ipc: true)
            let (near, far) = try UnixSocket.pair()
            let sender = try XCTUnwrap(try harness.record(UnixSocket.open(near, options: ipc)).waitForValues(1).first)
            let receiver = try XCTUnwrap(try harness.record(UnixSocket.open(far, options: ipc)).waitForValues(1).first)
            let incoming = try harness.record(receiver.incoming)
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let passing = try waitForAccepted(server, 1)[0]
            let file = try open(harness, path)
            let (sent, passed) = try harness.onLoop { (sender.sendFile(file), sender.send(passing, with: [42])) }
            XCTAssertEqual(try sent.first(timeout: .seconds(30)), contents.count)
            try passed.waitUntilCompleted(timeout: .seconds(30))
            try incoming.wait(for: "the passed connection") { events in
                events.contains { if case .next(.tcp) = $0 { return true } else { return $0.isTerminating } }
            }
            var bytes: [UInt8] = []
            var order: [String] = []
            for value in incoming.values {
                switch value {
                case .bytes(let chunk): bytes += chunk; if order.last != "bytes" { order.append("bytes") }
                case .tcp: order.append("connection")
                case .unix: order.append("unix")
                }
            }
            XCTAssertTrue(bytes == contents + [42], "the file, then the message that carries the connection")
            XCTAssertEqual(order.last, "connection")
        }
    }

    /// A peer that resets mid-file ends the transfer with the socket's error, and the connection with it.
    func testAPeerThatResetsMidFileEndsTheSignalWithTheError() throws {
        let path = directory + "/reset.bin"
        try Data(bytePattern(64 << 20, seed: 12)).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, beforeConnect: BlockingClient.shrinkBuffers)
            let connection = try waitForAccepted(server, 1)[0]
            let reader = try harness.record(connection.bytes)
            let file = try open(harness, path)
            let sent = try harness.record(connection.sendFile(file))
            _ = try client.receive(exactly: 10_000)
            client.reset()
            let error = try XCTUnwrap(try sent.waitForTermination(timeout: .seconds(30)).error as? UVError, "\(sent.events)")
            XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(error.name), error.description)
            // The reader ends too: with ECONNRESET, or at EOF when the transfer's call took the socket's error first.
            XCTAssertNotNil(try reader.waitForTermination())
            try harness.wait(for: "the connection to close") { !connection.isOpen }
            XCTAssertFalse(file.isClosed, "the file stays open: it is the caller's")
        }
    }

    /// Disposing the server (which closes its connections) mid-file stops the transfer: it fails with
    /// ECANCELED, the client sees the end before the whole file, and no poll handle or descriptor is left.
    func testDisposingTheConnectionMidFileStopsIt() throws {
        let path = directory + "/disposed.bin"
        let size = 64 << 20
        try Data(bytePattern(size, seed: 13)).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let (server, port) = try startServer(harness)
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(20), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let file = try open(harness, path)
            let sent = try harness.record(connection.sendFile(file))
            _ = try client.receive(exactly: 10_000)
            server.dispose()
            let error = try XCTUnwrap(try sent.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ECANCELED")
            let (rest, end) = client.receiveUntilEnd()
            XCTAssertTrue(end.endedByPeer, "\(end)")
            XCTAssertLessThan(10_000 + rest.count, size, "the transfer stopped before the end of the file")
        }
    }

    func testBadArgumentsAreEINVALAndAClosedFileIsEBADF() throws {
        let path = directory + "/small.bin"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let file = try open(harness, path)
            for (offset, count) in [(-1, 1), (0, -1)] {
                XCTAssertEqual(try failureName(harness.record(connection.sendFile(file, offset: offset, count: count))), "EINVAL")
            }
            let other = EventLoop(name: "elsewhere")
            defer { other.shutdown() }
            // `first` ends its subscription, so this file is closed already; it is refused for its loop first.
            let foreign = try XCTUnwrap(try Files.open(path, on: other).first(timeout: .seconds(10)))
            XCTAssertEqual(try failureName(harness.record(connection.sendFile(foreign))), "EINVAL")
            XCTAssertTrue(try harness.record(file.close()).waitForTermination().isCompleted)
            XCTAssertEqual(try failureName(harness.record(connection.sendFile(file))), "EBADF")
            // The connection still works, in order, after the refusals.
            connection.send([7])
            XCTAssertEqual(client.receive(upTo: 10), [7])
        }
    }

    /// The files guide's sendfile example is the code between the markers (compiled, not run: it names a system path;
    /// what it does is tested above and in `OpenFileAsyncTests`).
    func testTheFilesGuideSendFileExampleIsThisCode() throws {
        try assertDocumentBlock("docs/guides/files.md", containing: "FileSystem.sendFile(file, to: connection)", matches: "GUIDE-FILES-SENDFILE")
        _ = Self.sendFileGuideExample  // referenced so the compiler keeps checking it
    }

    private static func sendFileGuideExample(_ connection: TCPConnection) async throws -> Int {
        // GUIDE-FILES-SENDFILE-BEGIN
        let sent = try await FileSystem.withOpenFile("/srv/static/video.mp4", on: connection.loop) { file in
            try await FileSystem.sendFile(file, to: connection)
        }
        // GUIDE-FILES-SENDFILE-END
        return sent
    }

    // MARK: - helpers

    private func open(_ harness: LoopHarness, _ path: String) throws -> OpenFile {
        try XCTUnwrap(try harness.record(Files.open(path)).waitForValues(1).first)
    }

    private func failureName<Value>(_ recorder: EventRecorder<Value>) throws -> String? {
        (try recorder.waitForTermination().error as? UVError)?.name
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(timeout: .seconds(60), body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
