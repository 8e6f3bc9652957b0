import Foundation
@_spi(SchedulerImplementation) @testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// A one-request file-system signal (a stat) subscribed on its loop with `subscribe(next:error:completed:)`
/// keeps the subscribe path's promises: nothing after a dispose, one terminal event, a queued request
/// cancelled, the loop's shutdown reported, and nothing kept alive once the subscription ended,
/// however it ended.
final class OneRequestSignalTests: FileSystemTestCase {
    /// Something the subscriber's closures hold, to see when they are let go of.
    private final class Probe: @unchecked Sendable {}  // No state: only its lifetime is watched.
    // Written once on the loop, read by the test after the loop answered.
    private final class WeakProbe: @unchecked Sendable { weak var probe: Probe? }
    private final class Calls: @unchecked Sendable { var log: [String] = [] }  // Loop thread only.

    /// Subscribes to `signal` on the loop with closures that hold a probe and log what they are called with.
    private func subscribe(_ harness: LoopHarness, _ signal: Signal<FileInfo>, calls: Calls, weak: WeakProbe,
                           disposeIn next: Bool = false) throws -> SerialDisposable {
        try harness.onLoop { Self.subscribeHere(signal, calls: calls, weak: weak, disposeIn: next) }
    }

    /// `subscribe`, called on the loop thread.
    private static func subscribeHere(_ signal: Signal<FileInfo>, calls: Calls, weak: WeakProbe,
                                      disposeIn next: Bool = false) -> SerialDisposable {
        let probe = Probe()
        weak.probe = probe
        let holder = SerialDisposable()
        holder.inner = signal.subscribe(next: { info in
            withExtendedLifetime(probe) { calls.log.append("next \(info.size)") }
            if next { holder.dispose() }
        }, error: { error in
            withExtendedLifetime(probe) { calls.log.append("error \((error as? UVError)?.name ?? "?")") }
        }, completed: {
            withExtendedLifetime(probe) { calls.log.append("completed") }
        })
        return holder
    }

    func testAStatSendsItsValueThenCompletionAndKeepsNothingAfter() throws {
        let file = try makeFile("three", [1, 2, 3])
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            _ = try subscribe(harness, Files.stat(file), calls: calls, weak: weak)
            try harness.wait(for: "the stat to end") { (try? harness.onLoop { calls.log.count }) == 2 }
            XCTAssertEqual(try harness.onLoop { calls.log }, ["next 3", "completed"])
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
        }
    }

    func testAFailedStatSendsOneErrorAndKeepsNothingAfter() throws {
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            _ = try subscribe(harness, Files.stat(path("missing")), calls: calls, weak: weak)
            try harness.wait(for: "the stat to fail") { (try? harness.onLoop { calls.log.count }) == 1 }
            XCTAssertEqual(try harness.onLoop { calls.log }, ["error ENOENT"])
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
        }
    }

    /// Every pool thread held, a stat subscribed on the loop is queued; disposed, it is cancelled
    /// (`uv_cancel`: its request ends while the pool is still held), and none of its callbacks runs,
    /// then or once the pool is freed.
    func testAQueuedCallDisposedIsCancelledAndCallsNothing() throws {
        let file = try makeFile("three")
        let poolSize = ThreadPool.size
        let release = DispatchSemaphore(value: 0)
        let started = Locked(0)
        try checked { harness in
            var released = false
            defer { if !released { for _ in 0..<poolSize { release.signal() } } }
            let holders = try (0..<poolSize).map { _ in
                try harness.record(ThreadPool.run(on: harness.loop) { started.withLock { $0 += 1 }; release.wait() })
            }
            try harness.wait(for: "every pool thread to be held") { started.current == poolSize }
            let calls = Calls(), weak = WeakProbe()
            // The holders' requests are pending too: the stat's is the one more.
            let (before, queued) = try harness.onLoop { () -> (Int, Int) in
                let before = harness.loop.requests.count
                let subscription = Self.subscribeHere(Files.stat(file), calls: calls, weak: weak)
                let queued = harness.loop.requests.count
                subscription.dispose()
                return (before, queued)
            }
            XCTAssertEqual(queued, before + 1)
            // Cancelled, its callback (ECANCELED) runs while the pool is still held; only queued, it would wait.
            try harness.wait(for: "the cancelled request's callback, the pool still held") {
                (try? harness.onLoop { harness.loop.requests.count }) == before
            }
            XCTAssertEqual(started.current, poolSize, "a pool thread ran the cancelled stat")
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
            released = true
            for _ in 0..<poolSize { release.signal() }
            for holder in holders { XCTAssertTrue(try holder.waitForTermination().isCompleted) }
            XCTAssertEqual(try harness.onLoop { calls.log }, [], "a cancelled stat called its subscriber")
        }
    }

    /// A call still queued when its loop shuts down fails with `EventLoopError.shutDown`, once, and
    /// the loop closes with nothing left behind.
    func testALoopShutdownFailsAQueuedCallWithShutDown() throws {
        let file = try makeFile("three")
        let poolSize = ThreadPool.size
        let release = DispatchSemaphore(value: 0)
        let started = Locked(0)
        let loop = EventLoop(name: "fs-call-shutdown")
        var released = false
        defer { if !released { for _ in 0..<poolSize { release.signal() } } }
        for _ in 0..<poolSize {
            _ = ThreadPool.run(on: loop) { started.withLock { $0 += 1 }; release.wait() }.subscribe()
        }
        waitUntil("every pool thread to be held") { started.current == poolSize }
        let log = Locked<[String]>([])
        loop.execute {
            let subscription = Files.stat(file).subscribe(next: { _ in log.withLock { $0.append("next") } },
                                                          error: { error in log.withLock { $0.append("\(error)") } },
                                                          completed: { log.withLock { $0.append("completed") } })
            _ = subscription
        }
        // The shutdown waits for the held pool threads: run from another thread, released once the stat was told.
        let finished = Locked(false)
        let shutdownThread = Thread {
            loop.shutdown()
            finished.withLock { $0 = true }
        }
        shutdownThread.start()
        waitUntil("the queued stat to be told") { !log.current.isEmpty }
        released = true
        for _ in 0..<poolSize { release.signal() }
        waitUntil("the shutdown to finish") { finished.current }
        XCTAssertEqual(log.current, ["\(EventLoopError.shutDown(loop: "fs-call-shutdown"))"])
    }

    /// Disposed right after subscribing, on the loop, before the pool answered: no callback ever
    /// runs, the request ends (the harness checks none is left), and the closures are let go of.
    func testAStatDisposedBeforeItsAnswerCallsNothingAndKeepsNothing() throws {
        let file = try makeFile("three")
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            try harness.onLoop { Self.subscribeHere(Files.stat(file), calls: calls, weak: weak).dispose() }
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
            // Another stat on the same loop, answered after the first request's callback ran.
            let later = Calls(), laterWeak = WeakProbe()
            _ = try subscribe(harness, Files.stat(file), calls: later, weak: laterWeak)
            try harness.wait(for: "a later stat to end") { (try? harness.onLoop { later.log.count }) == 2 }
            XCTAssertEqual(try harness.onLoop { calls.log }, [], "a disposed stat called its subscriber")
        }
    }

    /// Disposed from its own `next`: the value arrives, the completion does not.
    func testAStatDisposedFromItsNextGetsNoCompletion() throws {
        let file = try makeFile("three")
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            _ = try subscribe(harness, Files.stat(file), calls: calls, weak: weak, disposeIn: true)
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
            XCTAssertEqual(try harness.onLoop { calls.log }, ["next 3"])
        }
    }

    /// Disposed from another thread while the answers come in: once `disposeAndWait()` has returned
    /// there, no callback is running and none begins, 200 times over. (`dispose()` alone never waits,
    /// so a callback that began before it may still be running when it returns.)
    func testNoCallbackRunsOrBeginsAfterDisposeAndWaitReturnedOnAnotherThread() throws {
        let file = try makeFile("three")
        try checked { harness in
            let late = Locked(0), delivered = Locked(0)
            for _ in 0..<200 {
                let returned = Locked(false)
                let note: @Sendable () -> Void = {
                    if returned.current { late.withLock { $0 += 1 } }
                    delivered.withLock { $0 += 1 }
                }
                let subscription = try harness.onLoop {
                    Files.stat(file).subscribe(next: { _ in note() }, error: { _ in note() }, completed: { note() })
                }
                let waited = DispatchSemaphore(value: 0)
                Task {
                    await subscription.disposeAndWait()
                    returned.withLock { $0 = true }
                    waited.signal()
                }
                XCTAssertEqual(waited.wait(timeout: .now() + .seconds(60)), .success, "disposeAndWait() never returned")
            }
            _ = try harness.onLoop {}
            XCTAssertEqual(late.current, 0, "callbacks ran after disposeAndWait() returned (of \(delivered.current) delivered)")
        }
    }

    /// `lock(); call.dispose(); unlock()` on a thread that is no loop's while the call's callback
    /// waits for that lock on the loop: `dispose()` returns, then the callback gets the lock (it
    /// used to wait for the callback: a deadlock, broken here only by the callback giving up).
    func testDisposeUnderTheCallersLockReturnsWhileTheCallbackWaitsForThatLock() throws {
        let file = try makeFile("three", [1, 2, 3])
        try checked { harness in
            let callerLock = NSLock()
            let entered = DispatchSemaphore(value: 0)
            let order = Locked<[String]>([])
            callerLock.lock()
            let subscription = try harness.onLoop {
                Files.stat(file).subscribe(next: { _ in
                    entered.signal()
                    if callerLock.lock(before: Date(timeIntervalSinceNow: 60)) {
                        order.append("next took the lock")
                        callerLock.unlock()
                    } else {
                        order.append("next gave up waiting for the lock")
                    }
                }, completed: { order.append("completed") })
            }
            XCTAssertEqual(entered.wait(timeout: .now() + .seconds(60)), .success, "the value never arrived")
            subscription.dispose()
            order.append("dispose returned")
            callerLock.unlock()
            try harness.wait(for: "the callback to end", timeout: .seconds(90)) { order.current.count == 2 }
            _ = try harness.onLoop {}
            // The completion, which would have begun after the value's callback, never does.
            XCTAssertEqual(order.current, ["dispose returned", "next took the lock"])
        }
    }

    /// `disposeAndWait()` of a call whose value callback is running on the loop returns only once
    /// that callback has returned (the task, started immediately on this thread, suspends).
    func testDisposeAndWaitReturnsOnlyAfterTheRunningCallbackReturned() throws {
        let file = try makeFile("three", [1, 2, 3])
        try checked { harness in
            let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let order = Locked<[String]>([])
            let subscription = try harness.onLoop {
                Files.stat(file).subscribe(next: { _ in
                    entered.signal()
                    let released = release.wait(timeout: .now() + .seconds(60)) == .success
                    order.append(released ? "next returned" : "next gave up")
                }, completed: { order.append("completed") })
            }
            XCTAssertEqual(entered.wait(timeout: .now() + .seconds(60)), .success, "the value never arrived")
            Task.immediate {
                await subscription.disposeAndWait()
                order.append("wait returned")
            }
            XCTAssertEqual(order.current, [], "disposeAndWait() returned while the callback was running")
            release.signal()
            try harness.wait(for: "the wait to return", timeout: .seconds(90)) { order.current.count == 2 }
            XCTAssertEqual(order.current, ["next returned", "wait returned"])
        }
    }
}
