import Foundation
import ReactiveUVTesting
import XCTest

/// Runs the built `echo-async` executable (the async/await echo server) as a user would.
final class EchoAsyncSampleTests: XCTestCase {
    /// Clients on two loops are echoed; the first Ctrl-C drains (the silent client still connected is
    /// waited for), and once it leaves echo-async exits 0.
    func testEchoesClientsOnTwoLoopsAndDrainsOnCtrlC() throws {
        let sample = try SampleProcess("echo-async", ["--port", "0", "--loops", "2"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "listening on 127.0.0.1:")
        sample.waitForOutput(containing: "echo-async: serving on 2 loop(s)")
        let line = sample.standardOutput.split(separator: "\n").first { $0.contains("listening on") } ?? ""
        let port = try XCTUnwrap(line.split(separator: ":").last.flatMap { Int($0) }, "no port in '\(line)'")

        let silent = try BlockingClient(port: port)
        defer { silent.close() }
        sample.waitForOutput(containing: "connected (1 open)")

        // Two clients at once, one of them sending a megabyte: each gets back exactly what it sent.
        let small = try BlockingClient(port: port)
        let bulk = try BlockingClient(port: port)
        let payload = bytePattern(1 << 20, seed: 3)
        let echoed = Locked<Result<[UInt8], any Error>?>(nil)
        Thread {
            let result = Result<[UInt8], any Error> { try bulk.receive(exactly: payload.count) }
            echoed.withLock { $0 = result }
        }.start()
        try small.sendAll(bytePattern(100, seed: 4))
        try bulk.sendAll(payload)
        XCTAssertEqual(try small.receive(exactly: 100), bytePattern(100, seed: 4))
        waitUntil("1 MiB echoed", timeout: .seconds(60)) { echoed.current != nil }
        XCTAssertTrue(try echoed.current?.get() == payload, "the echo differs from what was sent")
        small.close()
        bulk.shutdownWrite()
        XCTAssertEqual(try bulk.receiveUntilEOF(), [])
        bulk.close()
        sample.waitForOutput(containing: "left after \(1 << 20) bytes")

        sample.process.interrupt()  // SIGINT, as Ctrl-C sends
        sample.waitForOutput(containing: "interrupted by SIGINT: draining 1 connection(s) for up to 10.0 seconds (again to force)")
        sample.waitForOutput(containing: "echo-async: no longer accepting; waiting for 1 connection(s) to close")
        XCTAssertThrowsError(try BlockingClient(port: port), "a client connected during the drain")
        XCTAssertTrue(sample.process.isRunning, "echo-async exited with a client still connected")
        silent.shutdownWrite()
        XCTAssertEqual(try silent.receiveUntilEOF(), [], "the silent client's connection was closed after its EOF")
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("echo-async: drained"), sample.standardOutput)
    }

    /// `--unix PATH --loops 2`: clients are echoed on the socket; the first Ctrl-C drains (the file goes,
    /// a new client gets ENOENT, a connected one is still echoed), the second closes the rest, exit 0.
    func testUnixSocketOnTwoLoopsDrainsOnFirstCtrlCAndForcesOnTheSecond() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/echo.sock"
            let sample = try SampleProcess("echo-async", ["--unix", path, "--loops", "2", "--drain-timeout", "60"])
            defer { if sample.process.isRunning { sample.process.terminate() } }
            sample.waitForOutput(containing: "echo-async: listening on unix \(path)")
            sample.waitForOutput(containing: "echo-async: serving on 2 loop(s)")
            var clients: [UnixBlockingClient] = []
            defer { for client in clients { client.close() } }
            for index in 0..<2 {
                let client = try UnixBlockingClient(path: path)
                clients.append(client)
                try client.sendAll(bytePattern(100, seed: index))
                XCTAssertEqual(try client.receive(exactly: 100), bytePattern(100, seed: index))
            }
            sample.waitForOutput(containing: "connected (2 open)")

            sample.process.interrupt()
            sample.waitForOutput(containing: "interrupted by SIGINT: draining 2 connection(s) for up to 60.0 seconds (again to force)")
            sample.waitForOutput(containing: "echo-async: no longer accepting; waiting for 2 connection(s) to close")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the socket file is still there during the drain")
            XCTAssertThrowsError(try UnixBlockingClient(path: path), "a client connected during the drain") { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ENOENT, "\(error)")
            }
            let payload = bytePattern(50_000, seed: 10)
            try clients[0].sendAll(payload)
            XCTAssertTrue(try clients[0].receive(exactly: payload.count) == payload, "the echo during the drain")
            clients[0].shutdownWrite()
            XCTAssertEqual(try clients[0].receiveUntilEOF(), [])
            sample.waitForOutput(containing: "bytes (1 open)")  // a leave line: "connected (1 open)" came first
            XCTAssertTrue(sample.process.isRunning, "echo-async exited with a client still connected")

            sample.process.interrupt()
            XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
            XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT again: resetting 1 connection(s)"), sample.standardOutput)
            XCTAssertTrue(sample.standardOutput.contains("echo-async: drained"), sample.standardOutput)
            XCTAssertTrue(clients[1].receiveUntilEnd().end.endedByPeer, "the client that stayed was closed")
            XCTAssertEqual(sample.standardError, "")
        }
    }

    /// A client that sends 3 MiB and half-closes at once gets all 3 MiB back.
    ///
    /// The client reads all along, but through a small window (1,000-byte
    /// segments, the smallest receive buffer), so the server's echo queues in
    /// its write queue: when the server reads the EOF, part of the echo is
    /// still queued (or not yet taken from `bytes.values` by its task), and the
    /// sample's close must flush it, not drop it. (With the default loopback
    /// buffers the kernel takes 3 MiB at once and nothing is ever queued.)
    func testAClientThatHalfClosesAtOnceGetsEveryByteBack() throws {
        let sample = try SampleProcess("echo-async", ["--port", "0"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "listening on 127.0.0.1:")
        let line = sample.standardOutput.split(separator: "\n").first { $0.contains("listening on") } ?? ""
        let port = try XCTUnwrap(line.split(separator: ":").last.flatMap { Int($0) }, "no port in '\(line)'")

        for round in 0..<3 {
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let payload = bytePattern(3 << 20, seed: 10 + round)
            let echoed = Locked<Result<[UInt8], any Error>?>(nil)
            Thread {
                let result = Result<[UInt8], any Error> { try client.receiveUntilEOF() }
                echoed.withLock { $0 = result }
            }.start()
            try client.sendAll(payload)
            client.shutdownWrite()  // at once, while the echo is still on its way
            waitUntil("the echo of round \(round) to end", timeout: .seconds(120)) { echoed.current != nil }
            let received = try XCTUnwrap(echoed.current).get()
            XCTAssertEqual(received.count, payload.count, "round \(round): bytes echoed before the server's EOF")
            XCTAssertTrue(received == payload, "round \(round): the echo differs from what was sent")
        }
        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput.components(separatedBy: "left after \(3 << 20) bytes").count - 1, 3, sample.standardOutput)
    }

    func testBadArgumentsAndAPortInUse() throws {
        for arguments in [[], ["--port", "http"], ["--bogus"], ["--port", "0", "--unix", "/tmp/x.sock"],
                          ["--port", "0", "--loops", "0"], ["--unix", "/tmp/x.sock", "--loops", "two"],
                          ["--port", "0", "--drain-timeout", "0"], ["--port", "0", "--drain-timeout", "soon"],
                          ["--port", "0", "--max-connections", "0"], ["--port", "0", "--backlog", "0"]] {
            let sample = try SampleProcess("echo-async", arguments)
            XCTAssertEqual(sample.waitForExit(), 2, "\(arguments)")
            waitUntil("usage for \(arguments)") { sample.standardError.contains("usage: echo-async") }
        }
        let first = try SampleProcess("echo-async", ["--port", "0"])
        defer { first.process.interrupt(); first.waitForExit() }
        first.waitForOutput(containing: "listening on 127.0.0.1:")
        let line = first.standardOutput.split(separator: "\n").first { $0.contains("listening on") } ?? ""
        let port = try XCTUnwrap(line.split(separator: ":").last.flatMap { Int($0) })
        let second = try SampleProcess("echo-async", ["--port", "\(port)"])
        XCTAssertEqual(second.waitForExit(), 1)
        XCTAssertTrue(second.standardError.contains("EADDRINUSE"), second.standardError)
    }
}
