import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Peer faults as a stress run against the echo sample's server, all at once from raw
/// sockets on plain threads:
/// - 200 clients reset (`SO_LINGER` 0) in mid-stream, with echo still in flight both ways;
/// - 200 half-close after sending 1 to 128 KiB and must get exactly those bytes back, then EOF;
/// - 16 send without ever reading, until TCP flow control blocks them: the server stops
///   reading them (`TCPBufferLimits`), so its live heap stays bounded;
/// - 300 connect and vanish (close at once, reset at once, or send a little and close).
/// (`STRESS_SCALE` scales the four counts.)
/// Afterwards a normal client is echoed a MiB correctly, every client the server accepted is reported gone,
/// and every handle closes (the harness checks, with `uv_loop_close` == 0).
final class PeerFaultStressTests: XCTestCase {
    private static let resetters = scaled(200, minimum: 4), halfClosers = scaled(200, minimum: 4),
        stallers = scaled(16, minimum: 2), vanishers = scaled(300, minimum: 6)
    /// 64 KiB of the pattern, shared by the clients that do not check their echo.
    private static let block = bytePattern(65_536, seed: 99)

    func testResettingHalfClosingStallingAndVanishingClientsLeaveTheServerServingAndBounded() throws {
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            let server = try harness.record(EchoServer.run(port: 0), label: "echo server")
            guard case .listening(let address)? = try server.waitForValues(1).first else {
                throw StressFailure("the server's first event was not .listening: \(server.events)")
            }
            let port = address.port
            let heapAtStart = liveHeapBytes()
            let dropsAtStart = listenDrops()
            let started = SchedulerInstant.now
            let failures = Locked<[String]>([])
            let finished = Atomic<Int>(0)
            /// The bytes each half-closing client sent, by its local port.
            let halfClosed = Locked<[Int: Int]>([:])
            let stalled = Locked<[Int]>([])  // bytes each staller pushed before it blocked
            let releaseStallers = Atomic<Bool>(false)
            let stallersGone = Atomic<Int>(0)

            for index in 0..<Self.stallers {
                spawn("staller-\(index)") {
                    do {
                        let client = try BlockingClient(port: port)
                        // A send that cannot progress for a second means flow control has stopped us.
                        try client.setSendTimeout(.seconds(1))
                        var pushed = 0
                        while pushed < 256 << 20 {
                            let sent = client.send(Self.block)
                            pushed += sent
                            if sent < Self.block.count { break }
                        }
                        stalled.withLock { $0.append(pushed) }
                        while !releaseStallers.load(ordering: .acquiring) { usleep(1000) }
                        client.reset()
                    } catch {
                        failures.withLock { $0.append("staller \(index): \(error)") }
                        stalled.withLock { $0.append(-1) }
                    }
                    stallersGone.add(1, ordering: .releasing)
                }
            }

            // The stallers go first; once all are blocked, the server holds what they pushed.
            try waitFor("\(Self.stallers) stallers to be blocked by flow control", timeout: .seconds(120),
                        observed: "\(stalled.current.count) blocked, failures: \(failures.current.prefix(5))") {
                stalled.current.count == Self.stallers
            }
            let stalledHeap = liveHeapBytes()

            for thread in 0..<4 {
                spawn("resetters-\(thread)") {
                    for index in stride(from: thread, to: Self.resetters, by: 4) {
                        do { try Self.resetMidStream(port: port, index: index) } catch {
                            failures.withLock { $0.append("resetter \(index): \(error)") }
                        }
                    }
                    finished.add(1, ordering: .releasing)
                }
                spawn("half-closers-\(thread)") {
                    for index in stride(from: thread, to: Self.halfClosers, by: 4) {
                        do {
                            let (localPort, bytes) = try Self.halfCloseAndCheck(port: port, index: index)
                            halfClosed.withLock { $0[localPort] = bytes }
                        } catch {
                            failures.withLock { $0.append("half-closer \(index): \(error)") }
                        }
                    }
                    finished.add(1, ordering: .releasing)
                }
                spawn("vanishers-\(thread)") {
                    for index in stride(from: thread, to: Self.vanishers, by: 4) {
                        do { try Self.vanish(port: port, index: index) } catch {
                            failures.withLock { $0.append("vanisher \(index): \(error)") }
                        }
                    }
                    finished.add(1, ordering: .releasing)
                }
            }
            // Then every other fault at once, sampling the live heap as they play out.
            var peakHeap = stalledHeap
            let deadline = SchedulerInstant.now + .seconds(300)
            while finished.load(ordering: .acquiring) < 12 {
                guard SchedulerInstant.now < deadline else {
                    throw StressFailure("timed out after 300 s waiting for the faulty clients: \(finished.load(ordering: .acquiring)) of 12 "
                                        + "threads done, failures: \(failures.current.prefix(5))")
                }
                peakHeap = max(peakHeap, liveHeapBytes())
                usleep(10_000)
            }
            let faultsDone = SchedulerInstant.now
            XCTAssertEqual(failures.current, [], "faulty clients did not see what they should")
            let pushed = stalled.current
            XCTAssertTrue(pushed.allSatisfy { $0 > 0 && $0 < 256 << 20 }, "stallers were not stopped by flow control: \(pushed)")
            // Each stalled connection holds at most the 1 MiB high-water mark plus one 64 KiB read
            // of queued bytes, and a bulk read's array keeps up to twice its bytes in capacity
            // (see TCPStream.allocate): 2.1 MiB, 34 MiB for 16, and 4 MiB for the rest of the
            // process. Without the pause each would hold all it pushed (9 MiB each here), and
            // the stallers would not block.
            XCTAssertLessThan(stalledHeap - heapAtStart, 38 << 20,
                              "the live heap grew by \(mebibytes(stalledHeap - heapAtStart)) while \(Self.stallers) clients stalled "
                                + "after pushing \(mebibytes(pushed.reduce(0, +))) in all")
            // While 700 more clients come and go, the client threads' own buffers (up to ~2 MiB)
            // and the connections' reads in flight add a few MiB at most.
            XCTAssertLessThan(peakHeap - heapAtStart, 44 << 20,
                              "the live heap peaked \(mebibytes(peakHeap - heapAtStart)) above the start during the faults")

            // The server still serves a normal client, byte for byte, while the stallers hang on.
            let normal = try BlockingClient(port: port)
            let payload = bytePattern(1 << 20, seed: 7)
            let echoed = Locked<Result<[UInt8], any Error>?>(nil)
            spawn("normal-reader") {
                let result = Result<[UInt8], any Error> { try normal.receive(exactly: payload.count) }
                echoed.withLock { $0 = result }
            }
            XCTAssertEqual(normal.send(payload), payload.count)
            try waitFor("a MiB echoed to a normal client", timeout: .seconds(60)) { echoed.current != nil }
            XCTAssertTrue(try echoed.current!.get() == payload, "the normal client's echo differs from what it sent")
            normal.shutdownWrite()
            XCTAssertEqual(try normal.receiveUntilEOF(), [], "after the half-close the server closes")
            normal.close()

            releaseStallers.store(true, ordering: .releasing)
            try waitFor("the stallers to reset", timeout: .seconds(30)) { stallersGone.load(ordering: .acquiring) == Self.stallers }

            // Every client the server accepted is reported gone; the half-closers with exactly their bytes.
            // A client that leaves while the kernel's accept queue is full (backlog 128) may never be
            // accepted at all: TCP drops its handshake, so the server cannot see it. That can only
            // happen to vanishers and to resetters that read nothing; the others were all served.
            // The normal client was accepted after every faulty one had left, and accepts are in
            // order, so every connection the server will ever see has been accepted by now.
            let total = Self.resetters + Self.halfClosers + Self.stallers + Self.vanishers + 1
            let mustBeSeen = Self.halfClosers + Self.stallers + 1 + (0..<Self.resetters).filter { $0 % 3 != 0 }.count
            let counts = { () -> (connected: Int, gone: Int) in
                let values = server.values
                return (values.filter { if case .connected = $0 { return true } else { return false } }.count,
                        values.filter { if case .disconnected = $0 { return true } else { return false } }.count)
            }
            try waitFor("every accepted client reported gone", timeout: .seconds(60),
                        observed: "\(counts()) of \(total); last: \(server.values.suffix(3))") {
                let (connected, gone) = counts()
                return connected == gone && connected >= mustBeSeen
            }
            let events = server.values
            let (connected, gone) = counts()
            XCTAssertLessThanOrEqual(connected, total)
            if let dropsAtStart, let drops = listenDrops() {
                // System-wide, so other processes' drops count too: it can only excuse, never accuse.
                XCTAssertLessThanOrEqual(total - connected, drops - dropsAtStart,
                                         "clients never accepted although the kernel dropped no handshake")
            }
            XCTAssertEqual(gone, connected, "clients accepted but not reported gone")
            // By the client's port (a port freed by a reset may be reused, so each holds a list).
            var reported: [Int: [(bytes: Int, error: (any Error)?)]] = [:]
            for case .disconnected(let peer, let bytes, let error, _) in events {
                reported[peer?.port ?? 0, default: []].append((bytes, error))
            }
            for (localPort, bytes) in halfClosed.current
            where !(reported[localPort] ?? []).contains(where: { $0.bytes == bytes && $0.error == nil }) {
                XCTFail("half-closer on port \(localPort) (\(bytes) bytes) reported as \(reported[localPort] ?? [])")
            }
            if case .disconnected(_, _, _, let open)? = events.last {
                XCTAssertEqual(open, 0, "clients still open after the last one left")
            }
            try harness.wait(for: "every server-side connection closed", timeout: .seconds(30)) {
                (try? harness.loop.openHandles().count) == 1  // the listener
            }
            let resetErrors = reported.values.joined().filter { $0.error != nil }.count
            print("stress: peer faults against EchoServerKit: \(Self.resetters) resets mid-stream, \(Self.halfClosers) half-closes "
                  + "(\(halfClosed.current.values.reduce(0, +)) bytes echoed and checked), \(Self.stallers) stalled clients "
                  + "(\(mebibytes(pushed.reduce(0, +))) pushed before flow control stopped them), \(Self.vanishers) vanished, "
                  + "in \(formatted(faultsDone - started)); live heap \(mebibytes(heapAtStart)) at start, \(mebibytes(stalledHeap)) with the stallers blocked, "
                  + "peak \(mebibytes(peakHeap)); "
                  + "\(connected) of \(total) clients accepted (the rest left while the accept queue was full), \(resetErrors) ended with an "
                  + "error on the server; a normal client then echoed 1 MiB intact")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// Sends 32 to 256 KiB, reads some of the echo (none for a third of the clients), and resets with echo in flight.
    private static func resetMidStream(port: Int, index: Int) throws {
        let client = try BlockingClient(port: port)
        let size = 32_768 * (1 + index % 8)
        var sent = 0
        while sent < size { sent += client.send(block, 0..<min(block.count, size - sent)) }
        if index % 3 != 0 {
            let echoed = try client.receive(exactly: size / 2)
            guard echoed.elementsEqual(repeatElement(block, count: 4).joined().prefix(size / 2)) else {
                client.reset()
                throw StressFailure("the first \(size / 2) bytes echoed differ from what was sent")
            }
        }
        client.reset()
    }

    /// Sends 1 to 128 KiB, half-closes, and checks that exactly those bytes come back before EOF.
    private static func halfCloseAndCheck(port: Int, index: Int) throws -> (localPort: Int, bytes: Int) {
        let client = try BlockingClient(port: port)
        defer { client.close() }
        let payload = bytePattern(1 + (index * 7_919) % 131_072, seed: 1000 + index)
        guard client.send(payload) == payload.count else { throw StressFailure("send failed: errno \(errno)") }
        client.shutdownWrite()
        let echoed = try client.receiveUntilEOF()
        guard echoed == payload else {
            throw StressFailure("got \(echoed.count) bytes back for \(payload.count) sent, or different bytes")
        }
        return (client.localPort, payload.count)
    }

    /// Connects and goes away: a plain close, a reset, or a few bytes and a close without reading.
    private static func vanish(port: Int, index: Int) throws {
        let client = try BlockingClient(port: port)
        switch index % 3 {
        case 0: client.close()
        case 1: client.reset()
        default:
            client.send(block, 0..<(1 + index % 1000))
            client.close()
        }
    }
}
