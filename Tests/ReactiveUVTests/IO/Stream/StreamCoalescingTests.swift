import CLibUV
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Small writes made while one of the stream's writes is in flight go out together: counted in
/// `write(2)` calls (the loop thread's `syscw` in `/proc/thread-self/io`) and in libuv requests,
/// never timed. Each write's completion still comes, in call order, and a batch that fails fails
/// each write in it.
final class StreamCoalescingTests: XCTestCase {
    /// `F_SETPIPE_SZ` (Linux; Glibc declares it for `_GNU_SOURCE` only).
    private static let setPipeSize: Int32 = 1031
    /// The first write: more than the pipe holds, so it stays in flight until the test reads.
    private static let firstSize = 16 << 10
    private static let smallSize = 20

    private func checked(_ body: (LoopHarness) throws -> Void) {
        let report = LoopHarness.run(timeout: .seconds(60), body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// A pipe whose buffer is one page (4 KiB), so that a write larger than that waits for the reader.
    private func makeSmallPipe() throws -> (read: Int32, write: Int32) {
        let ends = try makePipe()
        XCTAssertGreaterThan(fcntl(ends.write, Self.setPipeSize, 4096), 0)
        return ends
    }

    private func makePipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw TestFailure("pipe: errno \(errno)") }
        return (ends[0], ends[1])
    }

    /// A stream on `descriptor` (a pipe's write end, which the stream owns from here on), opened on the loop.
    private func openStream(on descriptor: Int32, _ harness: LoopHarness) throws -> StreamConnection {
        try harness.onLoop {
            let stream = StreamConnection(loop: harness.loop, transport: .pipe, limits: StreamBufferLimits(), origin: "from StreamCoalescingTests")
            try stream.open(descriptor: descriptor)
            return stream
        }
    }

    /// Small write number `index`: its number in 19 digits and a newline (`smallSize` bytes).
    private static func small(_ index: Int) -> [UInt8] {
        let digits = Array(String(index).utf8)
        return [UInt8](repeating: UInt8(ascii: "0"), count: smallSize - 1 - digits.count) + digits + [0x0A]
    }

    /// Reads `count` bytes from `descriptor` (blocking).
    private func read(_ count: Int, from descriptor: Int32) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while bytes.count < count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, min($0.count, count - bytes.count)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw TestFailure("read returned \(got) after \(bytes.count) of \(count) bytes, errno \(errno)") }
            bytes += buffer[..<got]
        }
        return bytes
    }

    /// 1,000 writes of 20 bytes queued behind a write the pipe cannot take yet reach the kernel in
    /// a handful of `write(2)` calls (one request for the batch), each completion fires once and in
    /// call order, and the reader gets every byte in order.
    func testSmallWritesQueuedWhileOneIsInFlightReachTheKernelInFewWriteCalls() throws {
        let (readEnd, writeEnd) = try makeSmallPipe()
        defer { close(readEnd) }
        let count = 1000
        checked { harness in
            let stream = try openStream(on: writeEnd, harness)
            let completed = Locked<[Int]>([])
            let before = try harness.onLoop { loopThreadWriteCalls() }
            let requests = try harness.onLoop { () -> Int in
                stream.sendOnLoop([UInt8](repeating: 0xFF, count: Self.firstSize)) { error in
                    XCTAssertNil(error)
                    completed.withLock { $0.append(-1) }
                }
                for index in 0..<count {
                    stream.sendOnLoop(Self.small(index)) { error in
                        XCTAssertNil(error, "write \(index)")
                        completed.withLock { $0.append(index) }
                    }
                }
                return stream.extras.writeRequestsStarted
            }
            XCTAssertEqual(requests, 1, "the small writes wait in one batch behind the first")
            let received = try read(Self.firstSize + count * Self.smallSize, from: readEnd)
            try harness.wait(for: "every completion") { completed.withLock { $0.count } == count + 1 }
            XCTAssertEqual(completed.withLock { $0 }, [-1] + Array(0..<count), "each completion once, in call order")
            XCTAssertEqual(Array(received[..<Self.firstSize]), [UInt8](repeating: 0xFF, count: Self.firstSize))
            XCTAssertEqual(Array(received[Self.firstSize...]), (0..<count).flatMap(Self.small), "the small writes' bytes, in order")
            let (after, allRequests) = try harness.onLoop { (loopThreadWriteCalls(), stream.extras.writeRequestsStarted) }
            XCTAssertEqual(allRequests, 2, "two libuv requests: the first write and the batch")
            if let before, let after {
                // 36,000 bytes through a 4 KiB pipe take at least 9 calls; one call per write would be 1,001.
                XCTAssertLessThan(after - before, count / 10, "write(2) calls of the loop thread for \(count + 1) writes")
            }
            try harness.onLoop { stream.end(.closed) }
        }
    }

    /// A batch whose write fails (the reader closed its end) fails each write in it with that
    /// error, in call order, after the writes before it succeeded; the writes gathered behind it
    /// fail with `ECANCELED`.
    func testAFailureAfterACoalescedBatchFailsEachWriteInIt() throws {
        let (readEnd, writeEnd) = try makeSmallPipe()
        var readEndOpen = true
        defer { if readEndOpen { close(readEnd) } }
        // 8,000 bytes: more than the pipe holds, so the batch is still in flight when the reader goes.
        let batched = 400, behind = 50
        checked { harness in
            let stream = try openStream(on: writeEnd, harness)
            let results = Locked<[(index: Int, code: Int32)]>([])
            let record = { (index: Int) -> ((any Error)?) -> Void in
                { error in results.withLock { $0.append((index, (error as? UVError)?.code ?? 0)) } }
            }
            try harness.onLoop {
                stream.sendOnLoop([UInt8](repeating: 0xFF, count: Self.firstSize), completion: record(-1))
                for index in 0..<batched { stream.sendOnLoop(Self.small(index), completion: record(index)) }
            }
            // The first write is read whole: its callback sends the batch (before the first write's
            // caller hears of it), which fills the pipe and waits.
            _ = try read(Self.firstSize, from: readEnd)
            try harness.wait(for: "the first write's completion") { !results.withLock { $0.isEmpty } }
            XCTAssertEqual(try harness.onLoop { stream.extras.writeRequestsStarted }, 2, "the first write and the batch")
            try harness.onLoop {
                for index in batched..<(batched + behind) { stream.sendOnLoop(Self.small(index), completion: record(index)) }
            }
            close(readEnd)
            readEndOpen = false
            try harness.wait(for: "every completion") { results.withLock { $0.count } == 1 + batched + behind }
            let seen = results.withLock { $0 }
            XCTAssertEqual(seen.map(\.index), [-1] + Array(0..<(batched + behind)), "each completion once, in call order")
            XCTAssertEqual(seen.first?.code, 0, "the first write succeeded")
            XCTAssertEqual(Set(seen[1...batched].map(\.code)), [UV_EPIPE.rawValue], "every write of the failed batch fails with its error")
            XCTAssertEqual(Set(seen[(batched + 1)...].map(\.code)), [UV_ECANCELED.rawValue], "the writes behind it were never written")
            XCTAssertFalse(try harness.onLoop { stream.isHandleOpen }, "the failure ended the stream")
        }
    }

    /// `StandardWriter`: 1,000 `send`s made while its first write waits for the loop's next turn
    /// (the kernel took it, its callback has not run) go out in a few `write(2)` calls, in order.
    func testStandardWriterSendsMadeInOneTurnAreWrittenTogether() throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(readEnd) }
        let count = 1000
        checked { harness in
            let writer = StandardWriter(descriptor: writeEnd, name: "test output", loop: harness.loop)
            let before = try harness.onLoop { loopThreadWriteCalls() }
            let last = try harness.onLoop { () -> Signal<Void> in
                writer.send(Array("first\n".utf8))
                for index in 0..<count { writer.send(Self.small(index)) }
                return writer.write(Array("last\n".utf8))
            }
            let received = try read(6 + count * Self.smallSize + 5, from: readEnd)
            XCTAssertTrue(try harness.record(last).waitForTermination().isCompleted)
            let after = try harness.onLoop { loopThreadWriteCalls() }
            XCTAssertEqual(received, Array("first\n".utf8) + (0..<count).flatMap(Self.small) + Array("last\n".utf8))
            if let before, let after {
                XCTAssertLessThan(after - before, count / 10, "write(2) calls of the loop thread for \(count + 2) writes")
            }
            XCTAssertTrue(try harness.record(writer.close()).waitForTermination().isCompleted)
        }
    }
}

/// The calling thread's write-like system calls so far (`syscw` in `/proc/thread-self/io`); nil where the kernel does not keep them.
private func loopThreadWriteCalls() -> Int? {
    let descriptor = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var buffer = [UInt8](repeating: 0, count: 512)
    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    let text = String(decoding: buffer[..<count], as: UTF8.self)
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("syscw:") }) else { return nil }
    return Int(line.dropFirst("syscw:".count).trimmingCharacters(in: .whitespaces))
}
