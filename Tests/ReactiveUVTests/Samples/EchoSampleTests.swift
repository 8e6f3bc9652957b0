import Foundation
import ReactiveUVTesting
import XCTest

/// Runs the built `echo` executable as a user would.
final class EchoSampleTests: XCTestCase {
    /// Survives a resetting client, a silent one and a megabyte one; Ctrl-C closes everything and exits 0.
    func testServesEveryKindOfClientAndExitsZeroOnCtrlC() throws {
        let sample = try SampleProcess("echo", ["--port", "0"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)

        let silent = try BlockingClient(port: port)
        defer { silent.close() }
        sample.waitForOutput(containing: "connected (1 open)")

        let resetter = try BlockingClient(port: port)
        try resetter.sendAll(bytePattern(500, seed: 1))
        XCTAssertEqual(try resetter.receive(exactly: 500), bytePattern(500, seed: 1))
        resetter.reset()
        sample.waitForOutput(containing: "dropped (ECONNRESET")

        let bulk = try BlockingClient(port: port)
        let payload = bytePattern(4 << 20, seed: 2)
        let echoed = Locked<Result<[UInt8], any Error>?>(nil)
        Thread {
            let result = Result<[UInt8], any Error> { try bulk.receive(exactly: payload.count) }
            echoed.withLock { $0 = result }
        }.start()
        try bulk.sendAll(payload)
        waitUntil("4 MiB echoed", timeout: .seconds(60)) { echoed.current != nil }
        XCTAssertTrue(try echoed.current?.get() == payload, "the echo differs from what was sent")
        bulk.shutdownWrite()
        XCTAssertEqual(try bulk.receiveUntilEOF(), [])
        bulk.close()
        sample.waitForOutput(containing: "left after \(4 << 20) bytes")

        sample.process.interrupt()  // SIGINT, as Ctrl-C sends
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT: closing 1 connection(s)"), sample.standardOutput)
        XCTAssertEqual(try silent.receiveUntilEOF(), [], "the silent client's connection was closed")
        XCTAssertEqual(sample.standardError, "")
    }

    func testAPortInUsePrintsTheErrorAndExitsOne() throws {
        let first = try SampleProcess("echo", ["--port", "0"])
        defer { first.process.interrupt(); first.waitForExit() }
        let port = try listeningPort(of: first)
        let second = try SampleProcess("echo", ["--port", "\(port)"])
        XCTAssertEqual(second.waitForExit(), 1)
        XCTAssertTrue(second.standardError.contains("EADDRINUSE"), second.standardError)
        XCTAssertTrue(second.standardError.contains("echo: cannot serve on 127.0.0.1:\(port)"), second.standardError)
    }

    func testBadArgumentsPrintUsageAndExitTwo() throws {
        for arguments in [[], ["--port"], ["--port", "http"], ["--port", "70000"], ["--bogus"],
                          ["--port", "0", "--max-connections", "0"], ["--port", "0", "--max-connections", "many"]] {
            let sample = try SampleProcess("echo", arguments)
            XCTAssertEqual(sample.waitForExit(), 2, "\(arguments)")
            waitUntil("usage for \(arguments)") { sample.standardError.contains("usage: echo") }
        }
    }

    private func listeningPort(of sample: SampleProcess) throws -> Int {
        sample.waitForOutput(containing: "listening on 127.0.0.1:")
        let line = sample.standardOutput.split(separator: "\n").first { $0.contains("listening on") } ?? ""
        guard let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw TestFailure("no port in '\(line)'")
        }
        return port
    }
}
