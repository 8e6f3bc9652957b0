import Foundation
import ReactiveUVTesting
import XCTest

/// Runs the built `echo` executable as a user would.
final class EchoSampleTests: XCTestCase {
    /// Survives a resetting client, a silent one and a megabyte one; the first Ctrl-C drains:
    /// the silent client is idle, so it is closed at once (it reads EOF), and echo exits 0.
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
        XCTAssertEqual(silent.receiveUntilEnd().end, .endOfFile, "the silent client was closed as idle, not reset")
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
        XCTAssertFalse(sample.standardOutput.contains("interrupted by SIGINT again"), sample.standardOutput)
        XCTAssertEqual(sample.standardError, "")
    }

    /// The first Ctrl-C drains: the listening socket closes (a new client is refused), and the
    /// idle clients (one echoed, one silent) read EOF at once, while a client that sends and
    /// never reads its echo (the server holds its bytes) keeps echo running; the second Ctrl-C
    /// resets that one, and echo exits 0.
    func testFirstCtrlCClosesIdleClientsAtOnceAndTheSecondResetsAStalledOne() throws {
        let sample = try SampleProcess("echo", ["--port", "0", "--loops", "2", "--drain-timeout", "60"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)
        let echoed = try BlockingClient(port: port)
        defer { echoed.close() }
        try echoed.sendAll(bytePattern(100, seed: 4))
        XCTAssertEqual(try echoed.receive(exactly: 100), bytePattern(100, seed: 4))
        let silent = try BlockingClient(port: port)
        defer { silent.close() }
        let stalled = try stalledClient(port: port)
        defer { stalled.close() }
        sample.waitForOutput(containing: "connected (3 open)")

        sample.process.interrupt()
        sample.waitForOutput(containing: "interrupted by SIGINT: draining 3 connection(s) for up to 60.0 seconds (again to force)")
        // The count is the group's when its last loop stopped accepting: another loop may have closed its idle clients by then.
        sample.waitForOutput(containing: "connection(s) open: closing the idle ones, waiting for the others")
        for (name, client) in [("echoed", echoed), ("silent", silent)] {
            let end = client.receiveUntilEnd()
            XCTAssertEqual(end.bytes, [], "the \(name) client was sent nothing more")
            XCTAssertEqual(end.end, .endOfFile, "the \(name) client was closed at the drain's start")
        }
        XCTAssertThrowsError(try BlockingClient(port: port), "a client connected during the drain") { error in
            XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
        }
        sample.waitForOutput(containing: "left after 100 bytes")
        sample.waitForOutput(containing: "left after 0 bytes")
        XCTAssertTrue(sample.process.isRunning, "echo exited with the stalled client still connected")
        XCTAssertFalse(sample.standardOutput.contains("echo: drained"), sample.standardOutput)

        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT again: resetting 1 connection(s)"), sample.standardOutput)
        XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
        XCTAssertTrue(stalled.receiveUntilEnd().end.endedByPeer, "the stalled client's connection ended")
        XCTAssertEqual(sample.standardError, "")
    }

    /// With no second Ctrl-C, `--drain-timeout` resets a stalled client at the deadline (echo
    /// exits no sooner) while the idle one read EOF at the drain's start; echo exits 0.
    func testDrainTimeoutResetsAStalledClientAndClosesAnIdleOneAtOnce() throws {
        let sample = try SampleProcess("echo", ["--port", "0", "--loops", "1", "--drain-timeout", "0.3"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        let port = try listeningPort(of: sample)
        let idle = try BlockingClient(port: port)
        defer { idle.close() }
        let stalled = try stalledClient(port: port)
        defer { stalled.close() }
        sample.waitForOutput(containing: "connected (2 open)")
        let interrupted = ContinuousClock.now
        sample.process.interrupt()
        XCTAssertEqual(idle.receiveUntilEnd().end, .endOfFile, "the idle client was closed, not reset")
        // The stalled client is not read before echo exits: reading would let its echo flow.
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - interrupted, .milliseconds(300), "echo drained before the deadline")
        XCTAssertTrue(stalled.receiveUntilEnd().end.endedByPeer, "the stalled client's connection ended")
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
        sample.process.interrupt()  // drains: the 32 clients are idle, so each is closed at once
        sample.waitForOutput(containing: "draining 32 connection(s)")
        for (index, client) in clients.enumerated() {
            XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "client \(index) was closed as idle")
        }
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
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
    /// `ENOENT`), the four clients, idle once echoed, read EOF at once on both loops, and echo
    /// exits 0 with no second Ctrl-C.
    func testUnixSocketOnTwoLoopsClosesItsIdleClientsOnTheFirstCtrlC() throws {
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
            for (index, client) in clients.enumerated() {
                let end = client.receiveUntilEnd()
                XCTAssertEqual(end.bytes, [], "client \(index) was sent nothing more")
                XCTAssertEqual(end.end, .endOfFile, "client \(index) was closed as idle")
            }
            XCTAssertThrowsError(try UnixBlockingClient(path: path), "a client connected during the drain") { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ENOENT, "\(error)")
            }
            XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
            XCTAssertTrue(sample.standardOutput.contains("echo: drained"), sample.standardOutput)
            XCTAssertFalse(sample.standardOutput.contains("interrupted by SIGINT again"), sample.standardOutput)
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

    /// A client that sends without reading its echo until the server no longer takes its bytes:
    /// more than its small receive buffer and the server's largest send buffer hold, so from then
    /// on the server keeps bytes of it unread or unsent, and it is never idle.
    private func stalledClient(port: Int) throws -> BlockingClient {
        var small: Int32 = 16 << 10
        let client = try BlockingClient(port: port) { descriptor in
            _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        }
        // The kernel doubles the size asked for; the third field of tcp_wmem caps a send buffer's growth.
        let sendBufferMaximum = try String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8)
            .split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) } ?? (64 << 20)
        let bound = 2 * Int(small) + sendBufferMaximum
        try client.setSendTimeout(.seconds(1))
        let chunk = bytePattern(1 << 20, seed: 9)
        var total = 0
        var stalls = 0
        while true {
            let sent = client.send(chunk)
            total += sent
            if sent < chunk.count {
                if total > bound { return client }
                stalls += 1
            }
            if total > 1 << 30 || stalls == 60 {
                throw TestFailure("\(total) bytes sent, \(stalls) s without progress: echo neither stalled past \(bound) bytes nor took them all")
            }
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
