import Dispatch
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `UnixSocket.serve/listen(path:on: group)`: the group's first loop accepts and hands each
/// connection to a loop in turn; and the drain of a Unix-socket server, on a group or one loop.
///
/// The subscriber is recorded on the harness's loop (not one of the group's), so every event is
/// hopped to it; where a connection lives is observed in `onAccepted`, which runs on the
/// connection's loop. Each group loop is checked at the end as the harness checks its own: no
/// handle left open, `uv_loop_close` 0 (`withGroup`).
final class UnixGroupServerTests: XCTestCase {
    /// 8 clients, one after the other, of a two-loop server: the first loop takes the first, the
    /// second the next, and so on (round robin, the accepting loop included), and each is served
    /// on its own loop (`onAccepted` runs there, and its `bytes` subscription made there echoes).
    func testConnectionsLandOnBothLoopsInTurnAndAreServedOnTheirOwnLoop() throws {
        try withGroupServer { harness, group, path in
            let homes = Locked<[String]>([])
            let wrongThread = Locked<[String]>([])
            let server = try harness.record(UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                let current = EventLoop.current?.name ?? "no loop"
                homes.withLock { $0.append(current) }
                if current != connection.loop.name { wrongThread.withLock { $0.append("\(current) for \(connection.loop.name)") } }
                // Subscribed here, on the connection's loop: its home is that loop.
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }), label: "server")
            try waitForListening(server, path)
            var clients: [UnixBlockingClient] = []
            defer { for client in clients { client.close() } }
            for index in 0..<8 {
                let client = try UnixBlockingClient(path: path)
                clients.append(client)
                let message = bytePattern(64, seed: index)
                try client.sendAll(message)
                XCTAssertEqual(try client.receive(exactly: 64), message, "client \(index)'s echo")
            }
            try harness.wait(for: "8 connections accepted") { homes.current.count == 8 }
            let perLoop = Dictionary(grouping: homes.current, by: { $0 }).mapValues(\.count)
            XCTAssertEqual(perLoop, [group.loops[0].name: 4, group.loops[1].name: 4], "round robin over both loops")
            XCTAssertEqual(wrongThread.current, [], "onAccepted ran off the connection's loop")
            let connections = try waitForAcceptedUnix(server, 8)
            XCTAssertEqual(Set(connections.map(\.loop.name)), Set(group.loops.map(\.name)))
            XCTAssertTrue(connections.allSatisfy { $0.path == path })
            // `.accepted` reaches the subscriber on its home (the harness loop), hopped there.
            XCTAssertTrue(server.recorded.allSatisfy { $0.loopName == harness.loop.name })
        }
    }

    /// `maxConnections` counts across the group: with a limit of 2, the first two clients are
    /// kept (one on each loop) and the next four are closed at once (they read EOF), each
    /// refusal naming the group's count; once a kept client leaves, a new one is accepted.
    func testMaxConnectionsCountsAcrossTheGroup() throws {
        try withGroupServer { harness, group, path in
            let homes = Locked<[String]>([])
            let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(maxConnections: 2), on: group,
                                                             onAccepted: { connection in
                homes.withLock { $0.append(connection.loop.name) }
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }), label: "server")
            try waitForListening(server, path)
            var clients: [UnixBlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<6 { clients.append(try UnixBlockingClient(path: path)) }
            try server.waitForValues(7)
            let refused = server.values.compactMap { event -> Int? in if case .refused(let open) = event { open } else { nil } }
            XCTAssertEqual(accepted(unix: server).count, 2)
            XCTAssertEqual(refused, [2, 2, 2, 2], "each refusal names the group's count")
            XCTAssertEqual(Set(homes.current), Set(group.loops.map(\.name)), "the two kept clients are on both loops")
            for index in 2..<6 {
                XCTAssertEqual(clients[index].receiveUntilEnd().end, .endOfFile, "refused client \(index) was closed")
            }
            clients[1].shutdownWrite()
            XCTAssertEqual(try clients[1].receiveUntilEOF(), [], "the second client left")
            try harness.wait(for: "its connection closed") { accepted(unix: server).contains { !$0.isOpen } }
            // `isOpen` goes false as the close starts; the place is given back later in the same
            // callback on the connection's loop: a turn of that loop after it has run.
            let left = try XCTUnwrap(accepted(unix: server).first { !$0.isOpen })
            XCTAssertEqual(onLoop(left.loop) { true }, true, "its place freed")
            let late = try UnixBlockingClient(path: path)
            clients.append(late)
            try late.sendAll([7])
            XCTAssertEqual(try late.receive(exactly: 1), [7], "a client after one left is served")
            XCTAssertEqual(try waitForAcceptedUnix(server, 3).count, 3)
        }
    }

    /// Disposing the server closes every loop's connections (each client reads EOF), removes
    /// the socket file, and leaves no handle on any loop.
    func testDisposingClosesEveryLoopsConnectionsAndRemovesTheFile() throws {
        try withGroupServer { harness, group, path in
            let homes = Locked<[String]>([])
            let server = try harness.record(UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                homes.withLock { $0.append(connection.loop.name) }
            }), label: "server")
            try waitForListening(server, path)
            XCTAssertEqual(fileType(path), S_IFSOCK)
            var clients: [UnixBlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<4 { clients.append(try UnixBlockingClient(path: path)) }
            try waitForAcceptedUnix(server, 4)
            XCTAssertEqual(Set(homes.current), Set(group.loops.map(\.name)))
            server.dispose()
            for (index, client) in clients.enumerated() {
                XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "client \(index) was closed by the server")
            }
            try harness.wait(for: "the socket file removed") { fileType(path) == nil }
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) closed everything") { (try? loop.openHandles()) == [] }
            }
        }
    }

    /// A group with a loop that has shut down is refused before anything is bound, naming that
    /// loop: no event, no socket file.
    func testAGroupWithALoopThatHasShutDownFailsNamingItBeforeBinding() throws {
        try withGroupServer { harness, group, path in
            group.loops[1].shutdown()
            let server = try harness.record(UnixSocket.serve(path: path, on: group), label: "server")
            guard case .error(let error) = try server.waitForTermination() else {
                return XCTFail("the server did not fail: \(server.events)")
            }
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: group.loops[1].name))
            XCTAssertTrue(server.values.isEmpty, "nothing was sent before the error: \(server.values)")
            XCTAssertNil(fileType(path), "a socket file was made")
        }
    }

    /// A loop asked to shut down, its shutdown not begun yet, is refused at the door as well,
    /// before anything is bound, as the TCP group server refuses it: the two share the check.
    func testALoopAskedToShutDownFailsTheGroupBeforeAnythingIsBound() throws {
        try withGroupServer { harness, group, path in
            let stopping = group.loops[1]
            let first = try firstEvent(of: UnixSocket.serve(path: path, on: group), whileTheShutdownOf: stopping, isPendingOn: harness)
            guard case .error(let error) = first else { return XCTFail("the server did not fail at once: \(first)") }
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: stopping.name))
            XCTAssertNil(fileType(path), "a socket file was made")
        }
    }

    /// A connection on its way to a loop that is asked to shut down before it arrives is closed
    /// there exactly once: the client reads EOF and no socket is left open in the process. The
    /// clients after it are served on the loop that is left.
    ///
    /// The second loop is held busy while the second client's connection is queued to it, then
    /// asked to shut down (from another loop's thread, which does not wait), then released: it
    /// runs the hand-off with its shutdown requested.
    func testAConnectionHandedToALoopShuttingDownIsClosedAndLeaksNoDescriptor() throws {
        try withGroupServer { harness, group, path in
            let socketsBefore = try openSocketCount()
            let target = group.loops[1]
            let server = try harness.record(UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }), label: "server")
            try waitForListening(server, path)
            let first = try UnixBlockingClient(path: path)  // the first loop's turn
            defer { first.close() }
            try first.sendAll([1])
            XCTAssertEqual(try first.receive(exactly: 1), [1])

            let release = try holdBusy(target)
            let second = try UnixBlockingClient(path: path)  // the second loop's turn: queued behind the hold
            defer { second.close() }
            try harness.wait(for: "the connection queued to loop \(target.name)") { target.queuedWorkCount == 1 }
            try harness.onLoop { target.shutdown() }  // from another loop's thread: starts it, does not wait
            release.signal()
            XCTAssertEqual(second.receiveUntilEnd().end, .endOfFile, "the connection handed to the stopping loop was closed")
            try harness.wait(for: "loop \(target.name) shut down") { target.isShutDown }

            for index in 0..<4 {
                let client = try UnixBlockingClient(path: path)
                defer { client.close() }
                try client.sendAll([UInt8(index)])
                XCTAssertEqual(try client.receive(exactly: 1), [UInt8(index)], "client \(index) after the loop shut down")
            }
            XCTAssertTrue(accepted(unix: server).allSatisfy { $0.loop === group.loops[0] }, "only the first loop sent connections")
            XCTAssertNil(server.terminal, "another loop's shutdown ended the server: \(server.events)")
            first.close()
            second.close()
            server.dispose()
            try harness.wait(for: "loop \(group.loops[0].name) closed everything") { (try? group.loops[0].openHandles()) == [] }
            try harness.waitOrThrow(for: "every socket closed") { try openSocketCount() <= socketsBefore }
            XCTAssertEqual(try openSocketCount(), socketsBefore, "a socket descriptor was left open")
        }
    }

    /// The first loop's shutdown ends the server (nothing accepts any more): the signal fails
    /// naming it, and the connections on the other loop are closed too.
    func testTheAcceptingLoopShuttingDownEndsTheServerOnEveryLoop() throws {
        try withGroupServer { harness, group, path in
            let server = try harness.record(UnixSocket.serve(path: path, on: group), label: "server")
            try waitForListening(server, path)
            let onFirst = try UnixBlockingClient(path: path)
            defer { onFirst.close() }
            let onSecond = try UnixBlockingClient(path: path)
            defer { onSecond.close() }
            let connections = try waitForAcceptedUnix(server, 2)
            XCTAssertEqual(connections.map(\.loop.name), group.loops.map(\.name))
            group.loops[0].shutdown()
            guard case .error(let error) = try server.waitForTermination() else {
                return XCTFail("the server did not fail: \(server.events)")
            }
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: group.loops[0].name))
            XCTAssertTrue(onSecond.receiveUntilEnd().end.endedByPeer, "the other loop's connection was closed")
            XCTAssertTrue(onFirst.receiveUntilEnd().end.endedByPeer)
            XCTAssertNil(fileType(path), "the socket file was left behind")
        }
    }

    /// The Unix-socket guide's group example is this code, and it serves: clients on both loops get
    /// their bytes back, and disposing leaves every group loop with nothing open.
    func testTheUnixGuideGroupExampleIsThisCodeAndEchoes() throws {
        try assertDocumentBlock("docs/guides/unix-sockets.md", containing: "UnixSocket.serve(path: path, on: group", matches: "GUIDE-UNIX-GROUP")
        try withTemporaryDirectory { directory in
            let path = directory + "/app.sock"
            let group = EventLoopGroup(loopCount: 2)
            // GUIDE-UNIX-GROUP-BEGIN
            // The first loop accepts; each client is served on the loop it was handed to.
            let server = UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }).subscribe(error: { print("cannot serve:", $0) })
            // GUIDE-UNIX-GROUP-END
            let report = LoopHarness.run { harness in
                var connected: UnixBlockingClient?
                try harness.wait(for: "the server to listen") {
                    connected = try? UnixBlockingClient(path: path)
                    return connected != nil
                }
                let clients = [connected!, try UnixBlockingClient(path: path)]  // one on each loop
                for (index, client) in clients.enumerated() {
                    try client.sendAll(Array("hello \(index)".utf8))
                    XCTAssertEqual(try client.receive(exactly: 7), Array("hello \(index)".utf8))
                    client.shutdownWrite()
                    XCTAssertEqual(try client.receiveUntilEOF(), [], "the server closed after the client's EOF")
                    client.close()
                }
                server.dispose()
                for loop in group.loops {
                    try harness.wait(for: "loop \(loop.name) has nothing open") { (try? loop.openHandles()) == [] }
                }
            }
            XCTAssertTrue(report.isClean, "\(report.problems)")
            let reports = try group.tryShutdown()
            XCTAssertEqual(reports.map(\.loopCloseResult), [0, 0])
        }
    }

    // MARK: - drain

    /// A client on the second loop in the middle of a 4 MiB transfer when the drain begins gets
    /// every byte of its echo; `.draining` counts both loops' clients; the server completes only
    /// after the last connection closed.
    func testAClientMidTransferFinishesItsBytesDuringADrainOnAGroup() throws {
        try withGroupServer { harness, group, path in
            let drain = Subject<UnixSocket.DrainRequest>()
            let server = try harness.record(UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }, drain: drain), label: "server")
            try waitForListening(server, path)
            let idle = try UnixBlockingClient(path: path)
            defer { idle.close() }
            try waitForAcceptedUnix(server, 1)
            let client = try UnixBlockingClient(path: path)
            defer { client.close() }
            let connections = try waitForAcceptedUnix(server, 2)
            XCTAssertEqual(connections[1].loop.name, group.loops[1].name, "the transferring client is on the second loop")

            let payload = bytePattern(4 << 20, seed: 7)
            var echoed: [UInt8] = []
            var offset = 0
            func exchange(until end: Int) throws {
                while offset < end {
                    let next = min(offset + (64 << 10), end)
                    try client.sendAll(Array(payload[offset..<next]))
                    echoed += try client.receive(exactly: next - offset)
                    offset = next
                }
            }
            try exchange(until: 1 << 20)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            try server.wait(for: ".draining") { $0.contains { if case .next(.draining(open: 2)) = $0 { true } else { false } } }
            try exchange(until: payload.count)
            XCTAssertNil(server.terminal, "the server completed while connections were open")
            idle.shutdownWrite()
            XCTAssertEqual(try idle.receiveUntilEOF(), [])
            XCTAssertNil(server.terminal, "the server completed while a connection was open")
            client.shutdownWrite()
            XCTAssertEqual(try client.receiveUntilEOF(), [], "nothing after the echo")
            XCTAssertTrue(echoed == payload, "the echo of the 4 MiB differs from what was sent")
            XCTAssertTrue(try server.waitForTermination(timeout: .seconds(60)).isCompleted, "\(server.events)")
        }
    }

    /// Silent clients on both loops are closed at the drain's deadline, not before (each reads
    /// EOF, each connection's `bytes` completes), and then the server completes.
    func testSilentClientsOnEveryLoopAreClosedAtTheDeadline() throws {
        try withGroupServer { harness, group, path in
            let drain = Subject<UnixSocket.DrainRequest>()
            let server = try harness.record(UnixSocket.serve(path: path, on: group, drain: drain), label: "server")
            try waitForListening(server, path)
            let clients = try (0..<2).map { _ in try UnixBlockingClient(path: path) }
            defer { for client in clients { client.close() } }
            let connections = try waitForAcceptedUnix(server, 2)
            XCTAssertEqual(Set(connections.map(\.loop.name)), Set(group.loops.map(\.name)))
            let bytes = try connections.map { try harness.record($0.bytes, label: "silent client on \($0.loop.name)") }
            let deadline = Duration.milliseconds(300)
            let began = ContinuousClock.now
            drain.sendNext(.graceful(timeout: deadline))
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - began, deadline, "the silent clients were closed before the deadline")
            for (index, client) in clients.enumerated() {
                XCTAssertTrue(client.receiveUntilEnd().end.endedByPeer, "client \(index) was closed at the deadline")
            }
            for recorder in bytes { XCTAssertTrue(try recorder.waitForTermination().isCompleted, "\(recorder.events)") }
            XCTAssertTrue(connections.allSatisfy { !$0.isOpen })
        }
    }

    /// Once `.draining` is out the socket is closed and its file gone: a new client gets
    /// `ENOENT` (nothing accepted it), while the connected ones are still served; `.force` then
    /// closes them and the server completes.
    func testNoNewConnectionIsAcceptedOnceTheDrainBeganAndForceEndsIt() throws {
        try withGroupServer { harness, group, path in
            let drain = Subject<UnixSocket.DrainRequest>()
            let server = try harness.record(UnixSocket.serve(path: path, on: group, onAccepted: { connection in
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }, drain: drain), label: "server")
            try waitForListening(server, path)
            let clients = try (0..<2).map { _ in try UnixBlockingClient(path: path) }
            defer { for client in clients { client.close() } }
            try waitForAcceptedUnix(server, 2)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            try server.wait(for: ".draining") { $0.contains { if case .next(.draining(open: 2)) = $0 { true } else { false } } }
            XCTAssertNil(fileType(path), "the socket file is still there during the drain")
            XCTAssertThrowsError(try UnixBlockingClient(path: path), "a client connected after the drain began") { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ENOENT, "\(error)")
            }
            for (index, client) in clients.enumerated() {
                try client.sendAll([UInt8(index), 9])
                XCTAssertEqual(try client.receive(exactly: 2), [UInt8(index), 9], "client \(index) is still served")
            }
            XCTAssertNil(server.terminal)
            drain.sendNext(.force)
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            for (index, client) in clients.enumerated() {
                XCTAssertTrue(client.receiveUntilEnd().end.endedByPeer, "forced: client \(index) was closed")
            }
            XCTAssertEqual(accepted(unix: server).count, 2, "only the clients before the drain were accepted")
        }
    }

    /// A server on one loop drains the same way: `.draining(open: 2)`, its file gone, the
    /// working client gets its echo and leaves, the silent one is closed at the deadline (not
    /// before), and then the server completes.
    func testASingleLoopServerDrainsServingTheWorkingClientAndClosingTheSilentOneAtTheDeadline() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/single.sock"
            let report = LoopHarness.run { harness in
                let drain = Subject<UnixSocket.DrainRequest>()
                let server = try harness.record(UnixSocket.serve(path: path, drain: drain), label: "server")
                try waitForListening(server, path)
                let working = try UnixBlockingClient(path: path)
                defer { working.close() }
                let silent = try UnixBlockingClient(path: path)
                defer { silent.close() }
                let connections = try waitForAcceptedUnix(server, 2)
                try harness.onLoop {
                    _ = connections[0].bytes.subscribe(next: { connections[0].send($0) }, completed: { connections[0].close() })
                }
                // Long beside the working client's echo, which must end before it even on a busy machine.
                let deadline = Duration.seconds(3)
                let began = ContinuousClock.now
                drain.sendNext(.graceful(timeout: deadline))
                try server.wait(for: ".draining") { $0.contains { if case .next(.draining(open: 2)) = $0 { true } else { false } } }
                XCTAssertNil(fileType(path), "the socket file is still there during the drain")
                let message = bytePattern(100_000, seed: 3)
                try working.sendAll(message)
                XCTAssertTrue(try working.receive(exactly: message.count) == message, "the echo during the drain")
                working.shutdownWrite()
                XCTAssertEqual(try working.receiveUntilEOF(), [])
                XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
                XCTAssertGreaterThanOrEqual(ContinuousClock.now - began, deadline, "the silent client was closed before the deadline")
                XCTAssertEqual(silent.receiveUntilEnd().end, .endOfFile, "the silent client was closed at the deadline")
            }
            XCTAssertTrue(report.isClean, "\(report.problems)")
        }
    }

    // MARK: - support

    /// `idleTimeout` on a group: silent clients are closed with `ETIMEDOUT` on whichever loop they
    /// live, the second loop's share (which only homes connections) checking its own.
    func testTheIdleTimeoutClosesSilentConnectionsOnEveryLoop() throws {
        try withGroupServer { harness, group, path in
            let ends = Locked<[String]>([])
            let options = UnixSocketOptions(idleTimeout: .milliseconds(300))
            let server = try harness.record(UnixSocket.serve(path: path, options: options, on: group, onAccepted: { connection in
                let loop = connection.loop.name
                _ = connection.bytes.subscribe(error: { error in
                    ends.withLock { $0.append("\(loop): \((error as? UVError)?.name ?? "\(error)")") }
                })
            }), label: "server")
            try waitForListening(server, path)
            var clients: [UnixBlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<4 { clients.append(try UnixBlockingClient(path: path)) }
            try harness.wait(for: "4 connections closed for idleness") { ends.current.count == 4 }
            XCTAssertTrue(ends.current.allSatisfy { $0.hasSuffix(": ETIMEDOUT") }, "\(ends.current)")
            XCTAssertEqual(Set(ends.current.map { $0.components(separatedBy: ":")[0] }).count, 2,
                           "not closed on both loops: \(ends.current)")
            for client in clients { XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile) }
            XCTAssertNil(server.terminal, "the server goes on")
        }
    }

    private func waitForListening(_ server: EventRecorder<UnixSocket.Event>, _ path: String) throws {
        let first = try server.waitForValues(1)[0]
        guard case .listening(let listening) = first, listening == path else {
            throw TestFailure("the first event was \(first), not .listening(\(path))")
        }
    }

    /// Runs `body` with a harness, a two-loop group and a socket path in a new temporary
    /// directory, then checks every group loop as the harness checks its own: the recorders
    /// disposed, no handle left open, `uv_loop_close` 0.
    private func withGroupServer(file: StaticString = #filePath, line: UInt = #line,
                                 _ body: (LoopHarness, EventLoopGroup, String) throws -> Void) throws {
        try withTemporaryDirectory { directory in
            let group = EventLoopGroup(loopCount: 2, name: "served")
            let report = LoopHarness.run(file: file, line: line) { harness in
                defer {
                    // The harness disposes its recorders only at its end: this runs first, so dispose here.
                    _ = harness.finish()
                    for loop in group.loops where !loop.isShutDown {
                        do {
                            try harness.wait(for: "loop \(loop.name) has no open handle") { (try? loop.openHandles()) == [] }
                        } catch {
                            XCTFail("\(error): \((try? loop.openHandles()) ?? [])", file: file, line: line)
                        }
                    }
                    for loop in group.loops {
                        do {
                            let report = try loop.tryShutdown()
                            XCTAssertEqual(report.loopCloseResult, 0, "uv_loop_close on \(loop.name)", file: file, line: line)
                        } catch {
                            XCTFail("shutting \(loop.name) down: \(error)", file: file, line: line)
                        }
                    }
                }
                try body(harness, group, directory + "/group.sock")
            }
            XCTAssertTrue(report.isClean, "\(report.problems)", file: file, line: line)
        }
    }
}
