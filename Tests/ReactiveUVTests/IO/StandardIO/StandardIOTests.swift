import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `StandardIO` over descriptors the test makes (the test process's own 0, 1 and 2 belong to the test runner):
/// the same code paths as descriptors 0, 1 and 2, which the `lines` sample tests use.
final class StandardIOTests: XCTestCase {
    private func checked(_ body: (LoopHarness) throws -> Void) {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    private func makePipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw TestFailure("pipe: errno \(errno)") }
        return (ends[0], ends[1])
    }

    private func writeAll(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }, bytes.count)
    }

    /// A pipe is read on the loop: chunks as the writer writes, completion when it closes its end; the handle is closed after.
    func testInputFromAPipeDeliversWhatIsWrittenAndCompletesWhenTheWriterCloses() throws {
        let (readEnd, writeEnd) = try makePipe()
        XCTAssertEqual(try StandardIO.kind(of: readEnd).get(), .pipe)
        checked { harness in
            let input = try! harness.record(StandardIO.input(descriptor: readEnd, name: "test pipe", on: nil), label: "input")
            writeAll("a\nb", to: writeEnd)
            XCTAssertEqual(String(decoding: try! waitForBytes(input, 3), as: UTF8.self), "a\nb")
            XCTAssertNil(input.terminal, "no end before the writer closed")
            close(writeEnd)
            XCTAssertTrue(try! input.waitForTermination().isCompleted)
        }
    }

    /// One reader at a time: a second subscriber gets EBUSY (two handles cannot watch one descriptor); the first reads on.
    func testASecondReaderOfTheSameDescriptorGetsEBUSY() throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(writeEnd) }
        checked { harness in
            let first = try! harness.record(StandardIO.input(descriptor: readEnd, name: "test pipe", on: nil), label: "first")
            let second = try! harness.record(StandardIO.input(descriptor: readEnd, name: "test pipe", on: nil), label: "second")
            XCTAssertEqual((try! second.waitForTermination().error as? UVError)?.name, "EBUSY")
            writeAll("x", to: writeEnd)
            XCTAssertEqual(try! waitForBytes(first, 1), Array("x".utf8))
            first.dispose()
        }
    }

    /// A regular file is read on the pool from the descriptor's current offset (as `< file` after a shell skipped bytes), then completes.
    func testInputFromARegularFileReadsFromTheCurrentOffsetAndLeavesTheDescriptorOpen() throws {
        let path = NSTemporaryDirectory() + "stdio-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
        try Data("skip:rest of file".utf8).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        XCTAssertEqual(lseek(descriptor, 5, SEEK_SET), 5)
        XCTAssertEqual(try StandardIO.kind(of: descriptor).get(), .file)
        checked { harness in
            let input = try! harness.record(StandardIO.input(descriptor: descriptor, name: "test file", on: nil), label: "input")
            XCTAssertTrue(try! input.waitForTermination().isCompleted)
            XCTAssertEqual(String(decoding: received(input), as: UTF8.self), "rest of file")
        }
        XCTAssertGreaterThanOrEqual(fcntl(descriptor, F_GETFD), 0, "the descriptor itself is not closed (a duplicate was read)")
    }

    /// Input from a regular file whose consumer paused it (no read in flight) ends with
    /// `EventLoopError.shutDown` when the loop shuts down, and the duplicate descriptor is closed.
    /// Runs `body` with a descriptor open for reading on a new 4 MiB file and the file's path.
    private func readingAFile(_ body: (Int32, String) async throws -> Void) async throws {
        let path = NSTemporaryDirectory() + "stdio-paused-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).bin"
        try Data(bytePattern(4 << 20, seed: 3)).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        try await body(descriptor, path)
    }

    func testPausedInputFromAFileEndsWithShutDownWhenTheLoopShutsDown() async throws {
        try await readingAFile { descriptor, path in
            let loop = EventLoop(name: "paused-input")
            try await assertAPausedReaderEndsWithShutDown(StandardIO.input(descriptor: descriptor, name: "test file", on: loop), on: loop)
            XCTAssertEqual(try descriptorsOpen(on: path), 1, "only the test's own descriptor is left open on the file")
        }
    }

    /// The same through operators that subscribe their source as a child (`delay`, `throttle(_:latest:)`):
    /// the consumer's pause still reaches the file reader, so nothing piles up unasked.
    func testAPauseReachesTheSourceThroughDelayAndThrottle() async throws {
        try await readingAFile { descriptor, _ in
            let delayed = EventLoop(name: "paused-delay")
            let input = StandardIO.input(descriptor: descriptor, name: "test file", on: delayed)
            try await assertAPausedReaderEndsWithShutDown(input.delay(.milliseconds(1), on: delayed), on: delayed)
            let throttled = EventLoop(name: "paused-throttle")
            _ = lseek(descriptor, 0, SEEK_SET)
            let again = StandardIO.input(descriptor: descriptor, name: "test file", on: throttled)
            try await assertAPausedReaderEndsWithShutDown(again.throttle(.milliseconds(1), latest: true, on: throttled), on: throttled)
        }
    }

    /// A directory on the descriptor is EISDIR, a closed descriptor EBADF: errors on the signal, no handle left open.
    func testADirectoryIsEISDIRAndAClosedDescriptorIsEBADF() throws {
        let directory = open("/", O_RDONLY | O_DIRECTORY)
        defer { close(directory) }
        // A number far above any open descriptor (a closed low number would be reused by the harness's loop).
        let closedRead: Int32 = 1_000_000, closedWrite: Int32 = 1_000_001
        XCTAssertLessThan(fcntl(closedRead, F_GETFD), 0)
        checked { harness in
            let fromDirectory = try! harness.record(StandardIO.input(descriptor: directory, name: "test directory", on: nil))
            let error = try! fromDirectory.waitForTermination().error as? UVError
            XCTAssertEqual(error?.name, "EISDIR")
            XCTAssertTrue(error?.message.contains("is a directory") == true, "\(String(describing: error))")
            let fromClosed = try! harness.record(StandardIO.input(descriptor: closedRead, name: "test closed", on: nil))
            XCTAssertEqual((try! fromClosed.waitForTermination().error as? UVError)?.name, "EBADF")
            let writer = StandardWriter(descriptor: closedWrite, name: "closed output", loop: harness.loop)
            XCTAssertEqual((try! harness.record(writer.write("x")).waitForTermination().error as? UVError)?.name, "EBADF")
        }
    }

    /// The reader went away: the write's signal fails with EPIPE (the process does not die of SIGPIPE), and so does every later write.
    func testWritingToAPipeWhoseReaderClosedFailsWithEPIPE() throws {
        let (readEnd, writeEnd) = try makePipe()
        close(readEnd)
        checked { harness in
            let writer = StandardWriter(descriptor: writeEnd, name: "test output", loop: harness.loop)
            let first = try! harness.record(writer.write("hello\n"))
            XCTAssertEqual((try! first.waitForTermination().error as? UVError)?.name, "EPIPE")
            let later = try! harness.record(writer.write("again\n"))
            XCTAssertEqual((try! later.waitForTermination().error as? UVError)?.name, "EPIPE")
            XCTAssertEqual((try! harness.record(writer.close()).waitForTermination().error as? UVError)?.name, "EPIPE")
        }
    }

    /// A reader slower than the writer: the bytes wait in the queue (counted), nothing is lost, and the queue empties as it reads.
    func testWritesToASlowReaderQueueAndDrainInOrder() throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(readEnd) }
        let chunk = [UInt8](repeating: UInt8(ascii: "z"), count: 64 << 10)
        let chunkCount = 16  // 1 MiB: far more than a pipe holds (64 KiB by default)
        checked { harness in
            let writer = StandardWriter(descriptor: writeEnd, name: "test output", loop: harness.loop)
            let results = (0..<chunkCount).map { index in
                try! harness.record(writer.write(chunk + [UInt8(index)]), label: "write \(index)")
            }
            try! harness.wait(for: "the first write to start") { writer.queuedWriteByteCount > 0 }
            // Nobody reads yet: a pipe holds 64 KiB by default (1 MiB at most), so the rest waits in the queue.
            XCTAssertGreaterThan(writer.queuedWriteByteCount, 0)
            XCTAssertFalse(results.last!.terminal != nil, "the last write cannot be done before anything was read")
            var readBack: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while readBack.count < chunkCount * (chunk.count + 1) {
                let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                guard count > 0 else { return XCTFail("read returned \(count), errno \(errno)") }
                readBack += buffer[..<count]
            }
            for result in results { XCTAssertTrue(try! result.waitForTermination().isCompleted) }
            XCTAssertEqual(writer.queuedWriteByteCount, 0)
            for index in 0..<chunkCount {
                XCTAssertEqual(readBack[(index + 1) * (chunk.count + 1) - 1], UInt8(index), "chunk \(index) in order")
            }
            XCTAssertTrue(try! harness.record(writer.close()).waitForTermination().isCompleted)
        }
    }

    /// A regular file is written at once, in order; closing the writer leaves the descriptor open.
    /// Runs `body` with a descriptor open for writing on a new file; returns what the file holds after.
    private func writingToAFile(_ body: (Int32, LoopHarness) throws -> Void) throws -> String {
        let path = NSTemporaryDirectory() + "stdio-out-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer {
            close(descriptor)
            unlink(path)
        }
        checked { harness in try body(descriptor, harness) }
        XCTAssertGreaterThanOrEqual(fcntl(descriptor, F_GETFD), 0, "the descriptor stays open")
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    func testWritingToARegularFile() throws {
        let written = try writingToAFile { descriptor, harness in
            let writer = StandardWriter(descriptor: descriptor, name: "test file", loop: harness.loop)
            XCTAssertTrue(try! harness.record(writer.write("one\n")).waitForTermination().isCompleted)
            XCTAssertTrue(try! harness.record(writer.write("two\n")).waitForTermination().isCompleted)
            XCTAssertTrue(try! harness.record(writer.close()).waitForTermination().isCompleted)
        }
        XCTAssertEqual(written, "one\ntwo\n")
    }

    /// `send(_:)` with text queues it as UTF-8 in call order with the other writes, with nothing to subscribe to.
    func testSendingTextWritesItInOrder() throws {
        let written = try writingToAFile { descriptor, harness in
            let writer = StandardWriter(descriptor: descriptor, name: "test file", loop: harness.loop)
            writer.send("héllo ")
            writer.send(Array("bytes ".utf8))
            writer.send("world\n")
            XCTAssertTrue(try! harness.record(writer.close()).waitForTermination().isCompleted)
        }
        XCTAssertEqual(written, "héllo bytes world\n")
    }
}
