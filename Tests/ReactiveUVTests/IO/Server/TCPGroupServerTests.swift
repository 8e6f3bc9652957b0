import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `TCPServer.serve/listen(on: group)`: one server on every loop of an `EventLoopGroup`.
///
/// The subscriber is recorded on the harness's loop (not one of the group's), so every
/// event is hopped to it; where a connection lives is observed in `onAccepted`, which runs
/// on the connection's loop. Each group loop is checked at the end as the harness checks
/// its own: no handle left open, `uv_loop_close` 0 (`withGroup`).
final class TCPGroupServerTests: XCTestCase {
    /// 32 clients of a two-loop server land on both loops, each connection is served on its
    /// own loop (`onAccepted` runs there, and its `bytes` subscription made there echoes).
    ///
    /// Not deterministic by design, but as good as: with `SO_REUSEPORT` the kernel picks the
    /// listening socket by a hash of each connection's address pair, and the 32 clients come
    /// from 32 distinct ephemeral ports, so all 32 land on one loop with probability
    /// 2 × 2^-32 ≈ 5 × 10^-10.
    func testConnectionsLandOnBothLoopsAndAreServedOnTheirOwnLoop() throws {
        withGroup(loops: 2) { harness, group in
            let homes = Locked<[String]>([])
            let wrongThread = Locked<[String]>([])
            let server = try harness.record(TCPServer.serve(port: 0, on: group, onAccepted: { connection in
                let current = EventLoop.current?.name ?? "no loop"
                homes.withLock { $0.append(current) }
                if current != connection.loop.name { wrongThread.withLock { $0.append("\(current) for \(connection.loop.name)") } }
                // Subscribed here, on the connection's loop: its home is that loop.
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }), label: "server")
            let port = try listeningPort(server)
            var clients: [BlockingClient] = []
            defer { for client in clients { client.close() } }
            for index in 0..<32 {
                let client = try BlockingClient(port: port)
                clients.append(client)
                let message = bytePattern(64, seed: index)
                try client.sendAll(message)
                XCTAssertEqual(try client.receive(exactly: 64), message, "client \(index)'s echo")
            }
            try harness.wait(for: "32 connections accepted") { homes.current.count == 32 }
            XCTAssertEqual(Set(homes.current), Set(group.loops.map(\.name)), "every loop served some of the 32 clients")
            XCTAssertEqual(wrongThread.current, [], "onAccepted ran off the connection's loop")
            // `.accepted` reaches the subscriber on its home (the harness loop), hopped there.
            try server.waitForValues(33)
            XCTAssertTrue(server.recorded.allSatisfy { $0.loopName == harness.loop.name })
        }
    }

    /// `.listening` comes once, first, with the real port; every loop's socket has that port;
    /// disposing closes every loop's listener and every connection (the clients read EOF).
    func testListeningOnceThenDisposingClosesEveryLoopsListenerAndConnections() throws {
        withGroup(loops: 2) { harness, group in
            let server = try harness.record(TCPServer.serve(port: 0, on: group), label: "server")
            let port = try listeningPort(server)
            XCTAssertNotEqual(port, 0)
            var clients: [BlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<16 { clients.append(try BlockingClient(port: port)) }
            let connections = try waitForAccepted(server, 16)
            XCTAssertEqual(server.values.filter { if case .listening = $0 { true } else { false } }.count, 1)
            XCTAssertEqual(Set(connections.compactMap(\.localAddress?.port)), [port])
            for loop in group.loops {
                XCTAssertTrue(try loop.openHandles().contains { $0.kind == "tcp" && ($0.label ?? "").contains("tcp listener") },
                              "loop \(loop.name) listens")
            }
            server.dispose()
            for (index, client) in clients.enumerated() {
                XCTAssertTrue(client.receiveUntilEnd().end.endedByPeer, "client \(index) was closed by the server")
            }
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) closed everything") { (try? loop.openHandles()) == [] }
            }
        }
    }

    /// `maxConnections` counts across the group: with a limit of 2, exactly 2 of 20 clients are
    /// kept however the kernel spread them (20 clients all on one loop: probability 2^-19).
    func testMaxConnectionsCountsAcrossTheGroup() throws {
        withGroup(loops: 2) { harness, group in
            let acceptedOn = Locked<Set<String>>([])
            let server = try harness.record(TCPServer.serve(port: 0, options: TCPOptions(maxConnections: 2), on: group,
                                                            onAccepted: { connection in acceptedOn.withLock { _ = $0.insert(connection.loop.name) } }))
            let port = try listeningPort(server)
            var clients: [BlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<20 { clients.append(try BlockingClient(port: port)) }
            try server.waitForValues(21)
            let refused = server.values.compactMap { event -> Int? in if case .refused(_, let open) = event { open } else { nil } }
            XCTAssertEqual(accepted(server).count, 2)
            XCTAssertEqual(refused, Array(repeating: 2, count: 18), "each refusal names the group's count")
        }
    }

    /// A port another socket listens on is `EADDRINUSE`, whether that socket is an ordinary
    /// server (no `SO_REUSEPORT`) or another group server (which would otherwise share it).
    func testAPortInUseIsEADDRINUSEAlsoAgainstAnotherGroupServer() throws {
        withGroup(loops: 2) { harness, group in
            let (single, port) = try startServer(harness)
            let second = try harness.record(TCPServer.serve(port: port, on: group), label: "group on a used port")
            _ = try second.waitForTermination()
            XCTAssertEqual(errorName(second), "EADDRINUSE")
            XCTAssertTrue("\(second.terminal!)".contains("in use"), "\(second.terminal!)")
            single.dispose()

            let first = try harness.record(TCPServer.serve(port: 0, on: group), label: "group")
            let groupPort = try listeningPort(first)
            let other = try harness.record(TCPServer.listen(port: groupPort, on: group), label: "second group")
            _ = try other.waitForTermination()
            XCTAssertEqual(errorName(other), "EADDRINUSE")
            let probe = try BlockingClient(port: groupPort)  // the first group server still listens
            probe.close()
            try first.waitForValues(2)
        }
    }

    /// A group with a loop that has shut down is refused before anything is bound, naming that loop.
    func testAGroupWithALoopThatHasShutDownFailsNamingIt() throws {
        withGroup(loops: 2) { harness, group in
            group.loops[1].shutdown()
            let server = try harness.record(TCPServer.serve(port: 0, on: group))
            guard case .error(let error) = try server.waitForTermination() else {
                return XCTFail("the server did not fail: \(server.events)")
            }
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: group.loops[1].name))
            XCTAssertTrue(server.values.isEmpty, "nothing was sent before the error: \(server.values)")
        }
    }

    /// A loop asked to shut down, its shutdown not begun yet, is refused at the door as well,
    /// before anything is bound (no client is hashed onto a socket its loop would close and
    /// reset), as the Unix-socket group server refuses it: the two share the check.
    func testALoopAskedToShutDownFailsTheGroupBeforeAnythingIsBound() throws {
        withGroup(loops: 2) { harness, group in
            let stopping = group.loops[1]
            let first = try firstEvent(of: TCPServer.serve(port: 0, on: group), whileTheShutdownOf: stopping, isPendingOn: harness)
            guard case .error(let error) = first else { return XCTFail("the server did not fail at once: \(first)") }
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: stopping.name))
        }
    }

    /// A loop of the group shutting down ends only its share: the server keeps serving on the
    /// other loop, without an error; when the last loop shuts down the signal fails naming it.
    func testALoopShuttingDownStopsOnlyItsShare() throws {
        withGroup(loops: 2) { harness, group in
            let server = try harness.record(TCPServer.serve(port: 0, on: group, onAccepted: { connection in
                _ = connection.bytes.subscribe(next: { connection.send($0) })
            }))
            let port = try listeningPort(server)
            group.loops[1].shutdown()
            XCTAssertNil(server.terminal, "one loop's shutdown ended the server: \(server.events)")
            for index in 0..<8 {
                let client = try BlockingClient(port: port)
                defer { client.close() }
                try client.sendAll([UInt8(index)])
                XCTAssertEqual(try client.receive(exactly: 1), [UInt8(index)], "client \(index) after loop 1 shut down")
            }
            XCTAssertTrue(accepted(server).allSatisfy { $0.loop === group.loops[0] })
            XCTAssertNil(server.terminal)
            group.loops[0].shutdown()
            guard case .error(let error) = try server.waitForTermination() else {
                return XCTFail("the server did not fail when its last loop shut down: \(server.events)")
            }
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: group.loops[0].name))
        }
    }

    /// The streams guide's group example is this code, and it serves: a client's bytes come back,
    /// and disposing leaves every group loop with nothing open.
    func testTheStreamsGuideGroupExampleIsThisCodeAndEchoes() throws {
        try assertDocumentBlock("docs/guides/streams.md", containing: "let group = EventLoopGroup(loopCount: 2)", matches: "GUIDE-STREAMS-GROUP")
        let port = try unusedPort()
        // GUIDE-STREAMS-GROUP-BEGIN
        // Each loop listens on the port; each client is served on the loop that accepted it.
        let group = EventLoopGroup(loopCount: 2)
        let server = TCPServer.serve(port: port, on: group, onAccepted: { connection in
            // On the connection's own loop: its bytes are read and echoed there.
            connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
        }).subscribe(
            next: { event in if case .listening(let address) = event { print("listening on", address) } },
            error: { print("cannot serve:", $0) })
        // GUIDE-STREAMS-GROUP-END
        LoopHarness.run { harness in
            var client: BlockingClient?
            try harness.wait(for: "the server to listen") {
                client = try? BlockingClient(port: port)
                return client != nil
            }
            try client!.sendAll(Array("hello".utf8))
            XCTAssertEqual(try client!.receive(exactly: 5), Array("hello".utf8))
            client!.shutdownWrite()
            XCTAssertEqual(try client!.receiveUntilEOF(), [], "the server closed after the client's EOF")
            client!.close()
            server.dispose()
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) has nothing open") { (try? loop.openHandles()) == [] }
            }
        }
        let reports = try group.tryShutdown()
        XCTAssertEqual(reports.map(\.loopCloseResult), [0, 0])
    }

    /// A drain on a two-loop group: every loop stops accepting (a new client is refused),
    /// `.draining` counts the group's 16 clients, each still gets its echo, and the server
    /// completes only after the last of them left; no listener is left on any loop.
    func testDrainOnAGroupStopsEveryLoopAndCompletesAfterTheLastClient() throws {
        withGroup(loops: 2) { harness, group in
            let drain = Subject<TCPServer.DrainRequest>()
            let homes = Locked<Set<String>>([])
            let server = try harness.record(TCPServer.serve(port: 0, on: group, onAccepted: { connection in
                homes.withLock { _ = $0.insert(connection.loop.name) }
                _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
            }, drain: drain), label: "server")
            let port = try listeningPort(server)
            var clients: [BlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<16 { clients.append(try BlockingClient(port: port)) }
            try waitForAccepted(server, 16)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            try server.wait(for: ".draining") { $0.count == 18 }
            guard case .draining(let open) = server.values[17] else { return XCTFail("\(server.values[17])") }
            XCTAssertEqual(open, 16)
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) stopped listening") {
                    !((try? loop.openHandles()) ?? []).contains { ($0.label ?? "").contains("tcp listener") }
                }
            }
            XCTAssertThrowsError(try BlockingClient(port: port), "a client connected after the drain began") { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
            }
            // Whatever the shares sent the harness loop by now has been recorded.
            for loop in group.loops { try loop.tryExecute { harness.loop.execute {} } }
            try harness.onLoop {}
            for (index, client) in clients.enumerated() {
                XCTAssertNil(server.terminal, "completed with \(clients.count - index) client(s) still connected")
                let message = bytePattern(1000, seed: index)
                try client.sendAll(message)
                XCTAssertEqual(try client.receive(exactly: message.count), message, "client \(index)'s echo during the drain")
                client.shutdownWrite()
                XCTAssertEqual(try client.receiveUntilEOF(), [])
            }
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertEqual(homes.current, Set(group.loops.map(\.name)), "both loops had clients to drain")
        }
    }

    /// `.draining` goes out only once every loop's listening socket is closed: with one loop
    /// held busy, the event waits for it, so a client connecting after the event is refused.
    func testDrainingIsSentOnlyOnceEveryLoopHasStoppedAccepting() throws {
        withGroup(loops: 2) { harness, group in
            let drain = Subject<TCPServer.DrainRequest>()
            let server = try harness.record(TCPServer.serve(port: 0, on: group, drain: drain), label: "server")
            let port = try listeningPort(server)
            let busy = group.loops[1]
            let release = try holdBusy(busy)
            drain.sendNext(.graceful(timeout: .seconds(60)))
            // The free loop has taken its drain request (it runs in order) and the harness loop has
            // recorded whatever it sent on.
            try group.loops[0].tryExecute { harness.loop.execute {} }
            try harness.onLoop {}
            XCTAssertFalse(server.values.contains { if case .draining = $0 { true } else { false } },
                           ".draining was sent while a loop still listened")
            release.signal()
            try server.wait(for: ".draining") { events in events.contains { if case .next(.draining) = $0 { true } else { false } } }
            for attempt in 0..<16 {
                XCTAssertThrowsError(try BlockingClient(port: port), "client \(attempt) connected after .draining") { error in
                    XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
                }
            }
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
        }
    }

    /// `TCPOptions.idleTimeout` on a group: each loop's share checks its own connections, so
    /// silent clients on both loops are closed (each client reads EOF) and the server goes on.
    func testIdleTimeoutClosesSilentClientsOnEveryLoop() throws {
        withGroup(loops: 2) { harness, group in
            let homes = Locked<Set<String>>([])
            let server = try harness.record(TCPServer.serve(port: 0, options: TCPOptions(idleTimeout: .milliseconds(200)),
                                                            on: group, onAccepted: { connection in
                homes.withLock { _ = $0.insert(connection.loop.name) }
            }), label: "server")
            let port = try listeningPort(server)
            var clients: [BlockingClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<16 { clients.append(try BlockingClient(port: port)) }
            let connections = try waitForAccepted(server, 16)
            for (index, client) in clients.enumerated() {
                XCTAssertEqual(client.receiveUntilEnd().end, .endOfFile, "client \(index) was closed for idleness")
            }
            try harness.wait(for: "every connection closed") { connections.allSatisfy { !$0.isOpen } }
            XCTAssertEqual(homes.current, Set(group.loops.map(\.name)), "both loops had silent clients")
            XCTAssertNil(server.terminal, "the server goes on")
        }
    }

    /// A drain asked while the group server still resolves its host (nothing bound yet) ends it
    /// at once, and says so as every drain does (a one-loop server too): `.draining(open: 0)`,
    /// then the completion.
    func testADrainBeforeAnythingIsBoundSaysDrainingThenCompletes() throws {
        withGroup(loops: 2) { harness, group in
            // A name, not an address: the lookup runs on the pool, so the request comes first.
            let server = try harness.record(TCPServer.serve(host: "localhost", port: 0, on: group, drain: .return(.force)),
                                            label: "server")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            guard server.values.count == 1, case .draining(open: 0) = server.values[0] else {
                return XCTFail("not .draining(open: 0) alone before the end: \(server.events)")
            }
        }
    }

    /// A drain asked while a loop of the group is closing, after that loop's shutdown ended its
    /// share (and before the loop closed, so the request still runs there): the share counts as
    /// drained, `.draining` is sent, and the server completes once the other loop has drained.
    /// (That share ignored the request, and the server waited for it for ever.)
    ///
    /// To ask at that moment, a one-loop server on the closing loop, opened before the group
    /// server (so the loop's shutdown closes it after the group's share), sends the request
    /// from its shutdown error, on that loop's thread, and holds that thread until the first
    /// loop has handed the request on to it (the first loop never waits for it).
    func testADrainAskedWhileALoopClosesAfterItsShareEndedCompletes() throws {
        withGroup(loops: 2) { harness, group in
            let closing = group.loops[1]
            let coordinator = group.loops[0]
            let drain = Subject<TCPServer.DrainRequest>()
            let handedOn = Locked<Bool?>(nil)
            let bystander = Locked<(any Disposable)?>(nil)
            let askDuringTheClose: @Sendable (any Error) -> Void = { _ in
                drain.sendNext(.graceful(timeout: .seconds(60)))
                // The request hopped to the first loop (the coordinator follows it there); this runs after it.
                let passed = DispatchSemaphore(value: 0)
                coordinator.execute { passed.signal() }
                let result: DispatchTimeoutResult = passed.wait(timeout: .now() + 10)
                handedOn.withLock { $0 = result == .success }
            }
            let opened = DispatchSemaphore(value: 0)
            try closing.tryExecute {
                let subscription: any Disposable = TCPServer.serve(port: 0, on: closing).subscribeError(askDuringTheClose)
                bystander.withLock { $0 = subscription }
                opened.signal()
            }
            opened.wait()
            let server = try harness.record(TCPServer.serve(port: 0, on: group, drain: drain), label: "server")
            _ = try listeningPort(server)
            closing.shutdown()
            XCTAssertEqual(handedOn.current, true, "the first loop did not take the request while loop 1 closed")
            XCTAssertTrue(try server.waitForTermination().isCompleted, "\(server.events)")
            XCTAssertEqual(server.values.count, 2, "\(server.events)")
            guard case .draining(open: 0) = server.values.last else { return XCTFail("no .draining before the end: \(server.events)") }
            bystander.current?.dispose()
        }
    }

    // MARK: - support

    private func listeningPort(_ server: EventRecorder<TCPServer.Event>) throws -> Int {
        let first = try server.waitForValues(1)[0]
        guard case .listening(let address) = first else { throw TestFailure("the first event was \(first), not .listening") }
        return address.port
    }

    /// Runs `body` with a harness and a group, then checks every group loop as the harness
    /// checks its own: the recorders disposed, no handle left open, `uv_loop_close` 0.
    private func withGroup(loops count: Int, file: StaticString = #filePath, line: UInt = #line,
                           _ body: (LoopHarness, EventLoopGroup) throws -> Void) {
        let group = EventLoopGroup(loopCount: count, name: "served")
        LoopHarness.run(file: file, line: line) { harness in
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
                    let wasShutDown = loop.isShutDown
                    do {
                        let report = try loop.tryShutdown()
                        if !wasShutDown {
                            XCTAssertEqual(report.closedHandles, [], "loop \(loop.name)", file: file, line: line)
                        }
                        XCTAssertEqual(report.loopCloseResult, 0, "uv_loop_close on \(loop.name)", file: file, line: line)
                    } catch {
                        XCTFail("shutting \(loop.name) down: \(error)", file: file, line: line)
                    }
                }
            }
            try body(harness, group)
        }
    }
}
