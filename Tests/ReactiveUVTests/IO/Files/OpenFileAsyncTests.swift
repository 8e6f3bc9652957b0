import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// The `async throws` forms of `OpenFile`'s operations and of `StreamConnection.sendFile` on `FileSystem`,
/// thin bridges over the signals: each returns what its signal sends and throws the `UVError` its signal
/// fails with.
final class OpenFileAsyncTests: FileSystemTestCase {
    /// Writes, then reads back at offsets (short at the end, empty at and past it), size, stat, append,
    /// truncate (cut and extended), sync and dataSync; each value is the one its signal sends.
    func testAsyncOperationsReturnWhatTheirSignalsSend() async throws {
        let name = path("data.bin")
        await withCheckedHarness { harness in
            try await FileSystem.withOpenFile(name, mode: .readWrite, options: [.create, .exclusive], on: harness.loop) { file in
                let first = try await FileSystem.write([1, 2, 3, 4], to: file, at: 0)
                XCTAssertEqual(first, 4)
                let second = try await FileSystem.write([9, 9], to: file, at: 10)
                XCTAssertEqual(second, 2)
                XCTAssertEqual(try self.contents(name), [1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 9, 9], "the gap reads as zeros")
                XCTAssertEqual(try self.completes(harness, file.write([4], at: 3)), [1], "the signal sends the same count")

                let reads: [(offset: Int, count: Int, expected: [UInt8])] = [(0, 4, [1, 2, 3, 4]), (2, 3, [3, 4, 0]), (9, 100, [0, 9, 9]),
                                                                             (12, 5, []), (1_000, 5, [])]
                for (offset, count, expected) in reads {
                    let bytes = try await FileSystem.read(file, at: offset, count: count)
                    XCTAssertEqual(bytes, expected, "read at \(offset), count \(count) (short at the end, empty at and past it)")
                    XCTAssertEqual(try self.completes(harness, file.read(at: offset, count: count)), [bytes], "as the signal sends")
                }

                let size = try await FileSystem.size(file)
                XCTAssertEqual(size, 12)
                XCTAssertEqual(try self.completes(harness, file.size()), [size])
                let info = try await FileSystem.stat(file)
                XCTAssertEqual(info.type, .regular)
                XCTAssertEqual(info.size, 12)
                XCTAssertEqual(info.inode, UInt64(try self.systemStat(name).st_ino))
                XCTAssertEqual(try self.completes(harness, file.stat()).map(\.inode), [info.inode])

                let appended = try await FileSystem.append([7, 7, 7], to: file)
                XCTAssertEqual(appended, 3)
                XCTAssertEqual(try self.contents(name), [1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 9, 9, 7, 7, 7], "appended at the end")

                try await FileSystem.truncate(file, to: 3)
                XCTAssertEqual(try self.contents(name), [1, 2, 3])
                let cut = try await FileSystem.size(file)
                XCTAssertEqual(cut, 3)
                try await FileSystem.truncate(file, to: 5)
                XCTAssertEqual(try self.contents(name), [1, 2, 3, 0, 0], "extended with zeros")

                try await FileSystem.sync(file)
                try await FileSystem.dataSync(file)
                XCTAssertFalse(file.isClosed)
            }
        }
    }

    /// Bad offsets, counts and sizes, and what the open mode forbids, are thrown as the signals send them,
    /// each `UVError` naming the path; the file stays usable.
    func testAsyncOperationsThrowTheErrorsTheirSignalsSend() async throws {
        let name = try makeFile("modes", [1, 2, 3])
        await withCheckedHarness { harness in
            try await FileSystem.withOpenFile(name, mode: .read, on: harness.loop) { file in
                try await self.assertThrowsTheSignalsError(harness, file.read(at: -1, count: 1), { try await FileSystem.read(file, at: -1, count: 1) },
                                                           named: "EINVAL", path: name)
                try await self.assertThrowsTheSignalsError(harness, file.read(at: 0, count: OpenFile.maxReadCount + 1),
                                                           { try await FileSystem.read(file, at: 0, count: OpenFile.maxReadCount + 1) },
                                                           named: "EINVAL", path: name)
                try await self.assertThrowsTheSignalsError(harness, file.write([9], at: -1), { try await FileSystem.write([9], to: file, at: -1) },
                                                           named: "EINVAL", path: name)
                try await self.assertThrowsTheSignalsError(harness, file.truncate(to: -1), { try await FileSystem.truncate(file, to: -1) },
                                                           named: "EINVAL", path: name)
                // Opened for reading only: a write, an append or a truncate is EBADF saying the mode.
                for error in [try await self.assertThrowsTheSignalsError(harness, file.write([9], at: 0),
                                                                         { try await FileSystem.write([9], to: file, at: 0) }, named: "EBADF", path: name),
                              try await self.assertThrowsTheSignalsError(harness, file.append([9]), { try await FileSystem.append([9], to: file) },
                                                                         named: "EBADF", path: name),
                              try await self.assertThrowsTheSignalsError(harness, file.truncate(to: 1), { try await FileSystem.truncate(file, to: 1) },
                                                                         named: "EBADF", path: name)] {
                    XCTAssertTrue(error.message.hasPrefix("the file was opened for reading only (mode .read)"), error.description)
                }
                var chunkError: UVError?
                do {
                    for try await _ in FileSystem.chunks(file, chunkSize: 0) { XCTFail("a chunk of size 0") }
                } catch let error as UVError {
                    chunkError = error
                }
                XCTAssertEqual(chunkError?.name, "EINVAL")
                XCTAssertEqual(chunkError?.context, "chunks \(name)")
                let bytes = try await FileSystem.read(file, at: 0, count: 10)
                XCTAssertEqual(bytes, [1, 2, 3], "the file is still usable")
            }
            try await FileSystem.withOpenFile(name, mode: .write, on: harness.loop) { file in
                let error = try await self.assertThrowsTheSignalsError(harness, file.read(at: 0, count: 1),
                                                                       { try await FileSystem.read(file, at: 0, count: 1) }, named: "EBADF", path: name)
                XCTAssertEqual(error.message, "the file was opened for writing only (mode .write): a read needs .read or .readWrite")
            }
        }
        XCTAssertEqual(try contents(name), [1, 2, 3], "nothing was changed")
    }

    /// After `FileSystem.close`, every async operation (and a second close) throws `EBADF` naming `close()` and the path.
    func testAfterAnAsyncCloseEveryAsyncOperationIsEBADF() async throws {
        let name = try makeFile("closed", [1, 2, 3])
        await withCheckedHarness { harness in
            let closed = try await FileSystem.withOpenFile(name, mode: .readWrite, on: harness.loop) { file in
                try await FileSystem.close(file)
                XCTAssertTrue(file.isClosed)
                XCTAssertEqual(try self.descriptors(openOn: name), 0, "closed when the close returned")
                let calls: [(String, () async throws -> Any)] = [
                    ("read", { try await FileSystem.read(file, at: 0, count: 1) }),
                    ("write", { try await FileSystem.write([1], to: file, at: 0) }),
                    ("append", { try await FileSystem.append([1], to: file) }),
                    ("fstat", { try await FileSystem.stat(file) }),
                    ("fstat", { try await FileSystem.size(file) }),
                    ("fsync", { try await FileSystem.sync(file) }),
                    ("fdatasync", { try await FileSystem.dataSync(file) }),
                    ("ftruncate", { try await FileSystem.truncate(file, to: 0) }),
                    ("close", { try await FileSystem.close(file) }),
                    ("read", { try await FileSystem.chunks(file).reduce(0) { $0 + $1.count } }),
                ]
                for (operation, call) in calls {
                    let error = try await self.thrownError(call)
                    XCTAssertEqual(error.name, "EBADF", operation)
                    XCTAssertEqual(error.context, "\(operation) \(name)")
                    XCTAssertEqual(error.message, "the file was closed by its close()", error.description)
                }
                // The signals send the same error.
                XCTAssertEqual(try self.failure(harness, file.read(at: 0, count: 1)).message, "the file was closed by its close()")
                return file
            }
            XCTAssertTrue(closed.isClosed)
        }
        XCTAssertEqual(try contents(name), [1, 2, 3])
    }

    /// A file of several chunks comes in order, each chunk as the signal sends it, from an offset to the end.
    func testAsyncChunksOfAFileLargerThanOneChunkComeInOrder() async throws {
        let bytes = bytePattern(250_000, seed: 21)
        let name = try makeFile("chunks.bin", bytes)
        await withCheckedHarness { harness in
            try await FileSystem.withOpenFile(name, on: harness.loop) { file in
                var chunks: [[UInt8]] = []
                for try await chunk in FileSystem.chunks(file, from: 50_000, chunkSize: 64_000) { chunks.append(chunk) }
                XCTAssertEqual(chunks.map(\.count), [64_000, 64_000, 64_000, 8_000])
                XCTAssertTrue(chunks.flatMap { $0 } == Array(bytes[50_000...]), "the bytes from the offset, in order")
                XCTAssertTrue(try self.completes(harness, file.chunks(from: 50_000, chunkSize: 64_000)) == chunks, "as the signal sends them")
                var whole: [UInt8] = []
                for try await chunk in FileSystem.chunks(file) { whole += chunk }
                XCTAssertTrue(whole == bytes, "from 0 in chunks of 64 KiB by default")
                var pastEnd = 0
                for try await _ in FileSystem.chunks(file, from: 300_000) { pastEnd += 1 }
                XCTAssertEqual(pastEnd, 0, "nothing past the end")
            }
        }
    }

    /// A task iterating a long `chunks` (16 MiB in 4 KiB chunks) is cancelled while it waits, after its first
    /// chunk: the iteration ends there (no further chunk), `withOpenFile` returns with the file closed, and
    /// no descriptor stays open on it. The task waits for its cancellation on a stream nobody feeds (no
    /// sleep, no race).
    func testCancellingATaskIteratingChunksStopsItAndLeavesNoDescriptorOpen() async throws {
        let name = try makeFile("long.bin", bytePattern(16 << 20, seed: 22))
        await withCheckedHarness { harness in
            let (firstChunk, tellFirstChunk) = AsyncStream<Void>.makeStream()
            let (untilCancelled, keepOpen) = AsyncStream<Void>.makeStream()
            let loop = harness.loop
            let reader = Task { () -> (chunks: Int, bytes: Int, file: OpenFile) in
                try await FileSystem.withOpenFile(name, on: loop) { file in
                    var chunks = 0, bytes = 0
                    for try await chunk in FileSystem.chunks(file, chunkSize: 4096) {
                        chunks += 1
                        bytes += chunk.count
                        if chunks == 1 {
                            tellFirstChunk.yield()
                            for await _ in untilCancelled {}  // ends when the task is cancelled
                        }
                    }
                    return (chunks, bytes, file)
                }
            }
            for await _ in firstChunk { break }
            reader.cancel()
            let outcome = try await reader.value
            keepOpen.finish()
            XCTAssertEqual(outcome.chunks, 1, "the iteration ended at the cancellation")
            XCTAssertEqual(outcome.bytes, 4096)
            XCTAssertTrue(outcome.file.isClosed)
            // A cancelled task does not wait for the reads ahead still on the pool (`withOpenFile`): the
            // descriptor closes when they end.
            try harness.waitOrThrow(for: "the descriptor to close") { try self.descriptors(openOn: name) == 0 }
        }
    }

    /// A task awaiting the next chunk of a FIFO that has no more yet (a source without an end, read on the
    /// loop by `FileSystem.chunks(path)`) is cancelled: the iteration ends, and the disposal closes the
    /// descriptor it read through (only the test's own stays open on the FIFO).
    func testCancellingATaskAwaitingChunksOfAFIFOStopsItAndClosesItsDescriptor() async throws {
        let fifo = path("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        // Read and write: opening never waits for the other end, and the FIFO never reaches EOF.
        let writer = open(fifo, O_RDWR)
        XCTAssertGreaterThanOrEqual(writer, 0)
        defer { close(writer) }
        await withCheckedHarness { harness in
            let (firstChunk, tellFirstChunk) = AsyncStream<[UInt8]>.makeStream()
            let loop = harness.loop
            let reader = Task { () -> Int in
                var chunks = 0
                for try await chunk in FileSystem.chunks(fifo, on: loop) {
                    chunks += 1
                    tellFirstChunk.yield(chunk)
                }
                return chunks
            }
            let payload: [UInt8] = [5, 6, 7]
            XCTAssertEqual(write(writer, payload, payload.count), payload.count)
            var received: [UInt8] = []
            for await chunk in firstChunk {
                received = chunk
                break
            }
            XCTAssertEqual(received, [5, 6, 7])
            XCTAssertEqual(try self.descriptors(openOn: fifo), 2, "the test's descriptor and the reader's")
            reader.cancel()
            let chunks = try await reader.value
            XCTAssertEqual(chunks, 1, "the iteration ended at the cancellation")
            try harness.waitOrThrow(for: "the disposal to close the reader's descriptor") { try self.descriptors(openOn: fifo) == 1 }
        }
    }

    /// Both ends of a Unix socket pair on the harness's loop: the one to send on, and the other's bytes recorded.
    private func connectedPair(_ harness: LoopHarness) throws -> (sender: UnixConnection, reader: EventRecorder<[UInt8]>) {
        let (near, far) = try UnixSocket.pair()
        let sender = try XCTUnwrap(try harness.record(UnixSocket.open(near)).waitForValues(1).first)
        let receiver = try XCTUnwrap(try harness.record(UnixSocket.open(far)).waitForValues(1).first)
        return (sender, try harness.record(receiver.bytes))
    }

    /// `sendFile` over a Unix socket pair: the exact bytes of the range arrive, and the async form returns
    /// the count the signal sends (the whole file with no count; fewer than asked when the file is shorter).
    func testAsyncSendFileDeliversTheExactBytesAndReturnsTheCountSent() async throws {
        let bytes = bytePattern(3 << 20, seed: 23)
        let name = try makeFile("send.bin", bytes)
        await withCheckedHarness { harness in
            let (sender, reader) = try connectedPair(harness)
            try await FileSystem.withOpenFile(name, on: harness.loop) { file in
                let range = try await FileSystem.sendFile(file, to: sender, offset: 100, count: bytes.count - 200)
                XCTAssertEqual(range, bytes.count - 200)
                let whole = try await FileSystem.sendFile(file, to: sender)
                XCTAssertEqual(whole, bytes.count, "nil count: up to the end of the file")
                let short = try await FileSystem.sendFile(file, to: sender, offset: bytes.count - 10, count: 1_000)
                XCTAssertEqual(short, 10, "the file had 10 bytes from there")
                XCTAssertEqual(try self.completes(harness, sender.sendFile(file, offset: 5, count: 20)), [20], "the signal sends the same count")
            }
            sender.close()
            XCTAssertTrue(try reader.waitForTermination().isCompleted)
            let expected = Array(bytes[100..<(bytes.count - 100)]) + bytes + Array(bytes[(bytes.count - 10)...]) + Array(bytes[5..<25])
            XCTAssertEqual(received(reader).count, expected.count)
            XCTAssertTrue(received(reader) == expected, "the exact bytes, in order")
        }
    }

    /// The same over TCP: a client on the loop reads the other end as the bytes come.
    func testAsyncSendFileOverTCPDeliversTheExactBytes() async throws {
        let bytes = bytePattern(2 << 20, seed: 24)
        let name = try makeFile("tcp.bin", bytes)
        await withCheckedHarness { harness in
            let (server, port) = try startServer(harness)
            let client = try XCTUnwrap(try harness.record(TCP.connect(host: "127.0.0.1", port: port)).waitForValues(1).first)
            let reader = try harness.record(client.bytes)
            let connection = try waitForAccepted(server, 1)[0]
            let sent = try await FileSystem.withOpenFile(name, on: harness.loop) { file in
                try await FileSystem.sendFile(file, to: connection, offset: 1)
            }
            XCTAssertEqual(sent, bytes.count - 1)
            connection.close()
            XCTAssertTrue(try reader.waitForTermination().isCompleted)
            XCTAssertTrue(received(reader) == Array(bytes[1...]), "the exact bytes from offset 1")
        }
    }

    /// `sendFile`'s errors are thrown as the signal sends them (naming the file), the connection goes on; a task
    /// cancelled before the call sends nothing (the write after it arrives alone).
    func testAsyncSendFileThrowsTheSignalsErrorsAndACancelledTaskSendsNothing() async throws {
        let name = try makeFile("small.bin", [1, 2, 3])
        await withCheckedHarness { harness in
            let (sender, reader) = try connectedPair(harness)
            try await FileSystem.withOpenFile(name, on: harness.loop) { file in
                try await self.assertThrowsTheSignalsError(harness, sender.sendFile(file, offset: -1),
                                                           { try await FileSystem.sendFile(file, to: sender, offset: -1) }, named: "EINVAL", path: name)
                let cancelled = Task {
                    withUnsafeCurrentTask { $0?.cancel() }
                    return try await FileSystem.sendFile(file, to: sender)
                }
                do {
                    let sent = try await cancelled.value
                    XCTFail("a cancelled task sent \(sent) bytes")
                } catch is CancellationError {}
                try await FileSystem.close(file)
                let closed = try await self.assertThrowsTheSignalsError(harness, sender.sendFile(file),
                                                                        { try await FileSystem.sendFile(file, to: sender) }, named: "EBADF", path: name)
                XCTAssertTrue(closed.message.contains("close()"), closed.description)
            }
            XCTAssertTrue(try harness.record(sender.write([9])).waitForTermination().isCompleted)
            sender.close()
            XCTAssertTrue(try reader.waitForTermination().isCompleted)
            XCTAssertEqual(received(reader), [9], "nothing of the file went: the refused and the cancelled sends, then the write")
        }
    }
}
