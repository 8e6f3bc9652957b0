import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Clients that open a TCP connection to a TLS server and never send a ClientHello: each holds a
/// handshake timer (no `SSL`) until the timeout closes it; what they hold is bounded, and freed when they go.
final class TLSHandshakeMemoryTests: XCTestCase {
    /// 2,000 silent clients in this process: while they wait, the live heap grows by at most 2 KiB per
    /// client (the connection, its extras, its timer and a `TLSSession` with no `SSL` yet: 1,297 bytes
    /// in this debug build; 10.2 KiB when the `SSL` was made at accept, 56 KiB when the server also
    /// took a first handshake step, which made OpenSSL allocate its buffers). Each is closed at the
    /// timeout, not before, with `TLSError.handshakeTimeout`; the client reads EOF; and the heap comes
    /// back to within 128 bytes per client of where it was (6 to 56 measured: libuv's watcher table
    /// keeps its growth).
    func testTwoThousandClientsThatNeverSendAClientHelloAreClosedAtTheTimeoutAndTheirMemoryIsFreed() throws {
        let count = 2_000
        try raiseOpenFileLimit(to: 8_192)
        var clients: [Int32] = []
        clients.reserveCapacity(count)
        defer { for client in clients { close(client) } }
        // Long enough that opening the clients on a busy machine rarely meets it; the measurement copes if it does.
        try assertSilentClientsTimeOut(count: count, timeout: .seconds(6)) { port in
            try openSilentClients(count, to: port, into: &clients)
        } endOfFileCount: {
            var buffer: UInt8 = 0
            return clients.filter { recv($0, &buffer, 1, 0) == 0 }.count
        }
    }

    /// 10,000 silent clients, held by a child process (this one holds the server's 10,000 sockets:
    /// both together would pass a hard limit of 20,000 descriptors): the same bounds as for 2,000, so
    /// what a silent client costs does not grow with their number, and every one times out.
    func testTenThousandClientsThatNeverSendAClientHelloAllTimeOutWithBoundedMemory() throws {
        let count = 10_000
        let needed = count + 512
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        if limit.rlim_max != rlim_t.max && limit.rlim_max < rlim_t(needed) {
            throw XCTSkip("the hard limit on open descriptors (RLIMIT_NOFILE) is \(limit.rlim_max): the server's \(count) sockets need \(needed)")
        }
        try raiseOpenFileLimit(to: needed)
        var child: ToolProcess?
        defer { child?.stop() }
        // Opening 10,000 clients takes seconds on a busy machine: most must still be waiting when measured.
        try assertSilentClientsTimeOut(count: count, timeout: .seconds(25)) { port in
            let started = try startPython(pythonSilentClients, ["\(port)", "\(count)"])
            child = started
            guard let line = started.readLine(containing: "OPEN"), line.contains("OPEN \(count)") else {
                throw TestFailure("the client process did not open its clients: \(started.finish().text)")
            }
        } endOfFileCount: {
            guard let child else { return 0 }
            child.input.fileHandleForWriting.write(Data("check\n".utf8))
            guard let line = child.readLine(containing: "EOF"),
                  let eofs = Int(line.split(separator: " ")[1].trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw TestFailure("the client process did not count its ends: \(child.finish().text)")
            }
            return eofs
        }
    }

    /// Counts handshake failures without keeping them (an array would cost per connection too).
    private final class Failures: Sendable {
        let timeouts = Atomic<Int>(0)
        let others = Atomic<Int>(0)
    }

    /// Serves TLS with `timeout`, lets `openClients(port)` connect `count` clients that send nothing,
    /// and checks the heap per waiting client (at most 2 KiB), that every one times out (not before
    /// the timeout, and with `handshakeTimeout`), that `endOfFileCount()` clients read EOF, and that
    /// the heap comes back to within 128 bytes per client.
    private func assertSilentClientsTimeOut(count: Int, timeout: Duration, openClients: (Int) throws -> Void,
                                            endOfFileCount: () throws -> Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let certificates = try TLSTestCertificates.shared()
        let tls = try certificates.server(handshakeTimeout: timeout)
        let report = LoopHarness.run(timeout: .seconds(300)) { harness in
            let failures = Failures()
            let events = TCPServer.serve(host: "127.0.0.1", port: 0, backlog: 4_096, tls: tls, on: harness.loop,
                                         onHandshakeFailure: { error in
                                             if error == TLSError.handshakeTimeout {
                                                 failures.timeouts.wrappingAdd(1, ordering: .relaxed)
                                             } else {
                                                 failures.others.wrappingAdd(1, ordering: .relaxed)
                                             }
                                         })
            let server = try harness.record(events, label: "tls server")
            guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
            // Accepted sockets only (the handshake timers may be handles too).
            let openSockets = { (try? harness.loop.openHandles().filter { $0.kind == "tcp" }.count) ?? -1 }
            let handlesBefore = openSockets()
            let heapBefore = try harness.onLoop { ruv_test_live_heap_bytes() }
            let began = ContinuousClock.now

            try openClients(address.port)
            // Every client accepted: in its handshake (a handle open) or, on a slow machine, timed out already.
            var waiting = 0
            try harness.wait(for: "\(count) clients accepted", timeout: .seconds(300)) {
                waiting = openSockets() - handlesBefore
                return waiting + failures.timeouts.load(ordering: .relaxed) == count
            }
            let heapWaiting = try harness.onLoop { ruv_test_live_heap_bytes() }
            XCTAssertGreaterThan(waiting, 0, "no client was still waiting when measured", file: file, line: line)
            let perClient = (Double(heapWaiting) - Double(heapBefore)) / Double(max(waiting, 1))
            print("TLS client waiting for its handshake: \(Int(perClient)) live heap bytes each (\(waiting) of \(count) waiting)")
            XCTAssertLessThanOrEqual(perClient, 2_048, "a client in its handshake costs \(perClient) heap bytes", file: file, line: line)
            XCTAssertGreaterThan(perClient, 500, "less than the connection itself: the measurement is broken", file: file, line: line)

            try harness.wait(for: "every client timed out", timeout: .seconds(300)) {
                failures.timeouts.load(ordering: .relaxed) == count
            }
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - began, timeout, "not before the timeout", file: file, line: line)
            XCTAssertEqual(failures.others.load(ordering: .relaxed), 0, "every failure was the timeout", file: file, line: line)
            try harness.wait(for: "every connection closed") { openSockets() == handlesBefore }
            XCTAssertEqual(try endOfFileCount(), count, "every client reads EOF: the server closed it", file: file, line: line)
            let heapAfter = try harness.onLoop { ruv_test_live_heap_bytes() }
            let leftPerClient = (Double(heapAfter) - Double(heapBefore)) / Double(count)
            print("TLS clients timed out: \(Int(leftPerClient)) live heap bytes left each")
            XCTAssertLessThanOrEqual(leftPerClient, 128, "what the clients held was freed", file: file, line: line)
            XCTAssertEqual(server.values.count, 1, "no connection was sent, only .listening", file: file, line: line)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)", file: file, line: line)
    }
}

/// A Python process holding silent TCP clients: raises its descriptor limit to the hard limit,
/// connects `count` clients to 127.0.0.1:port that send nothing, prints "OPEN n"; at a line on its
/// input, reads one byte from each and prints "EOF n", how many read the end of the stream.
/// Arguments: port, count.
let pythonSilentClients = """
import resource, socket, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
print("OPEN", len(clients), flush=True)
sys.stdin.readline()
ends = 0
for client in clients:
    client.settimeout(60)
    try:
        if client.recv(1) == b"":
            ends += 1
    except OSError:
        pass
print("EOF", ends, flush=True)
"""
