import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Factories built on libuv requests: DNS, the thread pool, files.
final class DNSTests: XCTestCase {
    func testResolvesLocalhostAndNumericHosts() throws {
        try checked { harness in
            let localhost = try harness.record(DNS.resolve("localhost", port: 80))
            XCTAssertTrue(try localhost.waitForTermination().isCompleted)
            let addresses = try XCTUnwrap(localhost.values.first)
            XCTAssertTrue(addresses.contains(try SocketAddress(host: "127.0.0.1", port: 80)), "\(addresses)")
            XCTAssertTrue(addresses.allSatisfy { $0.port == 80 })

            let numeric = try harness.record(DNS.resolve("::1", port: 5))
            XCTAssertEqual(try numeric.waitForValues(1), [[try SocketAddress(host: "::1", port: 5)]])
            XCTAssertEqual(numeric.values.first?.first?.description, "[::1]:5")
        }
    }

    func testAnUnknownHostIsAnError() throws {
        try checked { harness in
            let lookup = try harness.record(DNS.resolve("no-such-host.invalid"))
            let error = try XCTUnwrap(try lookup.waitForTermination().error as? UVError)
            XCTAssertTrue(error.name.hasPrefix("EAI_"), "\(error)")
            XCTAssertTrue(error.description.contains("no-such-host.invalid"), error.description)
        }
    }

    func testSocketAddressRejectsNamesAndBadPorts() {
        XCTAssertThrowsError(try SocketAddress(host: "localhost", port: 80)) { XCTAssertEqual(($0 as? UVError)?.name, "EINVAL") }
        XCTAssertThrowsError(try SocketAddress(host: "127.0.0.1", port: 65_536)) { XCTAssertEqual(($0 as? UVError)?.name, "EINVAL") }
        XCTAssertEqual(try SocketAddress(host: "10.1.2.3", port: 8080).description, "10.1.2.3:8080")
        XCTAssertEqual(try SocketAddress(host: "::1", port: 1).family, .ipv6)
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

final class ThreadPoolTests: XCTestCase {
    /// The pool's size: libuv's default unless the environment changed it.
    private let poolSize = Int(ProcessInfo.processInfo.environment["UV_THREADPOOL_SIZE"] ?? "") ?? 4

    func testRunsTheWorkOffTheLoopAndDeliversTheResultOnIt() throws {
        try checked { harness in
            let ranOnLoop = Locked<Bool?>(nil)
            let work = try harness.record(ThreadPool.run { () -> Int in
                ranOnLoop.withLock { $0 = EventLoop.current != nil }
                return 6 * 7
            })
            XCTAssertTrue(try work.waitForTermination().isCompleted)
            XCTAssertEqual(work.values, [42])
            XCTAssertEqual(ranOnLoop.current, false, "the work ran on a loop thread")
            XCTAssertTrue(work.recorded.allSatisfy { $0.loopName == "harness" })
        }
    }

    func testWhatTheWorkThrowsIsTheError() throws {
        try checked { harness in
            let work = try harness.record(ThreadPool.run { () -> Int in throw TestFailure("no answer") })
            XCTAssertEqual("\(try XCTUnwrap(try work.waitForTermination().error))", "no answer")
        }
    }

    /// With every pool thread busy, work disposed before it starts never runs.
    func testDisposingBeforeTheWorkStartsCancelsIt() throws {
        try checked { harness in
            let gate = DispatchSemaphore(value: 0)
            let started = Locked(0)
            let blockers = try (0..<poolSize).map { _ in
                try harness.record(ThreadPool.run { () -> Int in
                    started.withLock { $0 += 1 }
                    gate.wait()
                    return 0
                })
            }
            try harness.wait(for: "every pool thread to be busy") { started.current == poolSize }
            let ran = Locked(false)
            let cancelled = try harness.record(ThreadPool.run { ran.withLock { $0 = true } })
            cancelled.dispose()
            // Queued after the cancelled work: once it has run, the cancelled work would have started before it.
            let sentinel = try harness.record(ThreadPool.run { 1 })
            for _ in 0..<poolSize { gate.signal() }
            XCTAssertTrue(try sentinel.waitForTermination().isCompleted)
            for blocker in blockers { try blocker.waitForTermination() }
            XCTAssertFalse(ran.current, "the disposed work ran anyway")
            XCTAssertEqual(cancelled.events.count, 0)
        }
    }

    /// Shutdown cancels queued work (its subscriber hears why) and waits for running work; uv_loop_close returns 0.
    func testShutdownCancelsQueuedWorkAndWaitsForRunningWork() throws {
        let loop = EventLoop(name: "pool-shutdown")
        let gate = DispatchSemaphore(value: 0)
        let started = Locked(0)
        let running = Locked<[EventRecorder<Int>]>([])
        let queuedRan = Locked(false)
        let queued = Locked<EventRecorder<Int>?>(nil)
        let poolSize = self.poolSize
        loop.execute {
            running.withLock { list in
                for _ in 0..<poolSize {
                    list.append(EventRecorder(ThreadPool.run { () -> Int in
                        started.withLock { $0 += 1 }
                        gate.wait()
                        return 1
                    }))
                }
            }
        }
        waitUntil("every pool thread busy") { started.current == poolSize }
        loop.execute { queued.withLock { $0 = EventRecorder(ThreadPool.run { queuedRan.withLock { $0 = true }; return 2 }) } }
        waitUntil("the queued work") { queued.current != nil }
        let shutdown = Locked<Result<ShutdownReport, any Error>?>(nil)
        Thread {
            let result = Result<ShutdownReport, any Error> { try loop.tryShutdown() }
            shutdown.withLock { $0 = result }
        }.start()
        waitUntil("the queued work to be told") { queued.current?.terminal != nil }
        XCTAssertEqual(queued.current?.terminal?.error as? EventLoopError, .shutDown(loop: "pool-shutdown"))
        XCTAssertNil(shutdown.current, "shutdown waits for the running work")
        for _ in 0..<poolSize { gate.signal() }
        waitUntil("the shutdown to finish") { shutdown.current != nil }
        XCTAssertEqual(try shutdown.current?.get().loopCloseResult, 0)
        XCTAssertFalse(queuedRan.current)
        for recorder in running.current {
            XCTAssertEqual(recorder.terminal?.error as? EventLoopError, .shutDown(loop: "pool-shutdown"))
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

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
        let contents = pattern(300_000, seed: 4)
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
        try Data(pattern(16 << 20, seed: 5)).write(to: URL(fileURLWithPath: path))
        try checked { harness in
            var recorders: [EventRecorder<[UInt8]>] = []
            for _ in 0..<20 {
                let chunks = try harness.record(Files.chunks(path, chunkSize: 1024))
                try chunks.waitForValues(1)
                recorders.append(chunks)
            }
            XCTAssertGreaterThan(descriptors(openOn: path), 0, "the streams hold the file open")
            for chunks in recorders { chunks.dispose() }
            try harness.wait(for: "every descriptor of the file to be closed") { descriptors(openOn: path) == 0 }
            XCTAssertTrue(recorders.allSatisfy { $0.terminal == nil && $0.values.count < 16 << 10 }, "the streams stopped early")
        }
    }

    /// How many of this process's descriptors are open on `path`.
    private func descriptors(openOn path: String) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == path }.count
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
