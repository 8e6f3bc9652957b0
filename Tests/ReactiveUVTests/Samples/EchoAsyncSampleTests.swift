import Foundation
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
        let payload = pattern(1 << 20, seed: 3)
        let echoed = Locked<Result<[UInt8], any Error>?>(nil)
        Thread {
            let result = Result<[UInt8], any Error> { try bulk.receive(exactly: payload.count) }
            echoed.withLock { $0 = result }
        }.start()
        try small.sendAll(pattern(100, seed: 4))
        try bulk.sendAll(payload)
        XCTAssertEqual(try small.receive(exactly: 100), pattern(100, seed: 4))
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
