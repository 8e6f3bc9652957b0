import CTestSupport
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import Synchronization
import XCTest

/// Idle connections: what a silent connection costs, and the state it carries only once it needs it
/// (`StreamExtras`: queued writes, close waiters, `writable`, sends from other threads, addresses),
/// which must work once it is needed, however long the connection sat idle.
final class TCPIdleMemoryTests: XCTestCase {
    /// Counts the server's events without keeping them (a recorder's array would cost per connection too).
    private final class ServerCounts: Sendable {
        let port = Atomic<Int>(0)
        let accepted = Atomic<Int>(0)
    }

    /// An echo server as the idle-connections benchmark runs it (`ServeBenchServer ours`): every
    /// connection read, echoed, closed at EOF. 1,000 silent connections, after 200 that warm the
    /// loop's tables up: the live heap grows by at most 728 bytes per connection, all of it
    /// counted (the `TCPConnection`, which is the stream core, its libuv handle, the `bytes`
    /// subscription, malloc's headers; the client sockets are plain descriptors).
    ///
    /// Before the extras (every field in the stream core, the limits in each connection) it was
    /// 1,021 bytes in this (debug) build (massif measured 1,014 in the release build); 877 with the
    /// first extras, 829 with the rest of them and the one-word `ReaderToken`, 813 with `openState`,
    /// 797 with one-word reader and owner slots, 701 with the reader read through its sink, no
    /// `Subscriber` (`HomeGate`), 685 with the subscription's flow control in one slot, 653 with
    /// the stream as a sink reader's root instead of a `ReaderToken`, 621 with the `TCPConnection`
    /// being the stream core (no wrapper object).
    /// The bound leaves some slack for the loop's tables, which grow with the descriptors, and
    /// for the sanitizers' allocators (734 under the thread sanitizer before the wrapper went).
    func testAnIdleEchoConnectionCostsAtMost728HeapBytes() throws {
        let perConnection = try liveHeapBytesPerIdleConnection { connection in
            _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
        }
        print("idle echo connection: \(perConnection) live heap bytes each")
        XCTAssertLessThanOrEqual(perConnection, 728, "an idle connection costs \(perConnection) heap bytes")
        XCTAssertGreaterThan(perConnection, 248, "less than its libuv handle: the measurement is broken")
    }

    /// One shared `StreamReader` reads 1,000 idle connections with nothing made per connection, where
    /// a `bytes` subscription each makes its two objects (`Subscription` and `Sink`): measured on the
    /// same accepted connections, so only the readers differ. The live heap grows by at most 8
    /// bytes per connection when `read(with:)` starts on each (nothing is allocated; the slack is
    /// for the allocator's own books; libuv's watcher table is grown before), and by at least 150 when each then gets a subscription
    /// instead (208 with glibc's blocks; 192 and 184 under the thread and address sanitizers).
    func testASharedReaderMakesNothingPerConnectionWhereASubscriptionMakesTwoObjects() throws {
        try raiseOpenFileLimit(to: 4_096)
        try checked { harness in
            let counts = ServerCounts()
            let connections = Locked<[TCPConnection]>([])
            connections.withLock { $0.reserveCapacity(1_200) }
            let server = try harness.onLoop { () -> any Disposable in
                TCPServer.serve(host: "127.0.0.1", port: 0, backlog: 1024).subscribe(next: { event in
                    switch event {
                    case .listening(let address): counts.port.store(address.port, ordering: .relaxed)
                    case .accepted(let connection):
                        connections.withLock { $0.append(connection) }
                        counts.accepted.wrappingAdd(1, ordering: .relaxed)
                    default: break
                    }
                })
            }
            try harness.wait(for: "the server listening") { counts.port.load(ordering: .relaxed) != 0 }
            var clients: [Int32] = []
            clients.reserveCapacity(1_000)
            defer { for client in clients { close(client) } }
            try openSilentClients(1_000, to: counts.port.load(ordering: .relaxed), into: &clients)
            try harness.wait(for: "1,000 accepted") { counts.accepted.load(ordering: .relaxed) == 1_000 }
            let accepted = connections.withLock { $0 }
            let echo = StreamReader(next: { connection, chunk in connection.send(chunk) })
            var subscriptions: [any Disposable] = []
            subscriptions.reserveCapacity(accepted.count)

            // libuv's table of watched descriptors grows to the highest one read (raw C pays it too):
            // grown once here, reading and stopping each, it is not counted below.
            let before = try harness.onLoop { () -> Int in
                for connection in accepted { connection.read(with: echo) }
                for connection in accepted { connection.stopReading() }
                return ruv_test_live_heap_bytes()
            }
            let shared = try harness.onLoop { () -> Int in
                for connection in accepted { connection.read(with: echo) }
                return ruv_test_live_heap_bytes()
            }
            let subscribed = try harness.onLoop { () -> Int in
                for connection in accepted {
                    connection.stopReading()
                    subscriptions.append(connection.bytes.subscribe(next: { connection.send($0) }))
                }
                return ruv_test_live_heap_bytes()
            }
            let sharedCost = (Double(shared) - Double(before)) / Double(accepted.count)
            let subscriptionCost = (Double(subscribed) - Double(shared)) / Double(accepted.count)
            print("reading an idle connection: \(sharedCost) heap bytes with a shared reader, \(subscriptionCost) with a bytes subscription")
            XCTAssertLessThanOrEqual(sharedCost, 8, "read(with:) made something per connection")
            XCTAssertGreaterThanOrEqual(subscriptionCost, 150, "a bytes subscription made less than its two objects: the measurement is broken")
            try harness.onLoop { for subscription in subscriptions { subscription.dispose() } }
            server.dispose()
        }
    }

    /// The transport and the IPC flag share one byte (`StreamKind`): each transport, with and
    /// without the flag, reads back as it was stored (the transport is read by a bit cast).
    func testStreamKindKeepsEveryTransportAndTheIPCFlag() {
        let transports: [StreamConnection.Transport] = [.tcp, .pipe, .childPipe, .tty, .fifo]
        for transport in transports {
            for ipc in [false, true] {
                let kind = StreamKind(transport, ipc: ipc)
                XCTAssertEqual(kind.transport, transport, "\(transport), ipc \(ipc)")
                XCTAssertEqual(kind.ipc, ipc, "\(transport), ipc \(ipc)")
            }
        }
        XCTAssertEqual(MemoryLayout<StreamKind>.size, 1)
    }

    /// A connection is one object whose fields end at 104 bytes (`StreamStateBits` packs its small
    /// states): malloc gives it a 112-byte block. One more byte in its fields would take every
    /// connection to a 128-byte block. The size is the class's own (its metadata), not the block
    /// malloc happened to hand out, which may be larger when the heap reuses a freed block.
    func testAConnectionFitsA112ByteMallocBlock() throws {
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            XCTAssertEqual(swiftInstanceSize(of: ThreeWords.self), 16 + 24, "the metadata's instance size is read where it is")
            let size = swiftInstanceSize(of: type(of: connection))
            XCTAssertLessThanOrEqual(size, 104, "a TCP connection's fields end at \(size) bytes: past 104, malloc gives it 128")
            XCTAssertGreaterThanOrEqual(ruv_test_malloc_usable_size(Unmanaged.passUnretained(connection).toOpaque()), size)
            connection.reset()
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// The live heap's growth per accepted connection of an echo server that calls `read` on each
    /// (on its loop thread), measured over 1,000 silent connections after 200 that warm the loop's
    /// tables up (see `liveHeapBytesPerConnection`).
    private func liveHeapBytesPerIdleConnection(read: @escaping @Sendable (TCPConnection) -> Void) throws -> Double {
        // 1,200 clients and as many accepted sockets: past the common soft limit of 1,024 descriptors.
        try raiseOpenFileLimit(to: 4_096)
        var perConnection = 0.0
        try checked { harness in
            let counts = ServerCounts()
            let server = try harness.onLoop { () -> any Disposable in
                TCPServer.serve(host: "127.0.0.1", port: 0, backlog: 1024).subscribe(next: { event in
                    switch event {
                    case .listening(let address): counts.port.store(address.port, ordering: .relaxed)
                    case .accepted(let connection):
                        read(connection)
                        counts.accepted.wrappingAdd(1, ordering: .relaxed)
                    default: break
                    }
                })
            }
            try harness.wait(for: "the server listening") { counts.port.load(ordering: .relaxed) != 0 }
            let port = counts.port.load(ordering: .relaxed)
            var clients: [Int32] = []
            clients.reserveCapacity(1_200)
            defer { for client in clients { close(client) } }
            try openSilentClients(200, to: port, into: &clients)
            try harness.wait(for: "200 accepted") { counts.accepted.load(ordering: .relaxed) == 200 }
            perConnection = try liveHeapBytesPerConnection(
                harness, adding: 1_000, reaching: 1_200, accepted: { counts.accepted.load(ordering: .relaxed) }
            ) { try openSilentClients(1_000, to: port, into: &clients) }
            server.dispose()
        }
        return perConnection
    }

    /// An accepted connection that has only been read from makes no extras; then, after it sat
    /// idle, everything kept in them works from the first use: sends from another thread past the
    /// socket's buffer (counted in transit, then queued), `writable` going false and back to true,
    /// `queuedWriteByteCount` off the loop, a `close()` that waits for the flush, the addresses;
    /// the peer reads every byte in order, then EOF.
    func testTheExtrasMadeOnFirstUseAfterIdlingWork() throws {
        try checked { harness in
            let limits = StreamBufferLimits(highWaterMark: 64 << 10, lowWaterMark: 16 << 10, maxQueuedBytes: 64 << 20)
            let (server, port) = try startServer(harness, options: TCPOptions(limits: limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "server bytes")
            try client.sendAll(Array("hello".utf8))
            XCTAssertEqual(try waitForBytes(bytes, 5), Array("hello".utf8))
            XCTAssertNil(try harness.onLoop { connection.extrasIfMade }, "a connection that only read made its extras")

            let writable = try harness.record(connection.writable, label: "writable")
            // From this (test) thread: each send counted in transit, then queued on the loop.
            let chunk = 32 << 10
            let payload = bytePattern(64 * chunk, seed: 5)
            for start in stride(from: 0, to: payload.count, by: chunk) {
                connection.send(Array(payload[start..<start + chunk]))
            }
            XCTAssertGreaterThan(connection.queuedWriteByteCount, 0, "the queue (or what is in transit) is empty off the loop")
            try writable.wait(for: "writable false") { $0.contains { $0.value == false } }
            let closed = try harness.record(connection.close(), label: "close")
            XCTAssertNil(closed.terminal, "close() finished before the queued bytes were read")
            XCTAssertEqual(connection.peerAddress?.port, client.localPort)
            let received = try client.receiveUntilEOF()
            XCTAssertEqual(received.count, payload.count)
            XCTAssertTrue(received == payload, "the bytes arrived out of order or changed")
            XCTAssertTrue(try closed.waitForTermination().isCompleted, "the graceful close did not report its end")
            XCTAssertEqual(writable.values, [true, false, true], "writable did not go false, then true once drained")
            XCTAssertEqual(connection.queuedWriteByteCount, 0)
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// How a stream ended is kept in `openState` (and a failure's error in the extras, made then):
    /// after the peer's reset, a new reader and a `close()` get the same `ECONNRESET`, and the
    /// connection reads as closed from another thread; after `reset()` here, a new reader
    /// completes and `close()` completes.
    func testAnEndedConnectionTellsLaterCallersHowItEnded() throws {
        try checked { harness in
            let (server, port) = try startServer(harness)
            let first = try BlockingClient(port: port)
            let second = try BlockingClient(port: port)
            defer { first.close(); second.close() }
            let connections = try waitForAccepted(server, 2)
            let bytes = try harness.record(connections[0].bytes, label: "first bytes")
            first.reset()
            _ = try bytes.waitForTermination()
            XCTAssertEqual(errorName(bytes), "ECONNRESET")
            XCTAssertFalse(connections[0].isOpen, "off the loop, the failed connection still reads as open")
            let later = try harness.record(connections[0].bytes, label: "later reader")
            _ = try later.waitForTermination()
            XCTAssertEqual(errorName(later), "ECONNRESET", "a reader after the failure was not told it")
            let close = try harness.record(connections[0].close(), label: "close after failure")
            _ = try close.waitForTermination()
            XCTAssertEqual(errorName(close), "ECONNRESET", "close() after the failure was not told it")

            try harness.onLoop { connections[1].reset() }
            XCTAssertFalse(connections[1].isOpen)
            let afterReset = try harness.record(connections[1].bytes, label: "reader after reset")
            XCTAssertTrue(try afterReset.waitForTermination().isCompleted, "a reader after reset() did not complete")
            let closeAfterReset = try harness.record(connections[1].close(), label: "close after reset")
            XCTAssertTrue(try closeAfterReset.waitForTermination().isCompleted)
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// A reader that is its subscription's own sink on the connection's loop needs no `ReaderToken`:
    /// the stream is that subscription's root. Disposing the subscription still stops the reading: a
    /// second reader is then accepted, where one still reading gets `EBUSY`.
    func testAHomeSinkReaderHasTheStreamAsItsSubscriptionsRootAndNoToken() throws {
        try checked { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            let reading = try harness.onLoop { connection.bytes.subscribe(next: { _ in }) }
            let subscription = try XCTUnwrap(reading as? Subscription)
            try harness.onLoop {
                XCTAssertEqual(subscription.count, 0, "the sink reader's subscription holds a token")
                XCTAssertTrue(subscription.root is StreamConnection, "the stream is not the sink reader's root")
            }
            let busy = try harness.record(connection.bytes, label: "second reader while the first reads")
            XCTAssertEqual(errorName(busy), "EBUSY")
            reading.dispose()
            let later = try harness.onLoop { () -> Subscription? in
                let later = connection.bytes.subscribe(next: { _ in }) as? Subscription
                XCTAssertEqual(later?.isDisposed, false, "after the first reader's disposal the next one was refused")
                return later
            }
            try harness.onLoop { later?.dispose() }
            try harness.onLoop { connection.reset() }
            try harness.wait(for: "only the listener left") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// A single-reader source that counts the readers its tokens stopped (`ReaderSlot`'s rule, without a socket).
    private final class CountingSource: SingleReaderSource, @unchecked Sendable {
        typealias TokenSource = CountingSource
        // `slot` and `stopped` are touched on `loop`'s thread only (the test reads them there).
        let loop: EventLoop
        var slot = ReaderSlot<HomeGate<Int>>()
        var stopped = 0

        init(loop: EventLoop) { self.loop = loop }

        func stopReading(_ token: ReaderToken<CountingSource>) {
            guard slot.currentReaderIsDisposed else { return }
            slot.take()
            stopped += 1
        }

        var reads: Signal<Int> {
            Signal { [self] subscriber in
                slot.fill(.subscriber(subscriber))
                return ReaderToken(self)
            }
        }
    }

    /// The slot keeps no token (`ReaderSlot`): a reader's token stops it only while it is the
    /// current reader. A replaced reader's token, disposed after the next reader came (an IPC
    /// `bytes` reader ended by a descriptor, whose home loop disposes it later), leaves that
    /// reader alone; the current reader's token stops it; a token disposed once the slot is
    /// empty does nothing.
    func testAReplacedReadersTokenLeavesTheNextReaderReading() throws {
        try checked { harness in
            let source = CountingSource(loop: harness.loop)
            let (first, second) = try harness.onLoop { () -> (any Disposable, any Disposable) in
                let first = source.reads.subscribe()
                source.slot.take()  // the first reader ended as `endReader` ends it; its subscription is not disposed yet
                let second = source.reads.subscribe()
                return (first, second)
            }
            first.dispose()
            try harness.onLoop {
                XCTAssertNotNil(source.slot.reader, "the first reader's token stopped the second reader")
                XCTAssertEqual(source.stopped, 0)
            }
            second.dispose()
            try harness.onLoop {
                XCTAssertNil(source.slot.reader, "the current reader's token did not stop it")
                XCTAssertEqual(source.stopped, 1)
            }
            let third = try harness.onLoop { source.reads.subscribe() }
            try harness.onLoop { source.slot.take() }
            third.dispose()
            try harness.onLoop { XCTAssertEqual(source.stopped, 1, "a token disposed after its reader left stopped something") }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// Opens `count` blocking TCP connections to 127.0.0.1:`port` that never send, appending their descriptors.
func openSilentClients(_ count: Int, to port: Int, into clients: inout [Int32]) throws {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    for _ in 0..<count {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw TestFailure("connect() failed: errno \(errno)")
        }
        clients.append(descriptor)
    }
}

/// Raises the soft limit on open descriptors to `needed` if the hard limit allows; else fails saying so.
func raiseOpenFileLimit(to needed: Int) throws {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw TestFailure("getrlimit failed: errno \(errno)") }
    if limit.rlim_cur >= rlim_t(needed) { return }
    guard limit.rlim_max == rlim_t.max || limit.rlim_max >= rlim_t(needed) else {
        throw TestFailure("this test opens \(needed) descriptors but the hard limit (RLIMIT_NOFILE) is \(limit.rlim_max)")
    }
    limit.rlim_cur = rlim_t(needed)
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw TestFailure("setrlimit failed: errno \(errno)") }
}

/// A class of known size (a 16-byte object header and three words) to check `swiftInstanceSize` against.
private final class ThreeWords {
    var first = 0, second = 0, third = 0
}
