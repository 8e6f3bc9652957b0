import Foundation
import ReactiveUVTesting
import XCTest

/// Runs the built `echo` executable as a user would.
final class EchoSampleTests: XCTestCase {
    /// Survives a resetting client, a silent one and a megabyte one; the first Ctrl-C drains
    /// (the silent client keeps it waiting), the second resets the silent client and exits 0.
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
        sample.waitForOutput(containing: "interrupted by SIGINT: draining 1 connection(s)")
        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT again: resetting 1 connection(s)"), sample.standardOutput)
        XCTAssertEqual(silent.receiveUntilEnd().end, .reset, "the silent client's connection was reset")
        XCTAssertEqual(sample.standardError, "")
    }

    /// The first Ctrl-C drains: the listening socket closes (a new client is refused), a
    /// connected client still gets its echo and leaves; the second Ctrl-C resets the client
    /// that stayed, and echo exits 0.
    func testFirstCtrlCDrainsAndAConnectedClientStillGetsItsEchoSecondForces() throws {
        let sample = try SampleProcess("echo", ["--port", "0", "--loops", "2", "--drain-timeout", "60"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)
        let working = try BlockingClient(port: port)
        defer { working.close() }
        let staying = try BlockingClient(port: port)
        defer { staying.close() }
        sample.waitForOutput(containing: "connected (2 open)")

        sample.process.interrupt()
        sample.waitForOutput(containing: "interrupted by SIGINT: draining 2 connection(s) for up to 60.0 seconds (again to force)")
        sample.waitForOutput(containing: "echo: no longer accepting; waiting for 2 connection(s) to close")
        XCTAssertThrowsError(try BlockingClient(port: port), "a client connected during the drain") { error in
            XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
        }
        let payload = bytePattern(200_000, seed: 4)
        let echoed = Locked<Result<[UInt8], any Error>?>(nil)
        Thread {
            let result = Result<[UInt8], any Error> { try working.receive(exactly: payload.count) }
            echoed.withLock { $0 = result }
        }.start()
        try working.sendAll(payload)
        waitUntil("the echo during the drain", timeout: .seconds(60)) { echoed.current != nil }
        XCTAssertTrue(try echoed.current?.get() == payload, "the echo during the drain differs from what was sent")
        working.shutdownWrite()
        XCTAssertEqual(try working.receiveUntilEOF(), [])
        sample.waitForOutput(containing: "left after 200000 bytes (1 open)")
        XCTAssertTrue(sample.process.isRunning, "echo exited with a client still connected")

        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT again: resetting 1 connection(s)"), sample.standardOutput)
        XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
        XCTAssertEqual(staying.receiveUntilEnd().end, .reset, "the client that stayed was reset")
        XCTAssertEqual(sample.standardError, "")
    }

    /// With no second Ctrl-C, `--drain-timeout` resets a silent client at the deadline (not
    /// before) and echo exits 0.
    func testDrainTimeoutResetsASilentClientAndExitsZero() throws {
        let sample = try SampleProcess("echo", ["--port", "0", "--loops", "1", "--drain-timeout", "0.3"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)
        let silent = try BlockingClient(port: port)
        defer { silent.close() }
        sample.waitForOutput(containing: "connected (1 open)")
        let interrupted = ContinuousClock.now
        sample.process.interrupt()
        XCTAssertEqual(silent.receiveUntilEnd().end, .reset, "the silent client was reset at the deadline")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - interrupted, .milliseconds(300), "reset before the deadline")
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
        XCTAssertEqual(sample.standardError, "")
    }

    /// `echo --loops 2 --verbose` serves clients on both loops: 32 clients, each echoed, and the
    /// output names both loops. The kernel spreads clients over the loops' `SO_REUSEPORT`
    /// sockets by a hash of each client's address pair: 32 clients from distinct ephemeral
    /// ports all land on one loop with probability 2 × 2^-32 ≈ 5 × 10^-10.
    func testLoopsTwoServesClientsOnBothLoops() throws {
        let sample = try SampleProcess("echo", ["--port", "0", "--loops", "2", "--verbose"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)
        sample.waitForOutput(containing: "echo: serving on 2 loop(s)")
        var clients: [BlockingClient] = []
        defer { for client in clients { client.close() } }
        for index in 0..<32 {
            let client = try BlockingClient(port: port)
            clients.append(client)
            try client.sendAll(bytePattern(100, seed: index))
            XCTAssertEqual(try client.receive(exactly: 100), bytePattern(100, seed: index))
        }
        sample.waitForOutput(containing: "connected (32 open)")
        XCTAssertTrue(sample.standardOutput.contains("served on loop echo-0"), sample.standardOutput)
        XCTAssertTrue(sample.standardOutput.contains("served on loop echo-1"), sample.standardOutput)
        sample.process.interrupt()  // drains: the 32 clients stay connected
        sample.waitForOutput(containing: "draining 32 connection(s)")
        sample.process.interrupt()  // forces
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        for (index, client) in clients.enumerated() {
            XCTAssertTrue(client.receiveUntilEnd().end.endedByPeer, "client \(index) was closed at exit")
        }
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

    /// `echo --unix PATH --backlog N` serves a Unix socket: a client's bytes come back; a stale file from a
    /// killed run is replaced; the path's lock file is there while it listens; Ctrl-C (no client left: the
    /// drain ends at once) exits 0 and removes the socket file and the lock file.
    func testServesAUnixSocketAndRemovesItsFileOnCtrlC() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/echo.sock"
            try leaveStaleSocketFile(at: path)
            let sample = try SampleProcess("echo", ["--unix", path, "--backlog", "64"])
            defer { if sample.process.isRunning { sample.process.terminate() } }
            sample.waitForOutput(containing: "echo: listening on unix \(path)")
            XCTAssertEqual(fileType(path + ".lock"), S_IFREG, "no lock file beside the socket")

            let client = try UnixBlockingClient(path: path)
            defer { client.close() }
            let payload = bytePattern(100_000, seed: 3)
            try client.sendAll(payload)
            client.shutdownWrite()
            XCTAssertTrue(try client.receiveUntilEOF() == payload, "the echo differs from what was sent")
            sample.waitForOutput(containing: "left after 100000 bytes")

            sample.process.interrupt()
            XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
            XCTAssertNil(fileType(path), "the socket file is still there after the server exited")
            XCTAssertNil(fileType(path + ".lock"), "the lock file is still there after the server exited")
            XCTAssertEqual(sample.standardError, "")
        }
    }

    /// `echo --unix PATH --loops 2 --verbose` serves clients on both loops (the first accepts and
    /// hands them out in turn); the first Ctrl-C drains: the socket file goes (a new client gets
    /// `ENOENT`), a connected client is still echoed and leaves; the second Ctrl-C closes the
    /// client that stayed, and echo exits 0.
    func testUnixSocketOnTwoLoopsDrainsOnFirstCtrlCAndForcesOnTheSecond() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/echo.sock"
            let sample = try SampleProcess("echo", ["--unix", path, "--loops", "2", "--verbose", "--drain-timeout", "60"])
            defer { if sample.process.isRunning { sample.process.terminate() } }
            sample.waitForOutput(containing: "echo: listening on unix \(path)")
            sample.waitForOutput(containing: "echo: serving on 2 loop(s)")
            var clients: [UnixBlockingClient] = []
            defer { for client in clients { client.close() } }
            for index in 0..<4 {
                let client = try UnixBlockingClient(path: path)
                clients.append(client)
                try client.sendAll(bytePattern(100, seed: index))
                XCTAssertEqual(try client.receive(exactly: 100), bytePattern(100, seed: index))
            }
            sample.waitForOutput(containing: "connected (4 open)")
            XCTAssertTrue(sample.standardOutput.contains("served on loop echo-0"), sample.standardOutput)
            XCTAssertTrue(sample.standardOutput.contains("served on loop echo-1"), sample.standardOutput)

            sample.process.interrupt()
            sample.waitForOutput(containing: "interrupted by SIGINT: draining 4 connection(s) for up to 60.0 seconds (again to force)")
            sample.waitForOutput(containing: "echo: no longer accepting; waiting for 4 connection(s) to close")
            XCTAssertNil(fileType(path), "the socket file is still there during the drain")
            XCTAssertThrowsError(try UnixBlockingClient(path: path), "a client connected during the drain") { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ENOENT, "\(error)")
            }
            for index in 0..<3 {
                let payload = bytePattern(50_000, seed: 10 + index)
                try clients[index].sendAll(payload)
                XCTAssertTrue(try clients[index].receive(exactly: payload.count) == payload, "client \(index)'s echo during the drain")
                clients[index].shutdownWrite()
                XCTAssertEqual(try clients[index].receiveUntilEOF(), [])
            }
            sample.waitForOutput(containing: "bytes (1 open)")  // a leave line: "connected (1 open)" came first
            XCTAssertTrue(sample.process.isRunning, "echo exited with a client still connected")

            sample.process.interrupt()
            XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
            XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT again: resetting 1 connection(s)"), sample.standardOutput)
            XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
            XCTAssertTrue(clients[3].receiveUntilEnd().end.endedByPeer, "the client that stayed was closed")
            XCTAssertEqual(sample.standardError, "")
        }
    }

    func testBadArgumentsPrintUsageAndExitTwo() throws {
        for arguments in [[], ["--port"], ["--port", "http"], ["--port", "70000"], ["--bogus"], ["--unix"],
                          ["--port", "0", "--unix", "/tmp/x.sock"],
                          ["--port", "0", "--max-connections", "0"], ["--port", "0", "--max-connections", "many"],
                          ["--port", "0", "--loops", "0"], ["--port", "0", "--loops", "two"], ["--unix", "/tmp/x.sock", "--loops", "0"],
                          ["--port", "0", "--drain-timeout", "0"], ["--port", "0", "--drain-timeout", "soon"],
                          ["--port", "0", "--drain-timeout", "nan"], ["--unix", "/tmp/x.sock", "--drain-timeout", "0"],
                          ["--port", "0", "--backlog", "0"], ["--unix", "/tmp/x.sock", "--backlog", "-1"],
                          ["--port", "0", "--backlog", "many"], ["--port", "0", "--backlog", "3000000000"]] {
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
