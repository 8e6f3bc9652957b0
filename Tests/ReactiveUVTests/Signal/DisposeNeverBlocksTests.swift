import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `dispose()` never blocks, on any thread: once it returned, no callback of the subscription
/// begins, and one already running on another thread finishes there. `disposeAndWait()` waits for
/// that callback by suspending, never by blocking a thread.
///
/// A callback here is held inside itself (by a lock or a semaphore the test controls) so that
/// "running" is a state the test puts it in, not a race; every wait has a 60 s hang guard and the
/// assertions are on order and counts.
final class DisposeNeverBlocksTests: XCTestCase {
    /// How long a held callback or a test step waits before giving up: a hang guard, never a deadline.
    private let hang: DispatchTimeInterval = .seconds(60)

    /// `lock(); subscription.dispose(); unlock()` on a thread that is no loop's, while the callback
    /// waits for that same lock: `dispose()` returns, and then the callback gets the lock. (It used
    /// to wait for the callback, which waited for the lock: a deadlock, broken here only by the
    /// callback giving up after the hang guard.) No callback begins after `dispose()` returned.
    func testDisposeUnderTheCallersLockReturnsWhileTheCallbackWaitsForThatLock() throws {
        let report = LoopHarness.run(timeout: .seconds(120)) { harness in
            let subject = Subject<Int>()
            let callerLock = NSLock()
            let entered = DispatchSemaphore(value: 0)
            let began = Locked(0)
            let order = Locked<[String]>([])
            let subscription = try harness.onLoop {
                subject.subscribeNext { _ in
                    began.withLock { $0 += 1 }
                    entered.signal()
                    if callerLock.lock(before: Date(timeIntervalSinceNow: 60)) {
                        order.append("callback took the lock")
                        callerLock.unlock()
                    } else {
                        order.append("callback gave up waiting for the lock")
                    }
                }
            }
            callerLock.lock()
            harness.loop.execute { subject.sendNext(1) }
            XCTAssertEqual(entered.wait(timeout: .now() + hang), .success, "the callback never began")
            subscription.dispose()
            order.append("dispose returned")
            // Sent while the first callback still runs: they reach the loop after it, when the
            // subscription is disposed, and none of them may begin a callback.
            harness.loop.execute {
                subject.sendNext(2)
                subject.sendNext(3)
            }
            callerLock.unlock()
            try harness.wait(for: "the callback to end") { order.current.count == 2 }
            _ = try harness.onLoop {}
            XCTAssertEqual(order.current, ["dispose returned", "callback took the lock"])
            XCTAssertEqual(began.current, 1, "a callback began after dispose() returned")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// `dispose()` from a Swift task (a cooperative thread) returns while a callback of the
    /// subscription runs on its home loop; the callback then finishes there.
    func testDisposeFromATaskReturnsWhileACallbackRuns() throws {
        let report = LoopHarness.run(timeout: .seconds(120)) { harness in
            let subject = Subject<Int>()
            let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let disposed = DispatchSemaphore(value: 0)
            let began = Locked(0)
            let order = Locked<[String]>([])
            let subscription = try harness.onLoop {
                subject.subscribeNext { _ in
                    began.withLock { $0 += 1 }
                    entered.signal()
                    let released = release.wait(timeout: .now() + .seconds(60)) == .success
                    order.append(released ? "callback released" : "callback gave up")
                }
            }
            harness.loop.execute { subject.sendNext(1) }
            XCTAssertEqual(entered.wait(timeout: .now() + hang), .success, "the callback never began")
            Task {
                subscription.dispose()
                order.append("dispose returned")
                disposed.signal()
            }
            XCTAssertEqual(disposed.wait(timeout: .now() + hang), .success, "dispose() in a task waited for the callback")
            harness.loop.execute { subject.sendNext(2) }
            release.signal()
            try harness.wait(for: "the callback to end") { order.current.count == 2 }
            _ = try harness.onLoop {}
            XCTAssertEqual(order.current, ["dispose returned", "callback released"])
            XCTAssertEqual(began.current, 1, "a callback began after dispose() returned")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// `disposeAndWait()` returns only once the callback running on the home loop has returned.
    /// Started with `Task.immediate`, the task runs on this thread up to its first suspension: had
    /// the wait returned without suspending, it would have returned before `Task.immediate` did.
    func testDisposeAndWaitReturnsOnlyAfterTheRunningCallbackReturned() throws {
        let report = LoopHarness.run(timeout: .seconds(120)) { harness in
            let subject = Subject<Int>()
            let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let began = Locked(0)
            let order = Locked<[String]>([])
            let subscription = try harness.onLoop {
                subject.subscribeNext { _ in
                    began.withLock { $0 += 1 }
                    entered.signal()
                    let released = release.wait(timeout: .now() + .seconds(60)) == .success
                    order.append(released ? "callback returned" : "callback gave up")
                }
            }
            harness.loop.execute { subject.sendNext(1) }
            XCTAssertEqual(entered.wait(timeout: .now() + hang), .success, "the callback never began")
            Task.immediate {
                await subscription.disposeAndWait()
                order.append("wait returned")
            }
            XCTAssertEqual(order.current, [], "disposeAndWait() returned while the callback was running")
            XCTAssertTrue(subscription.isDisposed, "disposeAndWait() did not dispose before waiting")
            harness.loop.execute { subject.sendNext(2) }
            release.signal()
            try harness.wait(for: "the wait to return") { order.current.count == 2 }
            XCTAssertEqual(order.current, ["callback returned", "wait returned"])
            _ = try harness.onLoop {}
            XCTAssertEqual(began.current, 1, "a callback began after the dispose")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// Awaited from inside one of the subscription's own callbacks (a task started immediately
    /// there), `disposeAndWait()` does not wait for itself: it returns before the callback goes on.
    func testDisposeAndWaitFromInsideTheCallbackReturnsAtOnce() throws {
        let report = LoopHarness.run { harness in
            let subject = Subject<Int>()
            let order = Locked<[String]>([])
            let own = Locked<(any Disposable)?>(nil)
            try harness.onLoop {
                let subscription = subject.subscribeNext { value in
                    order.append("callback \(value)")
                    guard let subscription = own.current else { return }
                    Task.immediate {
                        await subscription.disposeAndWait()
                        order.append("wait returned")
                    }
                    order.append("callback goes on")
                }
                own.withLock { $0 = subscription }
            }
            try harness.onLoop {
                subject.sendNext(1)
                subject.sendNext(2)
            }
            XCTAssertEqual(order.current, ["callback 1", "wait returned", "callback goes on"])
            own.withLock { $0 = nil }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// More tasks than Swift's cooperative pool has threads (and than libdispatch on Linux adds
    /// when its threads all block, one a second up to 255) await `disposeAndWait()` while the
    /// callback runs: every one of them gets to its wait, so none holds a thread, and each returns
    /// only after the callback did.
    func testManyTasksAwaitingTheRunningCallbackHoldNoThread() throws {
        let waiters = max(256, ProcessInfo.processInfo.activeProcessorCount * 8)
        let report = LoopHarness.run(timeout: .seconds(120)) { harness in
            let subject = Subject<Int>()
            let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let callbackReturned = Locked(false)
            let subscription = try harness.onLoop {
                subject.subscribeNext { _ in
                    entered.signal()
                    _ = release.wait(timeout: .now() + .seconds(60))
                    callbackReturned.withLock { $0 = true }
                }
            }
            harness.loop.execute { subject.sendNext(1) }
            XCTAssertEqual(entered.wait(timeout: .now() + hang), .success, "the callback never began")
            let started = Locked(0)
            let sawTheCallbackReturned = Locked<[Bool]>([])
            for _ in 0..<waiters {
                Task {
                    started.withLock { $0 += 1 }
                    await subscription.disposeAndWait()
                    sawTheCallbackReturned.append(callbackReturned.current)
                }
            }
            try harness.wait(for: "all \(waiters) tasks to start (a blocked wait holds its thread)", timeout: .seconds(60)) {
                started.current == waiters
            }
            XCTAssertEqual(sawTheCallbackReturned.current, [], "a wait returned while the callback was running")
            release.signal()
            try harness.wait(for: "every wait to return", timeout: .seconds(60)) {
                sawTheCallbackReturned.current.count == waiters
            }
            XCTAssertEqual(sawTheCallbackReturned.current, Array(repeating: true, count: waiters))
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// A subscription that ended by itself has set its flag before its `completed` callback runs:
    /// `disposeAndWait()` then still waits for that callback.
    func testDisposeAndWaitAfterTheEndWaitsForTheCompletedCallback() throws {
        let report = LoopHarness.run(timeout: .seconds(120)) { harness in
            let subject = Subject<Int>()
            let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let order = Locked<[String]>([])
            let subscription = try harness.onLoop {
                subject.subscribe(completed: {
                    entered.signal()
                    let released = release.wait(timeout: .now() + .seconds(60)) == .success
                    order.append(released ? "completed returned" : "completed gave up")
                })
            }
            harness.loop.execute { subject.sendCompleted() }
            XCTAssertEqual(entered.wait(timeout: .now() + hang), .success, "completed never ran")
            XCTAssertTrue(subscription.isDisposed)
            Task.immediate {
                await subscription.disposeAndWait()
                order.append("wait returned")
            }
            XCTAssertEqual(order.current, [], "disposeAndWait() returned while completed was running")
            release.signal()
            try harness.wait(for: "the wait to return") { order.current.count == 2 }
            XCTAssertEqual(order.current, ["completed returned", "wait returned"])
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// Compounds, serial and scoped disposables wait for the subscriptions they hold.
    func testHoldersOfASubscriptionWaitForItsRunningCallback() throws {
        let report = LoopHarness.run(timeout: .seconds(120)) { harness in
            let subject = Subject<Int>()
            for holder in ["compound", "serial", "scoped"] {
                let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
                let order = Locked<[String]>([])
                let subscription = try harness.onLoop {
                    subject.subscribeNext { _ in
                        entered.signal()
                        let released = release.wait(timeout: .now() + .seconds(60)) == .success
                        order.append(released ? "callback returned" : "callback gave up")
                    }
                }
                let held: any Disposable = switch holder {
                case "compound": CompoundDisposable([ActionDisposable {}, subscription])
                case "serial": SerialDisposable(subscription)
                default: ScopedDisposable(subscription)
                }
                harness.loop.execute { subject.sendNext(1) }
                XCTAssertEqual(entered.wait(timeout: .now() + hang), .success, "\(holder): the callback never began")
                Task.immediate {
                    await held.disposeAndWait()
                    order.append("wait returned")
                }
                XCTAssertEqual(order.current, [], "\(holder): the wait returned while the callback was running")
                XCTAssertTrue(subscription.isDisposed, "\(holder): the subscription was not disposed")
                release.signal()
                try harness.wait(for: "\(holder): the wait to return") { order.current.count == 2 }
                XCTAssertEqual(order.current, ["callback returned", "wait returned"], holder)
            }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}
