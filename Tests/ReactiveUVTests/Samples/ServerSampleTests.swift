import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The `server` sample: the README's multi-core `main.swift` (a group, a drain on SIGTERM or
/// SIGINT, `Program.run`, the exit status), run as a user would.
final class ServerSampleTests: XCTestCase {
    func testItEchoesThenDrainsOnSIGTERMAndExitsZero() throws {
        let sample = try SampleProcess("server", ["0"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let client = try BlockingClient(port: listeningPort(of: sample))
        try client.sendAll(Array("hello\n".utf8))
        XCTAssertEqual(try client.receive(exactly: 6), Array("hello\n".utf8))
        client.shutdownWrite()
        XCTAssertEqual(try client.receiveUntilEOF(), [], "the server closes after the client's EOF")
        client.close()
        kill(sample.process.processIdentifier, SIGTERM)
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertEqual(sample.standardError, "")
    }

    /// A client that stays connected: the first SIGINT drains (the server no longer accepts), the
    /// second resets it, and the program exits 0.
    func testASecondInterruptResetsTheClientsLeftAndExitsZero() throws {
        let sample = try SampleProcess("server", ["0"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)
        let staying = try BlockingClient(port: port)
        defer { staying.close() }
        try staying.sendAll([1])
        XCTAssertEqual(try staying.receive(exactly: 1), [1])
        sample.process.interrupt()
        waitUntil("the server to stop accepting") { (try? BlockingClient(port: port).close()) == nil }
        XCTAssertTrue(sample.process.isRunning, "the drain waits for the client that stayed")
        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(staying.receiveUntilEnd().end.endedByPeer, "the client that stayed was closed at exit")
    }

    /// The same program with a top-level `await` (`Program.wait(for:shuttingDown:)`) serves and exits 0.
    func testTheTopLevelAwaitFormServesAndExitsZeroOnSIGTERM() throws {
        let sample = try SampleProcess("server-await", ["0"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let client = try BlockingClient(port: listeningPort(of: sample))
        defer { client.close() }
        try client.sendAll(Array("await\n".utf8))
        XCTAssertEqual(try client.receive(exactly: 6), Array("await\n".utf8))
        client.shutdownWrite()
        XCTAssertEqual(try client.receiveUntilEOF(), [], "the server closes after the client's EOF")
        kill(sample.process.processIdentifier, SIGTERM)
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertEqual(sample.standardError, "")
    }

    func testAPortInUsePrintsTheErrorAndExitsOne() throws {
        let first = try SampleProcess("server", ["0"])
        defer { if first.process.isRunning { first.process.terminate() } }
        let port = try listeningPort(of: first)
        let second = try SampleProcess("server", ["\(port)"])
        XCTAssertEqual(second.waitForExit(), 1)
        XCTAssertTrue(second.standardError.contains("EADDRINUSE"), second.standardError)
        kill(first.process.processIdentifier, SIGTERM)
        XCTAssertEqual(first.waitForExit(), 0, first.standardError)
    }

    private func listeningPort(of sample: SampleProcess) throws -> Int {
        sample.waitForOutput(containing: "listening on 127.0.0.1:")
        let line = sample.standardOutput.split(separator: "\n").first { $0.contains("listening on") } ?? ""
        guard let port = line.split(separator: ":").last.flatMap({ Int($0) }) else { throw TestFailure("no port in '\(line)'") }
        return port
    }
}
