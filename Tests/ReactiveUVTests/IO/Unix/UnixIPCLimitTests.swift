import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Descriptors per message: libuv 1.44 reads at most 64 with one message, and the kernel closes
/// any beyond (`MSG_CTRUNC`, which libuv does not look at); `incoming` says so.
final class UnixIPCLimitTests: XCTestCase {
    private let ipc = UnixSocketOptions(ipc: true)

    /// Passes `count` descriptors with one byte (5) in one message from a raw peer to an IPC channel's
    /// `incoming`, then a message after it (9); returns `incoming` once the error or that message came
    /// (on its arrival, a reader that said nothing has let a loss pass). `close` closes the raw peer and the
    /// passed descriptors, at the end of the test.
    private func sendDescriptors(_ count: Int, on harness: LoopHarness) throws
        -> (incoming: EventRecorder<UnixConnection.Incoming>, close: () -> Void) {
        let (rawEnd, channelEnd) = try UnixSocket.pair()
        let raw = try XCTUnwrap(rawEnd.takeDescriptor())
        var passed: [Int32] = []
        let closeAll = { close(raw); for descriptor in passed { close(descriptor) } }
        do {
            let channel = try harness.record(UnixSocket.open(channelEnd, options: ipc), label: "channel").waitForValues(1)[0]
            let incoming = try harness.record(channel.incoming, label: "incoming")
            passed = try connectedUnixSockets(copies: count)
            XCTAssertEqual(ruv_test_send_descriptors(raw, passed, Int32(passed.count), 5), 1)
            var marker: UInt8 = 9
            XCTAssertEqual(write(raw, &marker, 1), 1)
            try incoming.wait(for: "the error, or the message after", timeout: .seconds(60)) { events in
                events.contains { event in
                    if event.isTerminating { return true }
                    if case .next(.bytes(let bytes)) = event { return bytes.contains(9) }
                    return false
                }
            }
            return (incoming, closeAll)
        } catch {
            closeAll()
            throw error
        }
    }

    /// A raw peer passes 100 descriptors in one message: the message's byte and the 64 that came
    /// are sent, then `incoming` fails with EMSGSIZE naming the 100 (the kernel closed the other 36
    /// without a word).
    func testAMessageWithMoreDescriptorsThanAReadTakesIsEMSGSIZE() throws {
        try withLoop { harness in
            let (incoming, closeAll) = try sendDescriptors(100, on: harness)
            defer { closeAll() }
            let error = try XCTUnwrap(incoming.terminal?.error as? UVError, "no error: \(incoming.values.count) values")
            XCTAssertEqual(error.name, "EMSGSIZE")
            XCTAssertTrue(error.message.contains("passed 100 descriptors in one message"), error.message)
            XCTAssertTrue(error.message.contains("at most 64"), error.message)
            guard case .bytes([5])? = incoming.values.first else { return XCTFail("\(incoming.values.prefix(2))") }
            let connections = incoming.values.filter { if case .unix = $0 { return true } else { return false } }
            XCTAssertEqual(connections.count, 64, "the descriptors that came are sent before the error")
        }
    }

    /// 64 descriptors in one message, libuv's limit, all arrive: no error.
    func testAMessageWithSixtyFourDescriptorsArrivesWhole() throws {
        try withLoop { harness in
            let (incoming, closeAll) = try sendDescriptors(64, on: harness)
            defer { closeAll() }
            XCTAssertNil(incoming.terminal, "\(String(describing: incoming.terminal))")
            let connections = incoming.values.filter { if case .unix = $0 { return true } else { return false } }
            XCTAssertEqual(connections.count, 64)
        }
    }

    /// Our own sender passes one descriptor per message: 100 connections passed back to back (queued
    /// together on the loop) all arrive, none lost to the 64-per-message limit, with no error.
    func testConnectionsPassedBackToBackEachTravelInAMessageOfTheirOwn() throws {
        try withLoop { harness in
            let (senderEnd, receiverEnd) = try UnixSocket.pair()
            let sender = try harness.record(UnixSocket.open(senderEnd, options: ipc), label: "sender").waitForValues(1)[0]
            let receiver = try harness.record(UnixSocket.open(receiverEnd, options: ipc), label: "receiver").waitForValues(1)[0]
            let incoming = try harness.record(receiver.incoming, label: "incoming")
            var connections: [UnixConnection] = []
            for index in 0..<100 {
                let (end, _) = try UnixSocket.pair()
                connections.append(try harness.record(UnixSocket.open(end), label: "passed \(index)").waitForValues(1)[0])
            }
            let sends = try harness.onLoop {
                connections.map { sender.send($0, with: [1]) }  // all queued before any goes out
            }
            for (index, send) in sends.enumerated() {
                XCTAssertTrue(try harness.record(send).waitForTermination().isCompleted, "send \(index)")
            }
            try incoming.wait(for: "100 connections", timeout: .seconds(60)) { events in
                events.filter { if case .next(.unix) = $0 { return true } else { return $0.isTerminating } }.count >= 100
            }
            XCTAssertNil(incoming.terminal, "\(String(describing: incoming.terminal))")
        }
    }

    // MARK: - helpers

    private func withLoop(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// `copies` descriptors of one end of a new connected Unix stream socket pair (the other end closed).
    private func connectedUnixSockets(copies: Int) throws -> [Int32] {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw TestFailure("socketpair: errno \(errno)")
        }
        close(ends[1])
        return [ends[0]] + (1..<copies).map { _ in fcntl(ends[0], F_DUPFD_CLOEXEC, 3) }
    }
}
