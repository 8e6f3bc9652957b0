import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `ThreadPool.run`: work on libuv's pool, its result delivered on the loop.
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
