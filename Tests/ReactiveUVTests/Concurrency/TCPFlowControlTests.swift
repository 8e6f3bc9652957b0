import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Streams `total` bytes (byte i is i % 251) with one write in flight, then closes.
private final class PatternSender: @unchecked Sendable {
    // Touched only on the connection's loop thread.
    private let connection: TCPConnection
    private let total: Int
    private var sent = 0
    private let chunk = 65_536
    /// The pattern once, long enough to cut any chunk from (building bytes one by one is slow in debug builds).
    private static let pattern = (0..<(65_536 + 251)).map { UInt8($0 % 251) }

    init(connection: TCPConnection, total: Int) {
        self.connection = connection
        self.total = total
    }

    func sendNext() {
        guard sent < total else {
            connection.close()
            return
        }
        let size = min(chunk, total - sent)
        let start = sent
        let phase = start % 251
        let bytes = Array(PatternSender.pattern[phase..<(phase + size)])
        sent += size
        connection.send(bytes) { [self] error in
            if error == nil { sendNext() }
        }
    }
}

final class TCPFlowControlTests: XCTestCase {
    /// A slow `for try await` over a connection's bytes pauses the socket instead of buffering without bound.
    ///
    /// The buffer is `.bounded(16)`: if the socket could not be paused, the sequence
    /// would end with `SignalValuesError.bufferOverflow` long before 128 MiB arrived.
    /// The live heap is sampled as it streams: a pause that arrives late, or a
    /// home loop whose queue fills while the socket's loop reads on, shows there.
    func testASlowConsumerOfTCPBytesPausesTheConnection() async throws {
        let total = 128 << 20
        let serverLoop = EventLoop(name: "flow-server")
        let clientLoop = EventLoop(name: "flow-client")
        let port = Locked(0)
        let server = TCPServer.serve(port: 0, on: serverLoop).subscribeNext { event in
            switch event {
            case .listening(let address):
                port.withLock { $0 = address.port }
            case .accepted(let connection):
                PatternSender(connection: connection, total: total).sendNext()
            case .refused, .draining:
                break
            }
        }
        let deadline = SchedulerInstant.now + .seconds(10)
        while port.current == 0 && SchedulerInstant.now < deadline { await Task.yield() }
        XCTAssertGreaterThan(port.current, 0, "the server did not start listening")

        // The connection lives as long as the connect subscription: use it inside the loop.
        let startHeap = liveHeapMegabytes()
        var peakHeap = startHeap
        var received = 0
        var chunks = 0
        for try await connection in TCP.connect(host: "127.0.0.1", port: port.current, on: clientLoop).values {
            for try await chunk in connection.bytes.values(bufferingPolicy: .bounded(16)) {
                // Sampled: a full check of every byte is minutes in a debug build.
                for offset in [0, chunk.count / 2, chunk.count - 1] where chunk[offset] != UInt8((received + offset) % 251) {
                    XCTFail("byte \(received + offset) was \(chunk[offset])")
                }
                received += chunk.count
                chunks += 1
                if chunks % 64 == 0 {
                    peakHeap = max(peakHeap, liveHeapMegabytes())
                    try await Task.sleep(for: .milliseconds(2))  // a consumer slower than loopback
                }
            }
            break
        }
        XCTAssertEqual(received, total)
        // Bounded by the values buffer (16 chunks of 64 KiB), the values in transit to the
        // iterator's home loop (FlowControl.transitHighWater) and one read: about 5 MiB.
        XCTAssertLessThan(peakHeap - startHeap, 16, "live heap grew by \(peakHeap - startHeap) MiB while \(total >> 20) MiB streamed")
        server.dispose()
        try await clientLoop.shutdownGracefully()
        try await serverLoop.shutdownGracefully()
    }
}

extension TCPFlowControlTests {
    /// A task that iterates a connection's `bytes.values` but takes nothing for a while (busy
    /// elsewhere) holds at most `ValuesBufferPolicy.maxBufferedBytes` of unread bytes: the
    /// socket pauses on the bytes waiting, not on a count of up to 1,024 chunks of 64 KiB.
    ///
    /// The client sends until a send makes no progress for a second (the server stopped
    /// reading); the live heap then holds what the server read and the task did not take.
    func testATaskThatTakesNothingHoldsAtMostMaxBufferedBytes() async throws {
        let loop = EventLoop(name: "unread-bytes")
        let port = Locked(0)
        let received = Locked(0)
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        let server = Task(executorPreference: loop) {
            for try await event in TCPServer.serve(port: 0, on: loop).values(bufferingPolicy: .unbounded) {
                switch event {
                case .listening(let address):
                    port.withLock { $0 = address.port }
                case .accepted(let connection):
                    var waited = false
                    for try await chunk in connection.bytes.values {
                        received.withLock { $0 += chunk.count }
                        if !waited {
                            waited = true
                            for await _ in gate { break }  // busy elsewhere: takes nothing until the test says
                        }
                    }
                    connection.close()
                    return
                case .refused, .draining:
                    break
                }
            }
        }
        let deadline = SchedulerInstant.now + .seconds(10)
        while port.current == 0 && SchedulerInstant.now < deadline { await Task.yield() }
        XCTAssertGreaterThan(port.current, 0, "the server did not start listening")

        let client = try BlockingClient(port: port.current)
        try client.setSendTimeout(.seconds(1))
        let chunk = bytePattern(64 << 10, seed: 9)
        let heapBefore = liveHeapMegabytes()
        let sent = Locked<Int?>(nil)
        Thread {
            var total = 0
            while true {
                let count = client.send(chunk)
                total += count
                guard count == chunk.count else { break }  // a second without progress: the server stopped reading
            }
            sent.withLock { $0 = total }
        }.start()
        while sent.current == nil { try await Task.sleep(for: .milliseconds(10)) }
        let held = liveHeapMegabytes() - heapBefore
        let total = try XCTUnwrap(sent.current)
        print("flow: a task that took nothing held \(String(format: "%.2f", held)) MiB of live heap while the client sent \(total >> 10) KiB")

        openGate.yield()
        client.shutdownWrite()
        _ = try await server.value
        client.close()
        XCTAssertEqual(received.current, total, "every byte sent arrived once the task took them")
        XCTAssertGreaterThan(total, 1 << 20, "the client could not even fill the kernel's buffers")
        // maxBufferedBytes (256 KiB) plus the read that crossed it, the first chunk and noise.
        XCTAssertLessThan(held, 2, "the live heap grew by \(held) MiB while the task took nothing (\(total >> 10) KiB sent)")
        try await loop.shutdownGracefully()
    }
}

