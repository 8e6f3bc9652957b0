import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `Files.read`, `Files.chunks`, `Files.write`: contents, bad paths, sizes at and past every limit, FIFOs.
final class FilesTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-files-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testWriteThenReadBackWholeAndInChunks() throws {
        let path = directory + "/data.bin"
        let contents = bytePattern(300_000, seed: 4)
        try checked { harness in
            XCTAssertTrue(try harness.record(Files.write(contents, to: path)).waitForTermination().isCompleted)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(contents))

            let whole = try harness.record(Files.read(path))
            XCTAssertTrue(try whole.waitForTermination().isCompleted)
            XCTAssertEqual(whole.values.count, 1)
            XCTAssertTrue(whole.values.first == contents)

            let chunks = try harness.record(Files.chunks(path, chunkSize: 100_000))
            XCTAssertTrue(try chunks.waitForTermination().isCompleted)
            XCTAssertEqual(chunks.values.map(\.count), [100_000, 100_000, 100_000])
            XCTAssertTrue(received(chunks) == contents)

            XCTAssertTrue(try harness.record(Files.write([1, 2, 3], to: path, append: true)).waitForTermination().isCompleted)
            XCTAssertEqual(try harness.record(Files.read(path)).waitForValues(1)[0].suffix(4), [contents.last!, 1, 2, 3])
            XCTAssertTrue(try harness.record(Files.write([9], to: path)).waitForTermination().isCompleted)
            XCTAssertEqual(try harness.record(Files.read(path)).waitForValues(1), [[9]], "write replaces the contents")
        }
    }

    func testAnEmptyFileIsOneEmptyArray() throws {
        let path = directory + "/empty"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        try checked { harness in
            XCTAssertEqual(try harness.record(Files.read(path)).waitForValues(1), [[]])
            let chunks = try harness.record(Files.chunks(path))
            XCTAssertTrue(try chunks.waitForTermination().isCompleted)
            XCTAssertEqual(chunks.values.count, 0)
        }
    }

    func testBadPathsAreErrors() throws {
        try checked { harness in
            let missing = try harness.record(Files.read(directory + "/missing"))
            let error = try XCTUnwrap(try missing.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENOENT")
            XCTAssertEqual(error.context, "open \(directory)/missing")

            let directoryRead = try harness.record(Files.read(directory))
            XCTAssertEqual((try directoryRead.waitForTermination().error as? UVError)?.name, "EISDIR")

            let noParent = try harness.record(Files.write([1], to: directory + "/no/such/dir/file"))
            XCTAssertEqual((try noParent.waitForTermination().error as? UVError)?.name, "ENOENT")
        }
    }

    func testAnUnreadableFileIsEACCES() throws {
        let path = directory + "/secret"
        _ = FileManager.default.createFile(atPath: path, contents: Data([1]), attributes: [.posixPermissions: 0])
        chmod(directory, 0o755)  // `nobody` must reach the file to be refused by its own mode
        // As root the check runs as `nobody` (root reads every file).
        try withoutRootPrivileges {
            try checked { harness in
                XCTAssertEqual((try harness.record(Files.read(path)).waitForTermination().error as? UVError)?.name, "EACCES")
            }
        }
    }

    /// Disposing a stream mid-file stops it and closes the file (no descriptor leaks).
    func testDisposingAStreamClosesTheFile() throws {
        let path = directory + "/big.bin"
        try Data(bytePattern(16 << 20, seed: 5)).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            var recorders: [EventRecorder<[UInt8]>] = []
            for _ in 0..<20 {
                let chunks = try harness.record(Files.chunks(path, chunkSize: 1024))
                try chunks.waitForValues(1)
                recorders.append(chunks)
            }
            XCTAssertGreaterThan(try descriptorsOpen(on: path), 0, "the streams hold the file open")
            for chunks in recorders { chunks.dispose() }
            try harness.waitOrThrow(for: "every descriptor of the file to be closed") { try descriptorsOpen(on: path) == 0 }
            XCTAssertTrue(recorders.allSatisfy { $0.terminal == nil && $0.values.count < 16 << 10 }, "the streams stopped early")
        }
    }

    // MARK: - sizes

    /// A chunk size of 4 GiB or more does not fit libuv's 32-bit length: EINVAL naming the limit, not a trap.
    func testAChunkSizeOutsideItsRangeIsEINVALNamingTheLimit() throws {
        let path = directory + "/small"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            for size in [5 << 30, Files.maxChunkSize + 1, 0, -1] {
                let chunks = try harness.record(Files.chunks(path, chunkSize: size))
                let error = try XCTUnwrap(try chunks.waitForTermination().error as? UVError, "chunk size \(size)")
                XCTAssertEqual(error.name, "EINVAL")
                XCTAssertTrue(error.message.contains("\(size)") && error.message.contains("\(Files.maxChunkSize)"), error.description)
                XCTAssertEqual(chunks.values.count, 0)
            }
            let largest = try harness.record(Files.chunks(path, chunkSize: Files.maxChunkSize))
            XCTAssertTrue(try largest.waitForTermination().isCompleted)
            XCTAssertEqual(largest.values, [[1, 2, 3]], "the largest chunk size is allowed (and a small file needs no buffer that big)")
        }
    }

    /// 5 GiB written to /dev/null from memory that is mapped but never touched: the length does not fit
    /// libuv's 32 bits, so it goes out in requests of at most 1 GiB and completes.
    func testAWriteOfFourGiBOrMoreGoesOutInSeveralRequests() throws {
        let count = 5 << 30
        // MAP_NORESERVE: no memory is committed; /dev/null never reads the pages.
        let mapping = mmap(nil, count, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let mapping, mapping != MAP_FAILED else { throw XCTSkip("cannot map \(count) bytes of address space") }
        defer { munmap(mapping, count) }
        let bytes = UnsafeRawBufferPointer(start: mapping, count: count)
        try checked { harness in
            let write = try harness.record(Files.write(.raw(bytes), to: "/dev/null"))
            XCTAssertTrue(try write.waitForTermination(timeout: .seconds(60)).isCompleted, "\(write.events)")
        }
    }

    /// The splitting itself, with small requests: every byte lands once, in order, also when appending.
    func testAWriteLargerThanOneRequestIsSplitInOrder() throws {
        let path = directory + "/split.bin"
        let first = bytePattern(2_500, seed: 11)
        let second = bytePattern(1_001, seed: 12)
        try checked { harness in
            XCTAssertTrue(try harness.record(Files.write(.array(first), to: path, largestRequest: 1_000)).waitForTermination().isCompleted)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(first))
            XCTAssertTrue(try harness.record(Files.write(.array(second), to: path, append: true, largestRequest: 100)).waitForTermination().isCompleted)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(first + second))
        }
    }

    // MARK: - whole-file reads (point 6)

    /// /dev/zero never ends: the read stops with EFBIG once it passes maxSize, and says so.
    func testReadingAnEndlessSourceStopsAtMaxSizeWithEFBIG() throws {
        try checked { harness in
            let zero = try harness.record(Files.read("/dev/zero", maxSize: 1 << 20))
            let error = try XCTUnwrap(try zero.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EFBIG")
            XCTAssertTrue(error.message.contains("\(1 << 20)"), error.description)
            XCTAssertEqual(error.context, "read /dev/zero")
            XCTAssertEqual(zero.values.count, 0)

            let negative = try harness.record(Files.read("/dev/zero", maxSize: -1))
            XCTAssertEqual((try negative.waitForTermination().error as? UVError)?.name, "EINVAL")
        }
    }

    /// A regular file larger than maxSize is refused from its size, before a byte is read; one of exactly maxSize is read.
    func testAFileLargerThanMaxSizeIsRefusedBeforeReading() throws {
        let path = directory + "/ten.bin"
        let contents = bytePattern(10_000, seed: 3)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let reads = Locked(0)
            let refused = try harness.record(Files.read(path, maxSize: 9_999, on: nil, readSize: 1_000,
                                                        afterEachRead: { _ in reads.withLock { $0 += 1 } }))
            let error = try XCTUnwrap(try refused.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EFBIG")
            XCTAssertTrue(error.message.contains("10000") && error.message.contains("9999"), error.description)
            XCTAssertEqual(reads.current, 0, "the size alone decides")

            let exact = try harness.record(Files.read(path, maxSize: 10_000))
            XCTAssertTrue(try exact.waitForTermination().isCompleted)
            XCTAssertTrue(exact.values.first == contents)
        }
    }

    /// A few megabytes come back byte for byte, in one read call or in many; a file whose stat size is 0
    /// (/proc) is read to its end.
    func testAFewMegabytesReadBackExactly() throws {
        let path = directory + "/five.bin"
        let contents = bytePattern(5_000_123, seed: 8)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let whole = try harness.record(Files.read(path))
            XCTAssertTrue(try whole.waitForTermination().isCompleted)
            XCTAssertEqual(whole.values.count, 1)
            XCTAssertTrue(whole.values.first == contents)

            let calls = Locked(0)
            let pieces = try harness.record(Files.read(path, maxSize: Files.defaultMaxReadSize, on: nil, readSize: 65_536,
                                                       afterEachRead: { _ in calls.withLock { $0 += 1 } }))
            XCTAssertTrue(try pieces.waitForTermination().isCompleted)
            XCTAssertTrue(pieces.values.first == contents)
            XCTAssertGreaterThanOrEqual(calls.current, contents.count / 65_536, "read in 64 KiB system calls")

            let status = try harness.record(Files.read("/proc/self/status"))
            XCTAssertTrue(try status.waitForTermination().isCompleted)
            XCTAssertTrue(String(decoding: try XCTUnwrap(status.values.first), as: UTF8.self).contains("Pid:"))
        }
    }

    /// The read runs on a pool thread into the array it delivers, so the loop goes on while it runs: with the
    /// read held after its first system call, a repeating timer on the same loop keeps firing (a count, no time bound).
    func testTheLoopRunsWhileAWholeFileIsReadOnThePool() throws {
        let path = directory + "/four.bin"
        let contents = bytePattern(4 << 20, seed: 9)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let ticks = Locked(0)
            let timer = try harness.onLoop {
                harness.loop.scheduler.schedule(after: .zero, repeatingEvery: .milliseconds(1), leeway: .zero) {
                    ticks.withLock { $0 += 1 }
                }
            }
            defer { _ = try? harness.onLoop { timer?.dispose() } }
            let calls = Locked<[(onLoop: Bool, ticksDuringHold: Int)]>([])
            let read = try harness.record(Files.read(path, maxSize: Files.defaultMaxReadSize, on: nil, readSize: 65_536) { _ in
                var during = 0
                if calls.current.isEmpty {
                    // Hold the read until the loop has fired the timer twice more (or 10 s passed).
                    let before = ticks.current
                    let deadline = ContinuousClock.now + .seconds(10)
                    let held = DispatchSemaphore(value: 0)
                    while ticks.current < before + 2 && ContinuousClock.now < deadline { _ = held.wait(timeout: .now() + .milliseconds(1)) }
                    during = ticks.current - before
                }
                calls.withLock { $0.append((EventLoop.current != nil, during)) }
            })
            XCTAssertTrue(try read.waitForTermination().isCompleted)
            XCTAssertTrue(read.values.first == contents)
            let recorded = calls.current
            XCTAssertGreaterThanOrEqual(recorded.count, 64, "a multi-chunk read")
            XCTAssertFalse(recorded.contains { $0.onLoop }, "no read system call ran on a loop thread")
            XCTAssertGreaterThanOrEqual(recorded.first?.ticksDuringHold ?? 0, 2, "the timer fired while the read was in progress")
        }
    }

    /// `Files.chunks` of a regular file reads it as `OpenFile.chunks` does: reads ahead, paused by a
    /// consumer that cannot keep up. A `.bounded(2)` buffer, which fails with `bufferOverflow` when a
    /// source ignores the pause (as the one-read-at-a-time transfer did), takes 8 MiB in 4 KiB chunks,
    /// intact and in order; then nothing holds the file open.
    func testChunksOfARegularFileFollowTheConsumersFlowControl() async throws {
        let path = directory + "/paced.bin"
        let contents = bytePattern(8 << 20, seed: 6)
        try Data(contents).write(to: URL(fileURLWithPath: path))
        let loop = EventLoop(name: "paced chunks")
        defer { loop.shutdown() }
        var bytes: [UInt8] = []
        for try await chunk in Files.chunks(path, chunkSize: 4096, on: loop).values(bufferingPolicy: .bounded(2)) {
            bytes += chunk
            await Task.yield()
        }
        XCTAssertEqual(bytes.count, contents.count)
        XCTAssertTrue(bytes == contents, "the chunks arrived out of order or changed")
        // The close may wait for a read ahead still on the pool: wait for it (10 s is the hang guard).
        let giveUp = ContinuousClock.now + .seconds(10)
        while try descriptorsOpen(on: path) > 0 && ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertEqual(try descriptorsOpen(on: path), 0, "the file is still open after its chunks ended")
    }

    /// A loop that shuts down under `Files.chunks` of a regular file whose consumer paused tells the
    /// subscriber (`EventLoopError.shutDown`), closes the file, and its uv_loop_close returns 0.
    func testShutdownEndsAPausedRegularFileReadAndClosesTheFile() async throws {
        let path = directory + "/paused.bin"
        try Data(bytePattern(4 << 20, seed: 9)).write(to: URL(fileURLWithPath: path))
        weak var released: EventLoop?
        try await {
            let loop = EventLoop(name: "chunks-shutdown")
            released = loop
            let first = try await assertAPausedReaderEndsWithShutDown(Files.chunks(path, chunkSize: 4096, on: loop), on: loop)
            XCTAssertEqual(first?.count, 4096)
        }()
        XCTAssertEqual(try descriptorsOpen(on: path), 0, "the file is still open after the loop shut down")
        let giveUp = ContinuousClock.now + LoopHarness.defaultTimeout
        while released != nil && ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertNil(released, "something still holds the loop that shut down under the chunked read")
    }

    /// A file that grows after its size was taken is read to its new end.
    func testAFileThatGrowsDuringTheReadIsReadToItsNewEnd() throws {
        let path = directory + "/growing.bin"
        let start = bytePattern(300_000, seed: 1)
        let more = bytePattern(70_000, seed: 2)
        try Data(start).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            let appended = Locked(false)
            let read = try harness.record(Files.read(path, maxSize: Files.defaultMaxReadSize, on: nil, readSize: 100_000) { _ in
                guard !appended.current, let handle = FileHandle(forWritingAtPath: path) else { return }
                appended.withLock { $0 = true }
                handle.seekToEndOfFile()
                handle.write(Data(more))
                handle.closeFile()
            })
            XCTAssertTrue(try read.waitForTermination().isCompleted)
            XCTAssertTrue(read.values.first == start + more, "\(read.values.first?.count ?? -1) bytes")

            let capped = try harness.record(Files.read(path, maxSize: 300_000))
            XCTAssertEqual((try capped.waitForTermination().error as? UVError)?.name, "EFBIG", "the size seen now is past the limit")
        }
    }

    // MARK: - FIFOs (point 7)

    /// Five reads of FIFOs nobody writes to used to block every pool thread in open(): later file reads,
    /// DNS lookups and pool work waited for a writer. Now a normal read completes beside them, every pool
    /// thread is free at once, and disposing the FIFO reads closes their handles.
    func testFIFOsWithoutAWriterHoldNoPoolThread() throws {
        let fifos = try (0..<5).map { try makeFIFO("idle-\($0)") }
        let releaser = FIFOReleaser(fifos)
        defer { releaser.stop() }
        let path = directory + "/normal"
        try Data([7, 8, 9]).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            defer { releaser.start() }
            let waiting = try fifos.map { try harness.record(Files.read($0)) }
            let chunked = try harness.record(Files.chunks(fifos[0]))
            let normal = try harness.record(Files.read(path))
            XCTAssertTrue(try normal.waitForTermination().isCompleted, "a file read queued behind the FIFO reads")
            XCTAssertEqual(normal.values, [[7, 8, 9]])
            XCTAssertTrue(try everyPoolThreadIsFree(harness), "a pool thread is held by a FIFO read")
            XCTAssertTrue(waiting.allSatisfy { $0.events.isEmpty } && chunked.events.isEmpty, "nothing to report yet")
            for recorder in waiting + [chunked] { recorder.dispose() }
            XCTAssertTrue(try everyPoolThreadIsFree(harness))
        }   // the harness fails the test if a FIFO's pipe handle is still open
    }

    /// A FIFO is read on the loop as its writer writes: whole (at EOF), in chunks, and bounded by maxSize.
    func testAFIFOIsReadWhenItsWriterWritesAndCloses() throws {
        let fifo = try makeFIFO("fed")
        let releaser = FIFOReleaser([fifo])
        defer { releaser.stop() }
        try checked { harness in
            defer { releaser.start() }
            let whole = try harness.record(Files.read(fifo))
            let writer = try openWriter(fifo, harness)
            XCTAssertEqual(send([1, 2, 3, 4, 5], to: writer), 5)
            close(writer)
            XCTAssertTrue(try whole.waitForTermination().isCompleted)
            XCTAssertEqual(whole.values, [[1, 2, 3, 4, 5]])

            let chunks = try harness.record(Files.chunks(fifo, chunkSize: 2))
            let second = try openWriter(fifo, harness)
            XCTAssertEqual(send([1, 2, 3, 4, 5], to: second), 5)
            close(second)
            XCTAssertTrue(try chunks.waitForTermination().isCompleted)
            XCTAssertEqual(received(chunks), [1, 2, 3, 4, 5])
            XCTAssertTrue(chunks.values.allSatisfy { $0.count <= 2 }, "\(chunks.values)")

            let bounded = try harness.record(Files.read(fifo, maxSize: 3))
            let third = try openWriter(fifo, harness)
            XCTAssertEqual(send([1, 2, 3, 4, 5], to: third), 5)
            XCTAssertEqual((try bounded.waitForTermination().error as? UVError)?.name, "EFBIG")
            close(third)
        }
    }

    /// Writing to a FIFO nobody reads used to hold a pool thread in open() until a reader came: now ENXIO at once.
    func testWritingToAFIFOWithoutAReaderIsENXIO() throws {
        let fifo = try makeFIFO("unread")
        let releaser = FIFOReleaser([fifo])
        defer { releaser.stop() }
        try checked { harness in
            defer { releaser.start() }
            let write = try harness.record(Files.write([1], to: fifo))
            let error = try XCTUnwrap(try write.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENXIO")
            XCTAssertTrue(error.message.contains("no reader"), error.description)
        }
    }

    /// A loop that shuts down under FIFO reads (whole and in chunks) tells both subscribers, closes their
    /// pipe handles and its uv_loop_close returns 0.
    /// Then nothing is left holding the loop (the chunked read's operation used to keep itself and the loop).
    func testShutdownEndsFIFOReadsWithShutDown() throws {
        weak var released: EventLoop?
        try shutDownUnderFIFOReads { released = $0 }
        waitUntil("the shut-down loop to be released") { released == nil }
        XCTAssertNil(released, "something still holds the loop that shut down under the FIFO reads")
    }

    private func shutDownUnderFIFOReads(_ made: (EventLoop) -> Void) throws {
        let fifo = try makeFIFO("shutdown")
        let loop = EventLoop(name: "fifo-shutdown")
        made(loop)
        let whole = EventRecorder(Files.read(fifo, on: loop))
        let chunks = EventRecorder(Files.chunks(fifo, on: loop))
        waitUntil("both FIFO handles") { (try? loop.openHandles().count) == 2 }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.closedHandles.map(\.kind), ["pipe", "pipe"])
        XCTAssertEqual(report.loopCloseResult, 0)
        // The recorders' home is EventLoop.shared: the errors hop there after the shutdown sent them.
        XCTAssertEqual(try whole.waitForTermination(), .error(EventLoopError.shutDown(loop: "fifo-shutdown")))
        XCTAssertEqual(try chunks.waitForTermination(), .error(EventLoopError.shutDown(loop: "fifo-shutdown")))
        XCTAssertEqual(whole.events.count, 1)
        XCTAssertEqual(chunks.events.count, 1)
    }

    /// `Files.chunks` of a FIFO reads through the stream core: its handle is the core's
    /// `.fifo` stream, a consumer's pause stops libuv's reading (the handle goes inactive) and its
    /// resume restarts it, chunks keep the size asked for, EOF completes and closes the FIFO's
    /// descriptor, and disposing a waiting read closes the descriptor too.
    func testAFIFOIsReadByTheStreamCoreWhichPausesForItsConsumer() throws {
        let fifo = try makeFIFO("core")
        let releaser = FIFOReleaser([fifo])
        defer { releaser.stop() }
        try checked { harness in
            defer { releaser.start() }
            let received = Locked<[[UInt8]]>([])
            let completed = Locked(false)
            let subscription = try harness.onLoop {
                UncheckedBox(Files.chunks(fifo, chunkSize: 3).subscribe(
                    next: { chunk in received.withLock { $0.append(chunk) } },
                    completed: { completed.withLock { $0 = true } }))
            }.value
            defer { subscription.dispose() }
            func fifoHandle() throws -> OpenHandle? { try harness.loop.openHandles().first { $0.label?.contains(fifo) == true } }
            try harness.wait(for: "the FIFO's handle") { (try? fifoHandle()) != nil }
            XCTAssertEqual(try fifoHandle()?.kind, "pipe")
            XCTAssertEqual(try fifoHandle()?.label, "FIFO \(fifo) read by Files.chunks", "the stream core's label for a `.fifo` stream")
            XCTAssertEqual(try fifoHandle()?.isActive, true, "reading")

            // Registered on the loop thread, the subscription's home: there now.
            let control = try XCTUnwrap(try harness.onLoop { UncheckedBox((subscription as? Subscription)?.flowControl) }.value,
                                        "the FIFO's reading registered no flow control")
            try harness.onLoop { control.pause() }
            XCTAssertEqual(try fifoHandle()?.isActive, false, "a paused consumer stops libuv's reading")
            let writer = try openWriter(fifo, harness)
            XCTAssertEqual(send([1, 2, 3, 4, 5], to: writer), 5)
            try harness.onLoop { control.resume() }
            XCTAssertEqual(try fifoHandle()?.isActive, true, "resumed")
            close(writer)
            try harness.wait(for: "the FIFO's EOF") { completed.withLock { $0 } }
            XCTAssertEqual(received.withLock { $0 }.flatMap { $0 }, [1, 2, 3, 4, 5])
            XCTAssertTrue(received.withLock { $0 }.allSatisfy { $0.count <= 3 }, "\(received.withLock { $0 })")
            XCTAssertNil(try fifoHandle(), "the handle closes at EOF")
            XCTAssertEqual(try descriptorsOpen(on: fifo), 0, "the FIFO's descriptor closes with its handle")

            // Disposed while it waits for a writer: the handle and the descriptor close.
            let waiting = try harness.record(Files.chunks(fifo))
            try harness.wait(for: "the second FIFO handle") { (try? fifoHandle()) != nil }
            XCTAssertEqual(try descriptorsOpen(on: fifo), 1)
            waiting.dispose()
            try harness.wait(for: "the handle to close") { (try? fifoHandle()) == nil }
            XCTAssertEqual(try descriptorsOpen(on: fifo), 0, "disposing closes the FIFO's descriptor")
            XCTAssertTrue(waiting.events.isEmpty, "\(waiting.events)")

            // `Files.read` reads a FIFO through the same core stream, and joins its chunks at EOF.
            let whole = try harness.record(Files.read(fifo))
            try harness.wait(for: "the whole read's FIFO handle") { (try? fifoHandle()) != nil }
            XCTAssertEqual(try fifoHandle()?.label, "FIFO \(fifo) read by Files.read")
            let second = try openWriter(fifo, harness)
            XCTAssertEqual(send([6, 7], to: second), 2)
            close(second)
            XCTAssertTrue(try whole.waitForTermination().isCompleted)
            XCTAssertEqual(whole.values, [[6, 7]])
            XCTAssertNil(try fifoHandle())
            XCTAssertEqual(try descriptorsOpen(on: fifo), 0)
        }
    }

    /// The pool's size: libuv's default unless the environment changed it.
    private let poolSize = Int(ProcessInfo.processInfo.environment["UV_THREADPOOL_SIZE"] ?? "") ?? 4

    /// Whether `poolSize` pool jobs can all run at the same time (each waits up to 10 s for the others).
    private func everyPoolThreadIsFree(_ harness: LoopHarness) throws -> Bool {
        let arrived = Locked(0)
        let together = DispatchSemaphore(value: 0)
        let size = poolSize
        let jobs = try (0..<size).map { _ in
            try harness.record(ThreadPool.run { () -> Bool in
                let count = arrived.withLock { value -> Int in
                    value += 1
                    return value
                }
                if count == size { for _ in 0..<size { together.signal() } }
                return together.wait(timeout: .now() + .seconds(10)) == .success
            })
        }
        var allTogether = true
        for job in jobs {
            allTogether = try job.waitForTermination(timeout: .seconds(30)).isCompleted && job.values == [true] && allTogether
        }
        return allTogether
    }

    private func makeFIFO(_ name: String) throws -> String {
        let path = directory + "/" + name
        guard mkfifo(path, 0o600) == 0 else { throw TestFailure("mkfifo \(path): errno \(errno)") }
        return path
    }

    /// Opens `fifo` for writing once its reader has it open (a non-blocking open fails with ENXIO until then).
    private func openWriter(_ fifo: String, _ harness: LoopHarness) throws -> Int32 {
        var descriptor: Int32 = -1
        try harness.wait(for: "a reader of \(fifo)") {
            descriptor = open(fifo, O_WRONLY | O_NONBLOCK)
            return descriptor >= 0
        }
        return descriptor
    }

    /// Writes `bytes` to `descriptor` (a FIFO has room for them): how many went.
    private func send(_ bytes: [UInt8], to descriptor: Int32) -> Int {
        bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }


    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// Opens FIFOs from both ends without blocking, over and over on a thread of its own, from `start()` (at the
/// end of a test's harness body) until `stop()`: code that would open FIFOs blocking on the pool
/// then gets its pool threads back, so the test fails on its assertions instead of hanging the suite at teardown.
private final class FIFOReleaser: @unchecked Sendable {
    // `fifos` is immutable; `stopped` is a semaphore signalled once.
    private let fifos: [String]
    private let stopped = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var started = false  // test thread only

    init(_ fifos: [String]) { self.fifos = fifos }

    func start() {
        started = true
        Thread { [self] in
            repeat {
                for fifo in fifos {
                    for flags in [O_WRONLY | O_NONBLOCK, O_RDONLY | O_NONBLOCK] {
                        let descriptor = open(fifo, flags)
                        if descriptor >= 0 { close(descriptor) }
                    }
                }
            } while stopped.wait(timeout: .now() + .milliseconds(10)) == .timedOut
            finished.signal()
        }.start()
    }

    func stop() {
        guard started else { return }
        stopped.signal()
        finished.wait()
    }
}
