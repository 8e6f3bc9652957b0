import Foundation
import ReactiveUVTesting
import XCTest

/// Runs the built `echo-async` executable (the async/await echo server) as a user would.
final class EchoAsyncSampleTests: XCTestCase {
    func testEchoesClientsAndExitsZeroOnCtrlC() throws {
        let sample = try SampleProcess("echo-async", ["--port", "0"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "listening on 127.0.0.1:")
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
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT: closing every connection"), sample.standardOutput)
        XCTAssertEqual(try silent.receiveUntilEOF(), [], "the silent client's connection was closed")
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
        for arguments in [[], ["--port", "http"], ["--bogus"]] {
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
