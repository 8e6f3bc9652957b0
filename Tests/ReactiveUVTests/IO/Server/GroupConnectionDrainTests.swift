import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A drain that closes idle connections on a group: every connection hears it on its own loop,
/// the idle ones close at once on every loop, and those in the middle of a request close once
/// their handler has answered and marked them idle. (On one loop: `ConnectionDrainTests`.)
///
/// Each handler runs in `onAccepted`, on its connection's loop: a request gets the first half of
/// its answer at once and the second when `finish` fires, then the connection is marked idle.
final class GroupConnectionDrainTests: XCTestCase {
    /// 16 TCP clients over two loops, 8 idle and 8 with a request in flight: the idle ones read
    /// EOF at the drain's start while the server waits; every connection heard the drain on its
    /// loop; once the answers are finished, each busy client reads the rest and EOF, and the
    /// server completes.
    func testATCPGroupClosesIdleClientsAtOnceAndTheOthersAfterTheirAnswer() throws {
        try withGroup { harness, group, _ in
            let drain = Subject<TCPServer.DrainRequest>()
            let finish = Subject<Void>()
            let heard = Locked<[String]>([])
            let homes = Locked<Set<String>>([])
            let server = try harness.record(TCPServer.serve(port: 0, on: group, onAccepted: { connection in
                homes.withLock { _ = $0.insert(connection.loop.name) }
                serve(connection, finishingOn: finish, heard: heard)
            }, drain: drain), label: "server")
            guard case .listening(let address) = try server.waitForValues(1)[0] else { return XCTFail("\(server.events)") }
            var busy: [BlockingClient] = []
            var idle: [BlockingClient] = []
            defer { for client in busy + idle { client.close() } }
            for _ in 0..<8 {
                let client = try BlockingClient(port: address.port)
                busy.append(client)
                try client.sendAll([0])
                XCTAssertTrue(try client.receive(exactly: 1 << 16) == answer(1), "the first half of the answer")
            }
            for _ in 0..<8 { idle.append(try BlockingClient(port: address.port)) }
            try waitForAccepted(server, 16)

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            for (index, client) in idle.enumerated() {
                let end = client.receiveUntilEnd()
                XCTAssertEqual(end.bytes, [], "idle client \(index) was sent nothing")
                XCTAssertEqual(end.end, .endOfFile, "idle client \(index): FIN at the drain's start")
            }
            try harness.wait(for: "every connection heard the drain") { heard.current.count == 16 }
            XCTAssertEqual(Set(heard.current), Set(group.loops.map(\.name)), "heard on both loops")
            XCTAssertEqual(homes.current, Set(group.loops.map(\.name)), "both loops had clients")
            XCTAssertNil(server.terminal, "the server completed with requests in flight")

            finish.sendNext(())
            for (index, client) in busy.enumerated() {
                XCTAssertTrue(try client.receiveUntilEOF() == answer(2), "busy client \(index): the rest of its answer, then EOF")
            }
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertEqual(heard.current.count, 16, "a connection heard the drain twice")
        }
    }

    /// A Unix-socket group (the first loop accepts and hands the clients out in turn), four
    /// clients, two per loop: a plain drain reaches every connection and closes none; a later
    /// request closing idle ones closes the two idle clients (they read EOF); the two in the
    /// middle of a request get the rest of their answer, then EOF, and the server completes.
    func testAUnixGroupClosesIdleClientsAtOnceAndTheOthersAfterTheirAnswer() throws {
        try withGroup { harness, group, directory in
            let path = directory + "/drain.sock"
            let drain = Subject<UnixSocket.DrainRequest>()
            let finish = Subject<Void>()
            let heard = Locked<[String]>([])
            let server = try harness.record(UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                serve(connection, finishingOn: finish, heard: heard)
            }, drain: drain), label: "server")
            guard case .listening = try server.waitForValues(1)[0] else { return XCTFail("\(server.events)") }
            // In turn: clients 0 and 2 on the first loop, 1 and 3 on the second.
            let clients = try (0..<4).map { _ in try UnixBlockingClient(path: path) }
            defer { for client in clients { client.close() } }
            try waitForAcceptedUnix(server, 4)
            let busy = Array(clients[0..<2])
            let idle = Array(clients[2..<4])
            for client in busy {
                try client.sendAll([0])
                XCTAssertTrue(try client.receive(exactly: 1 << 16) == answer(1))
            }

            drain.sendNext(.graceful(timeout: .seconds(60)))
            try harness.wait(for: "every connection heard the drain") { heard.current.count == 4 }
            XCTAssertEqual(Set(heard.current), Set(group.loops.map(\.name)), "heard on both loops")
            // Each loop has told its connections and closed none: a turn of each after the telling.
            for loop in group.loops { try loop.tryExecute { harness.loop.execute {} } }
            try harness.onLoop {}
            XCTAssertTrue(accepted(unix: server).allSatisfy(\.isOpen), "a plain drain closed a connection")

            drain.sendNext(.graceful(timeout: .seconds(60), closingIdle: true))
            for (index, client) in idle.enumerated() {
                let end = client.receiveUntilEnd()
                XCTAssertEqual(end.bytes, [], "idle client \(index) was sent nothing")
                XCTAssertEqual(end.end, .endOfFile, "idle client \(index) was closed by the later request")
            }
            XCTAssertNil(server.terminal, "the server completed with requests in flight")
            XCTAssertEqual(heard.current.count, 4, "a connection heard the drain twice")

            finish.sendNext(())
            for (index, client) in busy.enumerated() {
                XCTAssertTrue(try client.receiveUntilEOF() == answer(2), "busy client \(index): the rest of its answer, then EOF")
            }
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    // MARK: - support

    /// Runs `body` with a harness, a two-loop group and a temporary directory, then checks every
    /// group loop as the harness checks its own: no handle left open, `uv_loop_close` 0.
    private func withGroup(file: StaticString = #filePath, line: UInt = #line,
                           _ body: (LoopHarness, EventLoopGroup, String) throws -> Void) throws {
        try withTemporaryDirectory { directory in
            let group = EventLoopGroup(loopCount: 2, name: "drained")
            let report = LoopHarness.run(file: file, line: line) { harness in
                defer {
                    // The harness disposes its recorders only at its end: this runs first, so dispose here.
                    _ = harness.finish()
                    for loop in group.loops {
                        do {
                            try harness.wait(for: "loop \(loop.name) has no open handle") { (try? loop.openHandles()) == [] }
                            XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0, "uv_loop_close on \(loop.name)", file: file, line: line)
                        } catch {
                            XCTFail("\(loop.name): \(error)", file: file, line: line)
                        }
                    }
                }
                try body(harness, group, directory)
            }
            XCTAssertTrue(report.isClean, "\(report.problems)", file: file, line: line)
        }
    }
}

/// Serves `connection` on its loop (called there): records the loop's name when it hears the
/// drain; a request gets `answer(1)` at once, and `answer(2)` when `finish` fires, after which
/// the connection is marked idle.
private func serve(_ connection: StreamConnection, finishingOn finish: Subject<Void>, heard: Locked<[String]>) {
    _ = connection.draining.subscribeNext { heard.withLock { $0.append(connection.loop.name) } }
    _ = connection.bytes.subscribeNext { _ in
        connection.send(answer(1))
        _ = finish.take(1).subscribeNext {
            connection.send(answer(2))
            connection.markIdle()
        }
    }
}
