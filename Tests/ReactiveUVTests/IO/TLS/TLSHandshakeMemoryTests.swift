import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Clients that open a TCP connection to a TLS server and never send a ClientHello: each holds a
/// handshake timer (no `SSL`) until the timeout closes it; what they hold is bounded, and freed when they go.
final class TLSHandshakeMemoryTests: XCTestCase {
    /// Counts handshake failures without keeping them (an array would cost per connection too).
    private final class Failures: Sendable {
        let timeouts = Atomic<Int>(0)
        let others = Atomic<Int>(0)
    }

    /// 2,000 silent clients: while they wait, the live heap grows by at most 2 KiB per client (the
    /// connection, its extras, its timer and a `TLSSession` with no `SSL` yet: 1,297 bytes in this
    /// debug build; 10.2 KiB when the `SSL` was made at accept, 56 KiB when the server also took a
    /// first handshake step, which made OpenSSL allocate its buffers). Each is closed at the timeout, not before, with
    /// `TLSError.handshakeTimeout`; the client reads EOF; and the heap comes back to within 128
    /// bytes per client of where it was (6 to 56 measured: libuv's watcher table keeps its growth).
    func testTwoThousandClientsThatNeverSendAClientHelloAreClosedAtTheTimeoutAndTheirMemoryIsFreed() throws {
        let count = 2_000
        try raiseOpenFileLimit(to: 8_192)
        let certificates = try TLSTestCertificates.shared()
        // Long enough that opening the clients on a busy machine rarely meets it; the measurement copes if it does.
        let timeout = Duration.seconds(6)
        let tls = try certificates.server(handshakeTimeout: timeout)
        let report = LoopHarness.run { harness in
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

            var clients: [Int32] = []
            clients.reserveCapacity(count)
            defer { for client in clients { close(client) } }
            try openSilentClients(count, to: address.port, into: &clients)
            // Every client accepted: in its handshake (a handle open) or, on a slow machine, timed out already.
            var waiting = 0
            try harness.wait(for: "\(count) clients accepted") {
                waiting = openSockets() - handlesBefore
                return waiting + failures.timeouts.load(ordering: .relaxed) == count
            }
            let heapWaiting = try harness.onLoop { ruv_test_live_heap_bytes() }
            XCTAssertGreaterThan(waiting, 0, "no client was still waiting when measured")
            let perClient = (Double(heapWaiting) - Double(heapBefore)) / Double(max(waiting, 1))
            print("TLS client waiting for its handshake: \(Int(perClient)) live heap bytes each (\(waiting) waiting)")
            XCTAssertLessThanOrEqual(perClient, 2_048, "a client in its handshake costs \(perClient) heap bytes")
            XCTAssertGreaterThan(perClient, 500, "less than the connection itself: the measurement is broken")

            try harness.wait(for: "every client timed out", timeout: .seconds(300)) {
                failures.timeouts.load(ordering: .relaxed) == count
            }
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - began, timeout, "not before the timeout")
            XCTAssertEqual(failures.others.load(ordering: .relaxed), 0, "every failure was the timeout")
            try harness.wait(for: "every connection closed") { openSockets() == handlesBefore }
            var buffer: UInt8 = 0
            for client in clients {
                XCTAssertEqual(recv(client, &buffer, 1, 0), 0, "the client reads EOF: the server closed it")
            }
            let heapAfter = try harness.onLoop { ruv_test_live_heap_bytes() }
            let leftPerClient = (Double(heapAfter) - Double(heapBefore)) / Double(count)
            print("TLS clients timed out: \(Int(leftPerClient)) live heap bytes left each")
            XCTAssertLessThanOrEqual(leftPerClient, 128, "what the clients held was freed")
            XCTAssertEqual(server.values.count, 1, "no connection was sent, only .listening")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
