import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The echo sample's server code (EchoServerKit), driven in-process on the loop harness.
final class EchoServerTests: XCTestCase {
    /// 100 clients × 100 round trips each, all on the harness loop, every echoed byte compared.
    func testAHundredClientsEachSendAHundredMessagesAndGetEveryByteBack() throws {
        let clients = 100, messages = 100
        try checked { harness in
            let (server, port) = try startEcho(harness)
            let results = Locked<[Int: Result<Int, TestFailure>]>([:])
            let drivers = (0..<clients).map { EchoClientDriver(index: $0, messages: messages, results: results) }
            let boxed = UncheckedBox(drivers)
            try harness.onLoop { for driver in boxed.value { driver.start(port: port) } }
            try harness.wait(for: "every client to finish", timeout: .seconds(60)) { results.current.count == clients }

            let outcome = results.current
            for index in 0..<clients {
                switch outcome[index] {
                case .success(let bytes)?: XCTAssertEqual(bytes, drivers[index].expectedTotal, "client \(index)")
                case .failure(let failure)?: XCTFail("client \(index): \(failure)")
                case nil: XCTFail("client \(index) did not finish")
                }
            }
            try server.wait(for: "every client reported gone") { events in
                events.filter { if case .next(.disconnected) = $0 { return true } else { return false } }.count == clients
            }
            let byPeerBytes = server.values.compactMap { event -> Int? in
                if case .disconnected(_, let bytes, let error, _) = event, error == nil { return bytes }
                return nil
            }
            XCTAssertEqual(byPeerBytes.sorted(), drivers.map(\.expectedTotal).sorted(), "the server echoed exactly what each client sent")
            XCTAssertEqual(server.values.filter { if case .connected = $0 { return true } else { return false } }.count, clients)
            try harness.wait(for: "every client connection closed") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// A client that resets mid-stream is reported with its error; the server keeps serving others.
    func testAClientThatResetsIsDroppedAndTheServerCarriesOn() throws {
        try checked { harness in
            let (server, port) = try startEcho(harness)
            let resetter = try BlockingClient(port: port)
            try resetter.sendAll(bytePattern(1000, seed: 1))
            XCTAssertEqual(try resetter.receive(exactly: 1000), bytePattern(1000, seed: 1))
            resetter.reset()
            try server.wait(for: "the reset client reported") { events in
                events.contains { if case .next(.disconnected(_, 1000, let error?, _)) = $0 { return (error as? UVError)?.name == "ECONNRESET" } else { return false } }
            }

            let next = try BlockingClient(port: port)
            defer { next.close() }
            try next.sendAll(bytePattern(10, seed: 2))
            XCTAssertEqual(try next.receive(exactly: 10), bytePattern(10, seed: 2))
        }
    }

    /// A client that sends megabytes while reading its echo concurrently gets every byte back, in order.
    func testAClientSendingMegabytesGetsThemAllBack() throws {
        try checked { harness in
            let (server, port) = try startEcho(harness)
            let client = try BlockingClient(port: port)
            let payload = bytePattern(8 << 20, seed: 3)
            let echoed = Locked<Result<[UInt8], any Error>?>(nil)
            Thread {
                let result = Result<[UInt8], any Error> { try client.receive(exactly: payload.count) }
                echoed.withLock { $0 = result }
            }.start()
            try client.sendAll(payload)
            try harness.wait(for: "8 MiB echoed", timeout: .seconds(60)) { echoed.current != nil }
            XCTAssertTrue(try echoed.current!.get() == payload, "the echo differs from what was sent")
            client.shutdownWrite()
            XCTAssertEqual(try client.receiveUntilEOF(), [], "after the client half-closes the server closes")
            client.close()
            try server.wait(for: "the client reported gone") { events in
                events.contains { if case .next(.disconnected(_, 8 << 20, nil, _)) = $0 { return true } else { return false } }
            }
        }
    }

    /// Disposing the server's subscription closes every client, silent ones included.
    func testDisposingTheServerClosesSilentClients() throws {
        try checked { harness in
            let (server, port) = try startEcho(harness)
            let silent = try (0..<3).map { _ in try BlockingClient(port: port) }
            try server.wait(for: "three clients") { events in
                events.contains { if case .next(.connected(_, 3)) = $0 { return true } else { return false } }
            }
            server.dispose()
            for client in silent {
                XCTAssertEqual(try client.receiveUntilEOF(), [], "EOF for a silent client")
                client.close()
            }
            XCTAssertEqual(try harness.loop.openHandles(), [])
        }
    }

    /// With maxConnections 3, the fourth and fifth clients are reset at once and reported as
    /// refused; the three served clients are echoed, and once one leaves a newcomer is served.
    func testClientsBeyondTheConnectionLimitAreRefusedAndTheServerCarriesOn() throws {
        try checked { harness in
            let (server, port) = try startEcho(harness, options: TCPOptions(maxConnections: 3))
            var served: [BlockingClient] = []
            for index in 0..<3 {
                let client = try BlockingClient(port: port)
                try client.sendAll(bytePattern(100, seed: index))
                XCTAssertEqual(try client.receive(exactly: 100), bytePattern(100, seed: index), "served client \(index)")
                served.append(client)
            }
            for index in 3..<5 {
                // The receive timeout only turns a hang into a failure: the read must end because
                // the server ended the connection (EOF or ECONNRESET), not because the timeout ran out.
                let refused = try BlockingClient(port: port, receiveTimeout: .seconds(20))
                let (bytes, end) = refused.receiveUntilEnd()
                XCTAssertEqual(bytes, [], "refused client \(index) gets no echo")
                XCTAssertTrue(end.endedByPeer, "refused client \(index) was left hanging: the read ended with \(end)")
                // Answered while the server runs and its three clients are still connected, before
                // the test does anything else: not by a teardown.
                XCTAssertNil(server.terminal, "the server ended before refused client \(index) was answered")
                refused.close()
            }
            try server.wait(for: "two refusals") { events in
                events.filter { if case .next(.refused(_, 3)) = $0 { return true } else { return false } }.count == 2
            }
            served[0].close()
            try server.wait(for: "the first client gone") { events in
                events.contains { if case .next(.disconnected(_, _, _, 2)) = $0 { return true } else { return false } }
            }
            let newcomer = try BlockingClient(port: port)
            try newcomer.sendAll(bytePattern(10, seed: 9))
            XCTAssertEqual(try newcomer.receive(exactly: 10), bytePattern(10, seed: 9), "a slot freed up")
            newcomer.close()
            for client in served.dropFirst() { client.close() }
            XCTAssertEqual(server.values.filter { if case .connected = $0 { return true } else { return false } }.count, 4)
        }
    }

    private func startEcho(_ harness: LoopHarness, options: TCPOptions = TCPOptions()) throws -> (EventRecorder<EchoEvent>, Int) {
        let server = try harness.record(EchoServer.run(port: 0, options: options), label: "echo server")
        let first = try server.waitForValues(1)[0]
        guard case .listening(let address) = first else { throw TestFailure("first event: \(first)") }
        return (server, address.port)
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(timeout: .seconds(30), body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// One ping-pong client on the harness loop: sends a message, waits for its exact echo, sends the next.
final class EchoClientDriver: @unchecked Sendable {
    // Everything but `results` is touched on the harness loop thread only; `results` is locked.
    let index: Int
    let messages: Int
    private let results: Locked<[Int: Result<Int, TestFailure>]>
    private var connect: (any Disposable)?
    private var reading: (any Disposable)?
    private var connection: TCPConnection?
    private var sent = 0
    private var current: [UInt8] = []
    private var pending: [UInt8] = []
    private var total = 0

    init(index: Int, messages: Int, results: Locked<[Int: Result<Int, TestFailure>]>) {
        self.index = index
        self.messages = messages
        self.results = results
    }

    /// The bytes this client sends in all: message m of client c is 1 + (c·7 + m·13) % 200 bytes long.
    var expectedTotal: Int { (0..<messages).reduce(0) { $0 + length(of: $1) } }

    private func length(of message: Int) -> Int { 1 + (index * 7 + message * 13) % 200 }

    func start(port: Int) {
        connect = TCP.connect(host: "127.0.0.1", port: port).subscribe(
            next: { [self] connection in
                self.connection = connection
                reading = connection.bytes.subscribe(
                    next: { [self] chunk in received(chunk) },
                    error: { [self] error in finish(.failure(TestFailure("read failed after \(sent) messages: \(error)"))) },
                    completed: { [self] in
                        if sent == messages && pending.isEmpty {
                            finish(.success(total))
                        } else {
                            finish(.failure(TestFailure("EOF after \(sent) messages")))
                        }
                    })
                sendNext()
            },
            error: { [self] error in finish(.failure(TestFailure("connect failed: \(error)"))) })
    }

    private func sendNext() {
        current = bytePattern(length(of: sent), seed: index * 1000 + sent)
        sent += 1
        connection?.send(current)
    }

    private func received(_ chunk: [UInt8]) {
        pending.append(contentsOf: chunk)
        guard pending.count >= current.count else { return }
        guard pending.count == current.count, pending == current else {
            finish(.failure(TestFailure("message \(sent - 1): got \(pending.count) bytes that differ from the \(current.count) sent")))
            return
        }
        total += pending.count
        pending.removeAll(keepingCapacity: true)
        if sent < messages {
            sendNext()
        } else {
            // Done: half-close; the server closes after its (empty) remainder, and `bytes` completes.
            connection?.shutdown()
        }
    }

    private func finish(_ result: Result<Int, TestFailure>) {
        results.withLock { if $0[index] == nil { $0[index] = result } }
        connection?.close()
        reading?.dispose()
        connect?.dispose()
    }
}
