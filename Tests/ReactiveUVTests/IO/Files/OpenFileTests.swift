import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `Files.open`, `OpenFile` and `Files.makeTemporaryFile`.
final class OpenFileTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-openfile-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testPositionalWritesAndReadsAtOffsets() throws {
        let path = directory + "/data.bin"
        try checked { harness in
            let file = try open(harness, path, mode: .readWrite, options: [.create, .exclusive])
            XCTAssertEqual(try harness.record(file.write([1, 2, 3, 4], at: 0)).waitForValues(1), [4])
            XCTAssertEqual(try harness.record(file.write([9, 9], at: 10)).waitForValues(1), [2])
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data([1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 9, 9]),
                           "the gap before a write past the end reads as zeros")
            XCTAssertEqual(try harness.record(file.read(at: 2, count: 3)).waitForValues(1), [[3, 4, 0]])
            XCTAssertEqual(try harness.record(file.read(at: 9, count: 100)).waitForValues(1), [[0, 9, 9]], "short at the end")
            XCTAssertEqual(try harness.record(file.read(at: 12, count: 5)).waitForValues(1), [[]], "empty at the end")
            XCTAssertEqual(try harness.record(file.read(at: 1_000, count: 5)).waitForValues(1), [[]], "empty after the end")
            XCTAssertEqual(try harness.record(file.size()).waitForValues(1), [12])

            let info = try XCTUnwrap(try harness.record(file.stat()).waitForValues(1).first)
            XCTAssertEqual(info.type, .regular)
            XCTAssertEqual(info.size, 12)
            XCTAssertEqual(info.inode, try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? UInt64))

            XCTAssertTrue(try harness.record(file.truncate(to: 3)).waitForTermination().isCompleted)
            XCTAssertEqual(try harness.record(file.size()).waitForValues(1), [3])
            XCTAssertTrue(try harness.record(file.sync()).waitForTermination().isCompleted)
            XCTAssertTrue(try harness.record(file.dataSync()).waitForTermination().isCompleted)

            // Appends through one file run one after another: none overwrites another.
            let appends = try (0..<8).map { index in try harness.record(file.append([UInt8](repeating: UInt8(10 + index), count: 1000))) }
            for append in appends { XCTAssertEqual(try append.waitForValues(1), [1000]) }
            let contents = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            XCTAssertEqual(contents.count, 3 + 8_000)
            XCTAssertEqual(Set(contents.dropFirst(3)), Set((0..<8).map { UInt8(10 + $0) }))
        }
    }

    func testChunksReadFromAnOffsetToTheEnd() throws {
        let path = directory + "/chunks.bin"
        let contents = bytePattern(250_000, seed: 3)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let file = try open(harness, path)
            let chunks = try harness.record(file.chunks(from: 50_000, chunkSize: 64_000))
            XCTAssertTrue(try chunks.waitForTermination().isCompleted)
            XCTAssertEqual(chunks.values.map(\.count), [64_000, 64_000, 64_000, 8_000])
            XCTAssertTrue(received(chunks) == Array(contents[50_000...]))
            let pastEnd = try harness.record(file.chunks(from: 300_000))
            XCTAssertTrue(try pastEnd.waitForTermination().isCompleted)
            XCTAssertEqual(pastEnd.values.count, 0)
        }
    }

    /// Chunks of a source without an end (`/dev/zero`) near the largest offset: the last read stops at
    /// `Int.max` and the signal completes there. The reads ahead stopped one chunk short of it and, with
    /// nothing in flight, the subscriber waited for ever.
    func testChunksOfAnEndlessSourceCompleteAtTheLargestOffset() throws {
        try checked { harness in
            let zero = try open(harness, "/dev/zero")
            let chunks = try harness.record(zero.chunks(from: Int.max - 2 * 65_536 - 5, chunkSize: 65_536).map(\.count))
            XCTAssertTrue(try chunks.waitForTermination().isCompleted)
            XCTAssertEqual(chunks.values, [65_536, 65_536, 5])
            // The door still refuses a first chunk that would pass it (row 109).
            XCTAssertEqual(try failureName(harness.record(zero.chunks(from: Int.max - 5, chunkSize: 65_536))), "EINVAL")
        }
    }

    /// A `/proc` file says its size is 0 and holds bytes. Reads of more than 1 MiB sized their array by that
    /// size, so `read(at:count:)` with a count above 1 MiB, and `OpenFile.chunks` / `Files.chunks` with such a
    /// chunk size, sent nothing and completed, as if the file were empty. They read what it holds now (a
    /// file whose contents do not change while the test runs: this process's limits).
    func testReadsOfMoreThanOneMiBFromAProcFileReadWhatItHolds() throws {
        let path = "/proc/self/limits"
        let contents = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertGreaterThan(contents.count, 100)
        let large = 4 << 20
        try checked { harness in
            let file = try open(harness, path)
            XCTAssertEqual(try harness.record(file.read(at: 0, count: large)).waitForValues(1), [contents])
            XCTAssertEqual(try harness.record(file.read(at: 10, count: large)).waitForValues(1), [Array(contents[10...])])
            XCTAssertEqual(try harness.record(file.read(at: 0, count: 1 << 20)).waitForValues(1), [contents], "as below 1 MiB")
            let chunks = try harness.record(file.chunks(chunkSize: large))
            XCTAssertTrue(try chunks.waitForTermination().isCompleted)
            XCTAssertEqual(chunks.values.flatMap { $0 }, contents)
            let streamed = try harness.record(Files.chunks(path, chunkSize: large))
            XCTAssertTrue(try streamed.waitForTermination().isCompleted)
            XCTAssertEqual(streamed.values.flatMap { $0 }, contents)
        }
    }

    /// A consumer that cannot keep up pauses the reads (and the reads ahead): a `.bounded(2)` buffer, which
    /// fails with `bufferOverflow` when a source ignores the pause, takes 8 MiB in 4 KiB chunks, intact and in order.
    func testChunksFollowTheConsumersFlowControl() async throws {
        let path = directory + "/paced.bin"
        let contents = bytePattern(8 << 20, seed: 6)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        let loop = EventLoop(name: "paced reads")
        defer { loop.shutdown() }
        let bytes = try await FileSystem.withOpenFile(path, on: loop) { file in
            var bytes: [UInt8] = []
            for try await chunk in file.chunks(chunkSize: 4096).values(bufferingPolicy: .bounded(2)) {
                bytes += chunk
                await Task.yield()
            }
            return bytes
        }
        XCTAssertEqual(bytes.count, contents.count)
        XCTAssertTrue(bytes == contents)
    }

    /// A loop that shuts down while a consumer of `chunks` has paused it (no read in flight) ends that
    /// consumer with `EventLoopError.shutDown`; before, nothing told it and its `for try await` waited for ever.
    func testShutdownEndsPausedChunks() async throws {
        let path = directory + "/paused.bin"
        try Data(bytePattern(4 << 20, seed: 4)).write(to: URL(fileURLWithPath: path))
        let loop = EventLoop(name: "paused-chunks")
        let opened = EventRecorder(Files.open(path, on: loop))
        let file = try XCTUnwrap(try opened.waitForValues(1).first)
        let first = try await assertAPausedReaderEndsWithShutDown(file.chunks(chunkSize: 4096), on: loop)
        XCTAssertEqual(first?.count, 4096)
        XCTAssertTrue(file.isClosed)
    }

    /// A write larger than one request goes out in several, in order.
    func testAWriteLargerThanOneRequestIsSplitInOrder() throws {
        let path = directory + "/split.bin"
        let contents = bytePattern(10_001, seed: 8)
        try checked { harness in
            let file = try open(harness, path, mode: .write, options: [.create, .truncate])
            XCTAssertEqual(try harness.record(file.write(contents, at: 5, largestRequest: 1_000)).waitForValues(1), [10_001])
        }
        XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))), [0, 0, 0, 0, 0] + contents)
    }

    /// `close()` completes the open signal; every operation after a close fails with EBADF naming who closed it.
    func testOperationsAfterCloseAreEBADFNamingWhoClosed() throws {
        let path = directory + "/closed"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            // close()
            let opened = try harness.record(Files.open(path))
            let closedByClose = try XCTUnwrap(try opened.waitForValues(1).first)
            XCTAssertTrue(try harness.record(closedByClose.close()).waitForTermination().isCompleted)
            XCTAssertTrue(try opened.waitForTermination().isCompleted, "the open signal completes on close()")
            XCTAssertTrue(closedByClose.isClosed)
            for recorder in [try harness.record(closedByClose.read(at: 0, count: 1)), try harness.record(closedByClose.chunks())] {
                let error = try XCTUnwrap(try recorder.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EBADF")
                XCTAssertTrue(error.message.contains("close()") && error.context.contains(path), error.description)
            }
            let again = try XCTUnwrap(try harness.record(closedByClose.close()).waitForTermination().error as? UVError)
            XCTAssertEqual(again.name, "EBADF", "a second close()")

            // dispose
            let disposed = try harness.record(Files.open(path))
            let closedByDispose = try XCTUnwrap(try disposed.waitForValues(1).first)
            disposed.dispose()
            try harness.wait(for: "the dispose to close the file") { closedByDispose.isClosed }
            let afterDispose = try XCTUnwrap(try harness.record(closedByDispose.stat()).waitForTermination().error as? UVError)
            XCTAssertEqual(afterDispose.name, "EBADF")
            XCTAssertTrue(afterDispose.message.contains("disposed"), afterDispose.description)
        }

        // the loop's shutdown
        let loop = EventLoop(name: "file owner")
        let file = Locked<OpenFile?>(nil)
        let ended = Locked<(any Error)?>(nil)
        _ = Files.open(path, on: loop).subscribe(next: { value in file.withLock { $0 = value } }, error: { error in ended.withLock { $0 = error } })
        waitUntil("the file to open") { file.current != nil }
        loop.shutdown()
        let closedByShutdown = try XCTUnwrap(file.current)
        XCTAssertTrue(closedByShutdown.isClosed)
        // Its subscriber's home is the shared loop: the error hops there.
        waitUntil("the open signal to fail with the shutdown") { ended.current is EventLoopError }
        do {
            _ = try closedByShutdown.read(at: 0, count: 1).first(timeout: .seconds(10))
            XCTFail("a read after the shutdown succeeded")
        } catch let error as UVError {
            XCTAssertEqual(error.name, "EBADF")
            XCTAssertTrue(error.message.contains("shutdown"), error.description)
        }
    }

    /// A close() while operations are on the pool: the one still queued never runs and fails at once with
    /// `EBADF` naming the close (its cancellation in the message) and the operation and path; the one running
    /// finishes first, and only then is the descriptor closed and the close complete. Every pool thread is held
    /// (the running one through the file's own job machinery, the others by `ThreadPool.run`), so which
    /// operation is queued and which runs is certain.
    func testACloseFailsQueuedOperationsAndClosesAfterTheRunningOne() throws {
        let path = directory + "/held"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        let poolSize = ThreadPool.size
        let release = DispatchSemaphore(value: 0)
        let started = Locked(0)
        let log = Locked<[String]>([])
        try checked { harness in
            var released = false
            defer { if !released { for _ in 0..<poolSize { release.signal() } } }
            let file = try open(harness, path)
            try harness.onLoop {
                file.run("held", { _, _ -> Int in
                    started.withLock { $0 += 1 }
                    release.wait()
                    return 1
                }, completion: { result in log.withLock { $0.append("held: \(result)") } })
            }
            let holders = try (1..<poolSize).map { _ in
                try harness.record(ThreadPool.run(on: harness.loop) { started.withLock { $0 += 1 }; release.wait() })
            }
            try harness.wait(for: "every pool thread to be held") { started.current == poolSize }

            let (read, close) = try harness.onLoop { () -> (EventRecorder<[UInt8]>, EventRecorder<Void>) in
                let read = EventRecorder(file.read(at: 0, count: 3))  // queued: no pool thread is free
                let close = EventRecorder(file.close().on(completed: { log.withLock { $0.append("close completed") } }))
                return (read, close)
            }
            let error = try XCTUnwrap(try read.waitForTermination().error as? UVError, "\(read.events)")
            XCTAssertEqual(error.name, "EBADF")
            XCTAssertTrue(error.message.hasPrefix("the file was closed by its close() (") && error.message.contains("cancel"), error.description)
            XCTAssertEqual(error.context, "read \(path)")
            XCTAssertEqual(try harness.onLoop { close.terminal == nil }, true, "the close waits for the running job")
            XCTAssertEqual(try descriptors(openOn: path), 1, "the descriptor stays open under the running job")

            released = true
            for _ in 0..<poolSize { release.signal() }
            XCTAssertTrue(try close.waitForTermination().isCompleted)
            XCTAssertEqual(log.current, ["held: success(1)", "close completed"])
            XCTAssertEqual(try descriptors(openOn: path), 0)
            for holder in holders { XCTAssertTrue(try holder.waitForTermination().isCompleted) }
        }
    }

    /// A dispose stops a long write between its requests (close() would let it finish): the write fails with
    /// EBADF naming the dispose and how far it got, and the file holds less than was asked.
    func testDisposingStopsALongWriteBetweenItsRequests() throws {
        let path = directory + "/long-write"
        let bytes = [UInt8](repeating: 7, count: 64 << 20)
        try checked { harness in
            let opened = try harness.record(Files.open(path, mode: .write, options: [.create]))
            let file = try XCTUnwrap(try opened.waitForValues(1).first)
            let write = try harness.onLoop {
                // 16,384 requests of 4 KiB: the dispose, right behind the start, comes long before the last.
                let write = EventRecorder(file.write(bytes, at: 0, largestRequest: 4096))
                opened.dispose()
                return write
            }
            let error = try XCTUnwrap(try write.waitForTermination(timeout: .seconds(30)).error as? UVError, "\(write.events)")
            XCTAssertEqual(error.name, "EBADF")
            // Stopped between two requests ("disposed after N of M bytes"), or before it began (still queued).
            XCTAssertTrue(error.message.contains("disposed"), error.description)
            try harness.wait(for: "the file to close") { file.isClosed }
        }
        let written = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? -1
        XCTAssertLessThan(written, bytes.count)
    }

    /// Every way an open file ends closes its descriptor, once: the count of `/proc/self/fd` comes back.
    func testNoDescriptorLeaksAcrossOpenDisposeCloseShutdownAndErrors() throws {
        let path = directory + "/leak"
        try Data(bytePattern(1 << 20, seed: 1)).write(to: URL(fileURLWithPath: path))
        // One round first: the shared loop and libuv's pool open descriptors of their own at first use.
        try cycleOpenFiles(path, rounds: 1)
        let before = try openDescriptorTargets().count
        try cycleOpenFiles(path, rounds: 20)
        try waitUntilOrThrow("every descriptor to be closed") { try openDescriptorTargets().count <= before }
        XCTAssertEqual(try openDescriptorTargets().count, before)
    }

    /// Opens `path` in every way and ends each way there is, `rounds` times.
    private func cycleOpenFiles(_ path: String, rounds: Int) throws {
        try checked { harness in
            for round in 0..<rounds {
                // open, read, dispose (with reads still in flight)
                let disposed = try harness.record(Files.open(path))
                let file = try XCTUnwrap(try disposed.waitForValues(1).first)
                let reads = try (0..<4).map { try harness.record(file.read(at: $0 * 4096, count: 4096)) }
                disposed.dispose()
                for read in reads { _ = try read.waitForTermination() }
                // open, close (with a stream in flight)
                let closed = try harness.record(Files.open(path, mode: .readWrite))
                let second = try XCTUnwrap(try closed.waitForValues(1).first)
                _ = try harness.record(second.chunks(chunkSize: 4096))
                XCTAssertTrue(try harness.record(second.close()).waitForTermination().isCompleted)
                // dispose before the open finished
                let early = try harness.record(Files.open(path))
                early.dispose()
                // errors
                XCTAssertEqual(try failureName(harness.record(Files.open(directory + "/missing-\(round)"))), "ENOENT")
                XCTAssertEqual(try failureName(harness.record(Files.open(path, options: [.truncate]))), "EINVAL")
                // a temporary file
                let temporary = try harness.record(Files.makeTemporaryFile(in: directory))
                XCTAssertTrue(try harness.record(try XCTUnwrap(try temporary.waitForValues(1).first).close()).waitForTermination().isCompleted)
            }
        }
        // the loop's shutdown, with a file open and reads in flight
        for _ in 0..<rounds {
            let loop = EventLoop(name: "shut down with a file open")
            let opened = Locked<OpenFile?>(nil)
            _ = Files.open(path, on: loop).subscribe(next: { file in
                _ = file.chunks(chunkSize: 1024).subscribe(next: { _ in })
                opened.withLock { $0 = file }
            })
            waitUntil("the file to open") { opened.current != nil }
            loop.shutdown()
            XCTAssertEqual(opened.current?.isClosed, true)
        }
    }

    /// An open file names an inode, not a path: a file renamed over its path is not what it reads.
    func testAFileReplacedWhileOpenKeepsReadingTheOldInode() throws {
        let path = directory + "/replaced"
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let file = try open(harness, path)
            let oldInode = try XCTUnwrap(try harness.record(file.stat()).waitForValues(1).first).inode
            try Data("new contents".utf8).write(to: URL(fileURLWithPath: directory + "/next"))
            XCTAssertEqual(rename(directory + "/next", path), 0)
            XCTAssertEqual(try harness.record(file.read(at: 0, count: 100)).waitForValues(1), [Array("old".utf8)])
            XCTAssertEqual(try harness.record(file.stat()).waitForValues(1).first?.inode, oldInode)
            let reopened = try open(harness, path)
            XCTAssertEqual(try harness.record(reopened.read(at: 0, count: 100)).waitForValues(1), [Array("new contents".utf8)])
        }
    }

    func testWritingToAFileOpenedReadOnlyIsEBADF() throws {
        let path = directory + "/readonly"
        try Data([1]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let file = try open(harness, path, mode: .read)
            let write = try harness.record(file.write([2], at: 0))
            let error = try XCTUnwrap(try write.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EBADF")
            XCTAssertEqual(error.context, "write \(path)")
            XCTAssertEqual(try failureName(harness.record(file.append([2]))), "EBADF")
            XCTAssertFalse(file.isClosed, "a refused write leaves the file open")
            XCTAssertEqual(try harness.record(file.read(at: 0, count: 1)).waitForValues(1), [[1]])
        }
    }

    /// What the file's mode forbids is `EBADF` saying the mode: `truncate(to:)` of a file opened `.read` was the
    /// kernel's `EINVAL` "invalid argument" (which reads as a bad size), and a read of one opened `.write`, or a
    /// write of one opened `.read`, only "bad file descriptor".
    func testWhatTheOpenModeForbidsIsEBADFNamingTheMode() throws {
        let path = directory + "/modes"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let reading = try open(harness, path, mode: .read)
            for (name, signal) in [("write", reading.write([9], at: 0).map { _ in () }), ("append", reading.append([9]).map { _ in () }),
                                   ("ftruncate", reading.truncate(to: 1))] {
                let error = try XCTUnwrap(try harness.record(signal).waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EBADF", name)
                XCTAssertTrue(error.message.hasPrefix("the file was opened for reading only (mode .read)"), error.description)
                XCTAssertEqual(error.context, "\(name) \(path)")
            }
            let writing = try open(harness, path, mode: .write)
            for signal in [writing.read(at: 0, count: 2), writing.chunks()] {
                let error = try XCTUnwrap(try harness.record(signal).waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EBADF")
                XCTAssertEqual(error.message, "the file was opened for writing only (mode .write): a read needs .read or .readWrite")
                XCTAssertEqual(error.context, "read \(path)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data([1, 2, 3]), "nothing was changed")
        }
    }

    func testNegativeOffsetsSizesAndCountsAreEINVAL() throws {
        let path = directory + "/offsets"
        try Data([1]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let file = try open(harness, path, mode: .readWrite)
            let limit = OpenFile.maxReadCount
            // Each message names the value and the limit it breaks.
            let cases: [(String, EventRecorder<Int>, String)] = [
                ("read at -1", try harness.record(file.read(at: -1, count: 1).map(\.count)), "the offset must be 0 or more, not -1"),
                ("read count -1", try harness.record(file.read(at: 0, count: -1).map(\.count)), "the count must be 0...\(limit), not -1"),
                ("read count past the limit", try harness.record(file.read(at: 0, count: limit + 1).map(\.count)),
                 "the count must be 0...\(limit), not \(limit + 1)"),
                ("read past Int.max", try harness.record(file.read(at: Int.max, count: 2).map(\.count)),
                 "offset \(Int.max) + count 2 passes the largest file offset"),
                ("chunks from -1", try harness.record(file.chunks(from: -1).map(\.count)), "the offset must be 0 or more, not -1"),
                ("chunk size 0", try harness.record(file.chunks(chunkSize: 0).map(\.count)), "the count must be 1...\(limit), not 0"),
                ("write at -1", try harness.record(file.write([1], at: -1)), "the offset must be 0 or more, not -1"),
                ("truncate to -1", try harness.record(file.truncate(to: -1).map { 0 }), "the size must be 0 or more, not -1"),
            ]
            for (name, recorder, message) in cases {
                let error = try XCTUnwrap(try recorder.waitForTermination().error as? UVError, name)
                XCTAssertEqual(error.name, "EINVAL", name)
                XCTAssertEqual(error.message, message, name)
                XCTAssertTrue(error.context.hasSuffix(path), "\(name): \(error)")
            }
            XCTAssertEqual(try harness.record(file.read(at: 0, count: 1)).waitForValues(1), [[1]], "the file is still usable")
        }
    }

    func testOpenOptionsThatMakeNoSenseAreEINVAL() throws {
        let path = directory + "/options"
        try checked { harness in
            let modeNeeded = "truncate and append need a mode that writes (.write or .readWrite), not .read"
            for (mode, options, permissions, message) in [(OpenFile.Mode.read, OpenFile.Options.truncate, UInt32(0o644), modeNeeded),
                                                          (.read, [.append], 0o644, modeNeeded),
                                                          (.write, [.exclusive], 0o644, "exclusive needs create"),
                                                          (.write, [.create], 0o10000, "permissions must be 0...0o7777, not 0o10000")] {
                let error = try XCTUnwrap(try harness.record(Files.open(path, mode: mode, options: options, permissions: permissions))
                    .waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EINVAL")
                XCTAssertEqual(error.message, message)
                XCTAssertEqual(error.context, "Files.open \(path)")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing was created")
            let file = try open(harness, path, mode: .write, options: [.create, .exclusive], permissions: 0o600)
            XCTAssertEqual(try harness.record(file.stat()).waitForValues(1).first?.permissions, 0o600)
            XCTAssertEqual(try failureName(harness.record(Files.open(path, mode: .write, options: [.create, .exclusive]))), "EEXIST")
        }
    }

    func testTemporaryFilesHaveUniqueNamesAndAreOpenForReadingAndWriting() throws {
        try checked { harness in
            let first = try XCTUnwrap(try harness.record(Files.makeTemporaryFile(prefix: "scratch-", in: directory)).waitForValues(1).first)
            let second = try XCTUnwrap(try harness.record(Files.makeTemporaryFile(prefix: "scratch-", in: directory)).waitForValues(1).first)
            XCTAssertNotEqual(first.path, second.path)
            XCTAssertTrue(first.path.hasPrefix(directory + "/scratch-") && !first.path.hasSuffix("XXXXXX"), first.path)
            XCTAssertTrue(FileManager.default.fileExists(atPath: first.path))
            XCTAssertEqual(try harness.record(first.stat()).waitForValues(1).first?.permissions, 0o600)
            XCTAssertEqual(try harness.record(first.write([7, 8], at: 0)).waitForValues(1), [2])
            XCTAssertEqual(try harness.record(first.read(at: 0, count: 2)).waitForValues(1), [[7, 8]])

            let slash = try XCTUnwrap(try harness.record(Files.makeTemporaryFile(prefix: "a/b", in: directory)).waitForTermination().error as? UVError)
            XCTAssertEqual(slash.name, "EINVAL")
            XCTAssertEqual(try failureName(harness.record(Files.makeTemporaryFile(in: directory + "/missing"))), "ENOENT")
        }
    }

    /// A path with a NUL byte is refused with `EINVAL`, an empty one with `ENOENT`, by `Files.open`, `read`, `chunks`,
    /// `write` and `makeTemporaryFile` (its directory and prefix), before anything is opened. libuv takes C strings:
    /// each used to act on the part before the NUL (`made\0junk` created `made`, a read of it read `made`, a
    /// template `XXXXXX\0b` made a file with a random name), and an empty directory made the file in `/`.
    func testNULBytesAreEINVALAndEmptyPathsENOENTBeforeAnythingIsOpened() throws {
        let cut = directory + "/made"
        try checked { harness in
            let calls: [(String, Signal<Void>)] = [
                ("open", Files.open(cut + "\0junk", mode: .write, options: [.create]).map { _ in () }),
                ("Files.write", Files.write([1], to: cut + "\0junk")),
                ("Files.read", Files.read(cut + "\0junk").map { _ in () }),
                ("Files.chunks", Files.chunks(cut + "\0junk").map { _ in () }),
                ("mkstemp", Files.makeTemporaryFile(prefix: "XXXXXX\0b", in: directory).map { _ in () }),
                ("mkstemp", Files.makeTemporaryFile(prefix: "a", in: directory + "\0elsewhere").map { _ in () }),
            ]
            for (call, signal) in calls {
                let error = try XCTUnwrap(try harness.record(signal).waitForTermination().error as? UVError, call)
                XCTAssertEqual(error.name, "EINVAL", call)
                XCTAssertTrue(error.message.contains("contains a NUL byte"), error.description)
                XCTAssertTrue(error.context.hasPrefix(call + " ") && error.context.contains("\\0"), error.description)
            }
            for (call, signal) in [("open", Files.open("").map { _ in () }), ("Files.write", Files.write([1], to: "")),
                                   ("Files.read", Files.read("").map { _ in () }), ("Files.chunks", Files.chunks("").map { _ in () })] {
                let error = try XCTUnwrap(try harness.record(signal).waitForTermination().error as? UVError, call)
                XCTAssertEqual(error.name, "ENOENT", call)
                XCTAssertEqual(error.message, "the path is empty", call)
            }
            let noDirectory = try XCTUnwrap(try harness.record(Files.makeTemporaryFile(in: "")).waitForTermination().error as? UVError)
            XCTAssertEqual(noDirectory.name, "ENOENT")
            XCTAssertEqual(noDirectory.message, "the directory is empty")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [], "nothing was created")
    }

    func testWithOpenFileClosesTheFileWhenTheBodyReturnsOrThrows() async throws {
        let path = directory + "/scoped"
        let loop = EventLoop(name: "scoped files")
        defer { loop.shutdown() }
        let kept = try await FileSystem.withOpenFile(path, mode: .readWrite, options: [.create], on: loop) { file in
            _ = try await file.write(Array("scoped".utf8), at: 0).first()
            XCTAssertFalse(file.isClosed)
            return file
        }
        XCTAssertTrue(kept.isClosed)
        struct Failure: Error {}
        var thrown: OpenFile?
        do {
            try await FileSystem.withOpenFile(path, on: loop) { file in
                thrown = file
                throw Failure()
            }
            XCTFail("the body's error is rethrown")
        } catch is Failure {}
        XCTAssertEqual(thrown?.isClosed, true)
        let bytes = try await FileSystem.withTemporaryFile(in: directory, on: loop) { file in
            _ = try await file.write([5], at: 0).first()
            return try await file.read(at: 0, count: 8).first()
        }
        XCTAssertEqual(bytes, [5])
    }

    /// A task cancelled while `body` runs: `body` had finished its work, so `withOpenFile` returns what
    /// it returned (or rethrows its error), with the file closed. The close used to be awaited with
    /// `waitUntilCompleted()`, which a cancelled task left at once: `withOpenFile` threw
    /// `CancellationError` in place of the result, with the file often still open.
    func testACancelledTaskGetsTheBodysResultWithTheFileClosed() async throws {
        let path = directory + "/cancelled"
        let loop = EventLoop(name: "cancelled scoped files")
        defer { loop.shutdown() }
        struct Failure: Error {}
        for round in 0..<20 {
            let outcome = try await Task { () throws -> (result: String, closed: Bool?, descriptors: Int) in
                var opened: OpenFile?
                var result: String
                do {
                    result = try await FileSystem.withOpenFile(path, mode: .readWrite, options: [.create], on: loop) { file in
                        opened = file
                        _ = try await file.write(Array("round \(round)".utf8), at: 0).first()
                        withUnsafeCurrentTask { $0?.cancel() }
                        if round % 2 == 1 { throw Failure() }
                        return "written"
                    }
                } catch {
                    result = "\(type(of: error))"
                }
                return (result, opened?.isClosed, try descriptorsOpen(on: path))
            }.value
            XCTAssertEqual(outcome.result, round % 2 == 1 ? "Failure" : "written", "round \(round)")
            XCTAssertEqual(outcome.closed, true, "round \(round): withOpenFile returned before the file was closed")
            XCTAssertEqual(outcome.descriptors, 0, "round \(round): a descriptor on the file was open after withOpenFile returned")
        }
    }

    /// The files guide's open-file example is the code between the markers (compiled, not run: it reads a system
    /// path; what it does is tested by `testWithOpenFileClosesTheFileWhenTheBodyReturnsOrThrows` and
    /// `OpenFileAsyncTests.testAsyncOperationsReturnWhatTheirSignalsSend`).
    func testTheFilesGuideOpenFileExampleIsThisCode() throws {
        try assertDocumentBlock("docs/guides/files.md", containing: "FileSystem.withOpenFile(\"/var/log/app.log\")", matches: "GUIDE-FILES-OPENFILE")
        _ = Self.openFileGuideExample  // referenced so the compiler keeps checking it
    }

    private static func openFileGuideExample() async throws -> [UInt8] {
        // GUIDE-FILES-OPENFILE-BEGIN
        let header = try await FileSystem.withOpenFile("/var/log/app.log") { file in
            try await FileSystem.read(file, at: 0, count: 512)  // positional: no offset moves
        }
        // GUIDE-FILES-OPENFILE-END
        return header
    }

    // MARK: - helpers

    private func open(_ harness: LoopHarness, _ path: String, mode: OpenFile.Mode = .read, options: OpenFile.Options = [],
                      permissions: UInt32 = 0o644) throws -> OpenFile {
        let recorder = try harness.record(Files.open(path, mode: mode, options: options, permissions: permissions))
        return try XCTUnwrap(try recorder.waitForValues(1).first)
    }

    /// Waits for the recorder's end: the `UVError` name it failed with, or nil.
    private func failureName<Value>(_ recorder: EventRecorder<Value>) throws -> String? {
        (try recorder.waitForTermination().error as? UVError)?.name
    }

    private func descriptors(openOn path: String) throws -> Int { try descriptorsOpen(on: path) }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
