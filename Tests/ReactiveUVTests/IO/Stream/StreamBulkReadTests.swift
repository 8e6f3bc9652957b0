import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Reads of a bulk transfer go straight into the array the reader gets (`StreamConnection.BulkReads`):
/// what that may cost a reader in spare capacity, and that every byte arrives, in order, whichever
/// way each read went (into the loop's shared buffer, into a bulk array handed over, or into a bulk
/// array copied out of).
final class StreamBulkReadTests: XCTestCase {
    /// Sends `bytes` and waits until the reader has received `total` bytes in all.
    private func send(_ bytes: [UInt8], from client: BlockingClient, until total: Int,
                      _ reader: EventRecorder<[UInt8]>) throws {
        try client.sendAll(bytes)
        try reader.wait(for: "\(total) bytes in all") { events in
            events.reduce(0) { $0 + ($1.value?.count ?? 0) } >= total
        }
    }

    /// Sends 64 KiB writes until one arrives as a read that filled half a buffer, which turns bulk reads on.
    private func turnBulkReadsOn(_ client: BlockingClient, _ reader: EventRecorder<[UInt8]>, received: inout Int) throws {
        for attempt in 0..<20 {
            let block = bytePattern(65_536, seed: attempt)
            received += block.count
            try send(block, from: client, until: received, reader)
            if let last = reader.values.last, last.count >= 32_768 { return }
        }
        throw TestFailure("no read of 64 KiB writes filled half a buffer in 20 tries")
    }

    /// A short read right after a full one is read into a bulk array (64 KiB), but the reader gets
    /// it in an array of about its size: before, it got the whole 64 KiB array trimmed, 65x its
    /// payload, which a reader queuing small chunks after a burst held in full.
    func testAShortReadAfterABulkReadIsNotHandedOverInA64KiBArray() throws {
        try withReader { client, reader in
            var received = 0
            try turnBulkReadsOn(client, reader, received: &received)
            let chunksBefore = reader.values.count
            let small = bytePattern(1_000, seed: 99)
            received += small.count
            try send(small, from: client, until: received, reader)
            let chunks = reader.values
            XCTAssertEqual(chunks.count, chunksBefore + 1, "the 1,000 bytes came as one read")
            let chunk = try XCTUnwrap(chunks.last)
            XCTAssertEqual(chunk, small)
            XCTAssertLessThan(chunk.capacity, 16_384,
                              "a 1,000-byte read after a bulk read was handed over in an array of \(chunk.capacity) bytes")
        }
    }

    /// Every byte arrives in order when bulk transfers, their short tails and small messages take
    /// turns: each way a read can go, and each switch between them, with the chunks kept by the reader.
    func testBytesArriveIntactWhateverWayEachReadWent() throws {
        try withReader { client, reader in
            var sent: [UInt8] = []
            let sizes = [65_536, 20_000, 65_536, 1_000, 500, 65_536, 3, 65_536, 40_000, 17_000, 10_000, 9, 65_536, 65_536, 4_097]
            for (index, size) in sizes.enumerated() {
                let block = bytePattern(size, seed: index + 1)
                sent += block
                // One write at a time, each received before the next: each is read on its own (or split).
                try send(block, from: client, until: sent.count, reader)
            }
            XCTAssertEqual(Array(reader.values.joined()), sent)
        }
    }

    /// Runs `body` with a blocking client of a loopback server and the recorded `bytes` of the
    /// connection it accepted; the connection is reset afterwards and the harness checks every handle closed.
    private func withReader(_ body: (BlockingClient, EventRecorder<[UInt8]>) throws -> Void) throws {
        let report = LoopHarness.run { harness in
            let (_, _, client, connection) = try acceptOneClient(harness)
            defer { client.close() }
            defer { connection.reset() }
            try body(client, try harness.record(connection.bytes, label: "server bytes"))
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
