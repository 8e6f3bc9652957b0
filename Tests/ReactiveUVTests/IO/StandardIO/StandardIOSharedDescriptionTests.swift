import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Standard input and output on one socket (inetd, systemd socket activation, `prog <&3 >&3`): one
/// open file description under descriptors 0 and 1, whose `O_NONBLOCK` libuv sets for both.
///
/// The test process's own 0 and 1 belong to the test runner, so the test runs itself again in a
/// child whose descriptors 0 and 1 are one end of a socket pair (Foundation's `Process` dup2s the
/// same descriptor onto both); the parent holds the other end and does not read until the child
/// says its loop answered.
final class StandardIOSharedDescriptionTests: XCTestCase {
    private static let probeVariable = "REACTIVEUV_SHARED_DESCRIPTION_PROBE"
    /// More than a Unix socket's buffers hold (the child's send buffer plus the parent's receive buffer).
    private static let payloadSize = 8 << 20
    private static let answeredMarker = "probe: the loop answered while the write waited"

    /// Disposing the standard input reader leaves the description non-blocking while the standard
    /// output writer is open: a write larger than the socket's buffer waits in the queue while the
    /// peer does not read, and the loop still runs a job from another thread meanwhile (a blocking
    /// descriptor would hold it in write(2) until the peer read). Then the peer reads every byte, in order, and the
    /// writer's close puts the flags back.
    func testDisposingTheInputReaderLeavesASharedOutputNonBlocking() throws {
        if ProcessInfo.processInfo.environment[Self.probeVariable] != nil { return try probeOnSharedSocket() }
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends), 0)
        let (parentEnd, childEnd) = (ends[0], ends[1])
        defer { close(parentEnd) }

        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = ["ReactiveUVTests.StandardIOSharedDescriptionTests/testDisposingTheInputReaderLeavesASharedOutputNonBlocking"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.probeVariable] = "1"
        environment["SWIFT_BACKTRACE"] = "enable=no"
        child.environment = environment
        let socket = FileHandle(fileDescriptor: childEnd, closeOnDealloc: true)
        child.standardInput = socket
        child.standardOutput = socket
        let errors = Pipe()
        child.standardError = errors
        try child.run()
        try socket.close()  // the child has its own copies on 0 and 1: EOF comes when it exits

        let errorText = LockedText()
        let answered = DispatchSemaphore(value: 0)
        let errorsDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let reader = errors.fileHandleForReading
            while case let data = reader.availableData, !data.isEmpty {
                if errorText.append(String(decoding: data, as: UTF8.self)).contains(Self.answeredMarker) { answered.signal() }
            }
            errorsDone.signal()
        }
        // A hang guard only: a loop blocked in write(2) never answers while nobody reads.
        let answeredInTime = answered.wait(timeout: .now() + 60) == .success
        XCTAssertTrue(answeredInTime, "the child's loop answered no job while its write waited (blocked in write(2)?): \(errorText.text)")

        // Now read everything the child writes, until it exits.
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(parentEnd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            received += buffer[..<count]
        }
        child.waitUntilExit()
        _ = errorsDone.wait(timeout: .now() + 60)
        let noise = String(decoding: received.filter { $0 != UInt8(ascii: "a") }, as: UTF8.self)
        XCTAssertEqual(child.terminationStatus, 0, "child: \(errorText.text) \(noise)")
        let begin = Array("BEGIN\n".utf8), end = Array("END\n".utf8)
        guard let start = received.firstRange(of: begin)?.upperBound else {
            return XCTFail("no BEGIN in what the child wrote: \(noise)")
        }
        let written = received[start...].prefix(Self.payloadSize + end.count)
        XCTAssertTrue(written.elementsEqual([UInt8](repeating: UInt8(ascii: "a"), count: Self.payloadSize) + end),
                      "every byte of the payload, then END: \(written.count) bytes from BEGIN on, \(written.filter { $0 == UInt8(ascii: "a") }.count) of them the payload's")
    }

    /// The child: descriptors 0 and 1 are one socket whose peer does not read yet.
    private func probeOnSharedSocket() throws {
        XCTAssertEqual(try StandardIO.kind(of: 0).get(), .pipe, "a Unix socket is read as a pipe")
        LoopHarness.run(timeout: .seconds(60)) { harness in
            let loop = harness.loop
            // The reader opens first (the harness subscribes on the loop's thread).
            let input = try harness.record(StandardIO.input(on: nil), label: "standard input")
            try roundTrip(loop)
            XCTAssertNotEqual(fcntl(0, F_GETFL) & O_NONBLOCK, 0, "the reader's stream is open: libuv made the socket non-blocking")
            let writer = StandardIO.output(on: loop)
            try writer.write("BEGIN\n").waitUntilCompleted(timeout: .seconds(60))

            input.dispose()
            try roundTrip(loop)  // the reader's handle is closed: its stream counted off the description
            XCTAssertNotEqual(fcntl(1, F_GETFL) & O_NONBLOCK, 0, "the writer still uses the description: it stays non-blocking")

            let payload = writer.write([UInt8](repeating: UInt8(ascii: "a"), count: Self.payloadSize))
            try roundTrip(loop)
            let waiting = writer.queuedWriteByteCount
            XCTAssertGreaterThan(waiting, 0, "the peer has not read: the write is still waiting")
            FileHandle.standardError.write(Data("\(Self.answeredMarker) (\(waiting) bytes queued)\n".utf8))

            try payload.waitUntilCompleted(timeout: .seconds(60))
            try writer.write("END\n").waitUntilCompleted(timeout: .seconds(60))
            try writer.close().waitUntilCompleted(timeout: .seconds(60))
            XCTAssertEqual(fcntl(1, F_GETFL) & O_NONBLOCK, 0, "the last stream on the description closed: its flags are back")
        }
    }

    /// A job from this thread runs on `loop` (a hang guard of 60 s, never reached unless the loop is blocked).
    private func roundTrip(_ loop: EventLoop) throws {
        let ran = DispatchSemaphore(value: 0)
        loop.execute { ran.signal() }
        guard ran.wait(timeout: .now() + 60) == .success else { throw TestFailure("the loop ran no job for 60 s") }
    }
}

/// Text appended from one thread and read from another.
private final class LockedText: @unchecked Sendable {
    // `value` is protected by `lock`.
    private let lock = NSLock()
    private var value = ""

    /// Appends `more`; returns everything so far.
    func append(_ more: String) -> String {
        lock.lock()
        defer { lock.unlock() }
        value += more
        return value
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
