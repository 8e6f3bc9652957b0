import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Memory per connection, all of it: the write limit counts each queued write's real
/// cost (payload plus a per-write overhead), sends from other threads are bounded at the moment
/// of the send, and `writable` tells a sender when to go on.
final class StreamMemoryBoundTests: XCTestCase {
    /// 8 MiB of queue in all; reading pauses above 1 MiB (the server here never reads anyway).
    private static let limits = StreamBufferLimits(highWaterMark: 1 << 20, lowWaterMark: 256 << 10, maxQueuedBytes: 8 << 20)
    private static let sends = 1_000_000
    /// What the process may grow by while the queue is full: three times the limit. Up to twice
    /// the limit can be accounted (the loop's queue plus sends still on their way from another
    /// thread), each send at its estimated cost (`perWriteOverhead` over the payload, as the system
    /// allocator spends it; an instrumenting allocator such as ASan's spends more per allocation).
    private static let heapBound = 3.0 * Double(limits.maxQueuedBytes) / 1_048_576

    /// Counts results of `send(_:completion:)` without a lock.
    private final class Results: Sendable {
        let refused = Atomic<Int>(0)
        let otherErrors = Atomic<Int>(0)
        func record(_ error: (any Error)?) {
            guard let error else { return }
            if (error as? UVError)?.name == "ENOBUFS" {
                refused.wrappingAdd(1, ordering: .relaxed)
            } else {
                otherErrors.wrappingAdd(1, ordering: .relaxed)
            }
        }
    }

    /// A million 40-byte sends on the loop to a client that never reads: the live heap grows by
    /// less than twice the 8 MiB limit, and the sends past it fail with ENOBUFS.
    ///
    /// Counting payload alone let 8 MiB / 40 = 209,715 writes queue, at 400 heap bytes each (83 MiB).
    func testAMillionSmallSendsToAClientThatNeverReadsStayWithinTheLimit() throws {
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(limits: Self.limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let results = Results()
            // A million sends take about 5 s under the thread sanitizer and three times that on a loaded
            // machine: the default 10 s would fail a slow run, not a hang (which this still catches).
            let growth = try harness.onLoop(timeout: .seconds(120)) { () -> Double in
                let before = liveHeapMegabytes()
                for index in 0..<Self.sends {
                    connection.send([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40), completion: results.record)
                }
                return liveHeapMegabytes() - before
            }
            XCTAssertLessThan(growth, Self.heapBound, "the heap grew by \(growth) MiB for a queue limited to 8 MiB")
            XCTAssertGreaterThan(results.refused.load(ordering: .relaxed), Self.sends / 2, "sends past the limit were not refused")
            XCTAssertEqual(results.otherErrors.load(ordering: .relaxed), 0)
            XCTAssertTrue(connection.isOpen, "refused sends with a completion leave the connection open")
            connection.reset()
        }
    }

    /// The same flood from a thread that is not the connection's loop: bounded the same way, at the
    /// moment of each send (before, the hops queued in the loop's submission queue without limit).
    func testAFloodFromAnotherThreadIsBoundedTheSame() throws {
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(limits: Self.limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let results = Results()
            let before = liveHeapMegabytes()
            var peak = 0.0
            // What was queued where when the heap peaked, for a failure to say (typically about 10 MiB in all).
            var atPeak = ""
            func sample() {
                let growth = liveHeapMegabytes() - before
                guard growth > peak else { return }
                peak = growth
                atPeak = "\(connection.queuedWriteByteCount) bytes queued or in transit, "
                    + "\(harness.loop.queuedWorkCount) items in the loop's inbox"
            }
            for index in 0..<Self.sends {
                connection.send([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40), completion: results.record)
                if index % 10_000 == 0 { sample() }
            }
            sample()
            XCTAssertLessThan(peak, Self.heapBound, "the heap grew by \(peak) MiB for a queue limited to 8 MiB; at the peak: \(atPeak)")
            XCTAssertGreaterThan(results.refused.load(ordering: .relaxed), Self.sends / 2, "sends past the limit were not refused")
            XCTAssertEqual(results.otherErrors.load(ordering: .relaxed), 0)
            let error = try XCTUnwrap(try harness.record(connection.write([1])).waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENOBUFS")
            XCTAssertTrue(error.message.contains("limit 8388608"), error.message)
            connection.reset()
        }
    }

    /// `send(_:)` (no result) from another thread past the limit ends the connection with ENOBUFS, as on the loop.
    func testASendWithoutAResultPastTheLimitFromAnotherThreadEndsTheConnection() throws {
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(limits: Self.limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let bytes = try harness.record(connection.bytes, label: "bytes")
            for index in 0..<100_000 { connection.send([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40)) }
            // The refusal is counted at the send, on this thread; the connection ends on its loop, a moment later.
            XCTAssertEqual((try bytes.waitForTermination().error as? UVError)?.name, "ENOBUFS")
            try harness.wait(for: "the connection closed") { (try? harness.loop.openHandles().count) == 1 }
        }
    }

    /// `writable` starts true, goes false when the queue passes the high-water mark, and true again
    /// once the client reads and the queue drains to the low-water mark.
    func testWritableGoesFalseThenTrueAsTheClientStartsReading() throws {
        let limits = StreamBufferLimits(highWaterMark: 256 << 10, lowWaterMark: 64 << 10, maxQueuedBytes: 8 << 20)
        try checked { harness in
            let (server, port) = try startServer(harness, options: TCPOptions(limits: limits))
            let client = try BlockingClient(port: port, receiveTimeout: .seconds(60), beforeConnect: BlockingClient.shrinkBuffers)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            let writable = try harness.record(connection.writable, label: "writable")
            XCTAssertEqual(try writable.waitForValues(1), [true])
            let total = 2 << 20
            try harness.onLoop {
                for start in stride(from: 0, to: total, by: 16 << 10) {
                    connection.send(bytePattern(16 << 10, seed: start))
                }
            }
            XCTAssertEqual(try writable.waitForValues(2), [true, false], "the queue passed the high-water mark")
            XCTAssertEqual(try client.receive(exactly: total).count, total)
            XCTAssertEqual(try writable.waitForValues(3), [true, false, true], "writable again after the drain")
            connection.close()
            XCTAssertTrue(try writable.waitForTermination().isCompleted, "writable completes when the connection ends")
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
