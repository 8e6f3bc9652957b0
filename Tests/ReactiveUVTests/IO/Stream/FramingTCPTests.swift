import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The framing operators on a real TCP connection: chunks as the socket reads them.
final class FramingTCPTests: XCTestCase {
    /// A client sends lines cut in awkward places, each piece read on its own (the next is sent
    /// once the server has read the previous one): the server gets whole lines, a CRLF split
    /// across two reads included, and the last line without LF when the client half-closes.
    func testAServerGetsWholeLinesFromAClientSendingAwkwardChunks() throws {
        let pieces = ["hel", "lo\r", "\nwor", "ld\n\nsecond", " line\r\n", "é", "\n€ last"]
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let bytesRead = Locked(0), reads = Locked(0)
            let lines = try harness.record(connection.bytes
                .doNext { chunk in
                    bytesRead.withLock { $0 += chunk.count }
                    reads.withLock { $0 += 1 }
                }
                .utf8Lines(maxLength: 64), label: "lines")
            var sent = 0
            for piece in pieces {
                try client.sendAll(Array(piece.utf8))
                sent += piece.utf8.count
                try harness.wait(for: "the server to read \(sent) bytes") { bytesRead.current == sent }
            }
            XCTAssertEqual(reads.current, pieces.count, "each piece was a read of its own")
            // The byte count is taken before the splitter runs, in the same loop callback: a round
            // trip through the loop lets that callback finish delivering its lines.
            _ = try harness.onLoop {}
            XCTAssertEqual(lines.values, ["hello", "world", "", "second line", "é"], "whole lines before the client's EOF")
            client.shutdownWrite()
            XCTAssertTrue(try lines.waitForTermination().isCompleted)
            XCTAssertEqual(lines.values, ["hello", "world", "", "second line", "é", "€ last"], "the last line comes with the EOF")
            connection.close()
        }
    }

    /// A client that sends a line longer than the limit: the lines before it arrive, then
    /// `lineTooLong` before the client ever sends a newline; the reading stops (the bytes
    /// signal is disposed) and the connection can be closed as usual.
    func testALineOverTheLimitFromAPeerEndsTheLinesWithLineTooLong() throws {
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let lines = try harness.record(connection.bytes.lines(maxLength: 1_000), label: "lines")
            try client.sendAll(Array("short\n".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 1_000))
            _ = try lines.waitForValues(1)
            try client.sendAll([UInt8](repeating: UInt8(ascii: "x"), count: 100_000))  // and never a newline
            let terminal = try lines.waitForTermination()
            XCTAssertEqual(terminal.error as? FramingError, .lineTooLong(limit: 1_000), "\(terminal)")
            XCTAssertEqual(lines.values, [Array("short".utf8)])
            connection.close()
            XCTAssertEqual(try client.receiveUntilEOF(), [], "the server closed the connection")
        }
    }

    /// Length-prefixed frames both ways: the client writes frames built with `LengthPrefix.frame`
    /// in one burst, the server decodes them whatever the reads.
    func testFramesSentInOneBurstAreDecoded() throws {
        let payloads = (0..<200).map { bytePattern($0 * 37 % 3_000, seed: $0 + 1) }
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let frames = try harness.record(connection.bytes.frames(lengthPrefix: .uint16BigEndian), label: "frames")
            try client.sendAll(payloads.flatMap { try LengthPrefix.uint16BigEndian.frame($0) })
            client.shutdownWrite()
            XCTAssertTrue(try frames.waitForTermination().isCompleted)
            XCTAssertEqual(frames.values, payloads)
            connection.close()
        }
    }

    /// `lines()` keeps the connection's flow control: a task iterating the lines through a
    /// `.bounded(16)` buffer pauses the socket. One 64 KiB read is 819 lines, so a pipeline that
    /// hid the pause (a child subscription between the socket and `values`) would end the
    /// sequence with `SignalValuesError.bufferOverflow` at the first read.
    func testATaskIteratingLinesPausesTheConnectionInsteadOfOverflowing() async throws {
        let block = (0..<819).flatMap { index in Array((String(index % 10) + String(repeating: "x", count: 78) + "\n").utf8) }
        let blocks = 32
        let serverLoop = EventLoop(name: "lines-server"), clientLoop = EventLoop(name: "lines-client")
        let port = Locked(0)
        let server = TCPServer.serve(port: 0, on: serverLoop).subscribeNext { event in
            switch event {
            case .listening(let address):
                port.withLock { $0 = address.port }
            case .accepted(let connection):
                for _ in 0..<blocks { connection.send(block) }
                connection.close()
            case .refused, .draining:
                break
            }
        }
        let deadline = SchedulerInstant.now + .seconds(10)
        while port.current == 0 && SchedulerInstant.now < deadline { await Task.yield() }
        XCTAssertGreaterThan(port.current, 0, "the server did not start listening")

        var lines = 0
        for try await connection in TCP.connect(host: "127.0.0.1", port: port.current, on: clientLoop).values {
            for try await line in connection.bytes.lines().values(bufferingPolicy: .bounded(16)) {
                XCTAssertEqual(line.count, 79)
                lines += 1
            }
            break
        }
        XCTAssertEqual(lines, 819 * blocks)
        server.dispose()
        try await clientLoop.shutdownGracefully()
        try await serverLoop.shutdownGracefully()
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
