import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The subscribe path: cold signals, the pass-through gate, teardown.
final class SubscribeSemanticsTests: XCTestCase {
    func testEachSubscriberRunsDidSubscribeOnceAndGetsTheWholeSequence() {
        let subscriptions = Locked(0)
        let signal = Signal<Int> { subscriber in
            subscriptions.withLock { $0 += 1 }
            for value in 1...3 { subscriber.sendNext(value) }
            subscriber.sendCompleted()
            return nil
        }
        let test = TestScheduler()
        let recorders = test.performAsCurrent { (0..<3).map { _ in EventRecorder(signal) } }
        XCTAssertEqual(subscriptions.current, 3)
        for recorder in recorders {
            XCTAssertEqual(recorder.events, [.next(1), .next(2), .next(3), .completed])
        }
    }

    func testNothingIsDeliveredAfterCompletionOrError() {
        let afterCompletion = Signal<Int> { subscriber in
            subscriber.sendNext(1)
            subscriber.sendCompleted()
            subscriber.sendNext(2)
            subscriber.sendError(UVError(code: UVError.cancelledCode))
            subscriber.sendCompleted()
            return nil
        }
        let afterError = Signal<Int> { subscriber in
            subscriber.sendError(UVError(code: UVError.cancelledCode))
            subscriber.sendNext(3)
            subscriber.sendCompleted()
            return nil
        }
        let test = TestScheduler()
        let (a, b) = test.performAsCurrent { (EventRecorder(afterCompletion), EventRecorder(afterError)) }
        XCTAssertEqual(a.events, [.next(1), .completed])
        XCTAssertEqual(b.events, [.error(UVError(code: UVError.cancelledCode))])
    }

    func testNothingIsDeliveredAfterDisposeOnTheHomeThread() {
        let produced = Locked(0)
        // Sends ten values in one burst, one virtual second after subscribing.
        let signal = Signal<Int> { subscriber in
            subscriber.homeScheduler.schedule(after: .seconds(1)) {
                for value in 0..<10 {
                    produced.withLock { $0 += 1 }
                    subscriber.sendNext(value)
                }
            }
        }
        let received = Locked<[Int]>([])
        let subscription = Locked<(any Disposable)?>(nil)
        let test = TestScheduler()
        let disposable = test.performAsCurrent {
            signal.subscribeNext { value in
                received.withLock { $0.append(value) }
                if value == 2 { subscription.current?.dispose() }
            }
        }
        subscription.withLock { $0 = disposable }
        test.run()
        XCTAssertEqual(received.current, [0, 1, 2], "values sent after dispose() must be dropped")
        XCTAssertEqual(produced.current, 10)
        XCTAssertTrue(disposable.isDisposed)
    }

    func testDisposalAndTerminationRunTheCleanupOnceAndBeforeTheTerminalCallback() {
        let log = Locked<[String]>([])
        let signal = Signal<Int> { subscriber in
            subscriber.sendNext(1)
            subscriber.sendCompleted()
            return ActionDisposable { log.withLock { $0.append("cleanup") } }
        }
        let lateSignal = Signal<Int> { subscriber in
            let box = UncheckedBox(subscriber)
            // Complete later, so the returned disposable is attached before completion.
            subscriber.homeScheduler.schedule(after: .seconds(1)) { box.value.sendCompleted() }
            return ActionDisposable { log.withLock { $0.append("late cleanup") } }
        }
        let test = TestScheduler()
        test.performAsCurrent {
            signal.subscribe(next: { value in log.withLock { $0.append("next \(value)") } },
                             completed: { log.withLock { $0.append("completed") } })
            lateSignal.subscribe(completed: { log.withLock { $0.append("late completed") } })
        }
        test.run()
        // RAC's subscriber disposes before it calls the completed block; a cleanup
        // returned after a synchronous completion runs as soon as it is returned.
        XCTAssertEqual(log.current, ["next 1", "completed", "cleanup", "late cleanup", "late completed"])
    }

    func testDisposeTearsDownOnTheHomeLoopAndStopsTheSource() throws {
        try withHarness { harness in
            let cleanupThread = Locked<String?>(nil)
            let ticks = Signal<Int> { subscriber in
                let timer = subscriber.homeScheduler.schedule(after: .milliseconds(1), repeatingEvery: .milliseconds(1)) {
                    subscriber.sendNext(1)
                }
                return ActionDisposable {
                    cleanupThread.withLock { $0 = EventLoop.current?.name }
                    timer?.dispose()
                }
            }
            let recorder = try harness.record(ticks)
            try recorder.waitForValues(3)
            recorder.dispose()  // from the test thread: teardown hops to the loop
            try harness.wait(for: "the cleanup") { cleanupThread.current != nil }
            XCTAssertEqual(cleanupThread.current, "harness")
            let count = recorder.values.count
            _ = try harness.onLoop {}
            XCTAssertEqual(recorder.values.count, count, "an event arrived after dispose() returned")
        }
    }

    /// Disposing from another thread while the home loop delivers back to back: once `dispose()`
    /// has returned, no callback begins (at most the one that had begun, not yet counted, is
    /// counted after); once `disposeAndWait()` has returned, none is running either, and the count
    /// stays where it is.
    func testNoCallbackBeginsAfterDisposeFromAnotherThreadAndNoneRunsAfterDisposeAndWait() throws {
        try withHarness { harness in
            for _ in 0..<50 {
                let inCallback = Locked(false)
                let began = Locked(0)
                let flood = Signal<Int> { subscriber in
                    // Keeps the loop delivering: each value schedules the next.
                    let box = UncheckedBox(subscriber)
                    @Sendable func send(_ n: Int) {
                        if box.value.isDisposed { return }
                        box.value.sendNext(n)
                        box.value.homeScheduler.schedule { send(n + 1) }
                    }
                    send(0)
                    return nil
                }
                let subscription = try harness.onLoop {
                    UncheckedBox(flood.subscribeNext { _ in
                        began.withLock { $0 += 1 }
                        inCallback.withLock { $0 = true }
                        let until = SchedulerInstant.now + .microseconds(300)
                        while SchedulerInstant.now < until {}  // a callback that takes a while
                        inCallback.withLock { $0 = false }
                    })
                }.value
                try harness.wait(for: "some deliveries") { began.current > 3 }
                subscription.dispose()
                let beganWhenDisposeReturned = began.current
                let waited = DispatchSemaphore(value: 0)
                let runningAfterTheWait = Locked<Bool?>(nil), beganAfterTheWait = Locked(0)
                Task {
                    await subscription.disposeAndWait()
                    runningAfterTheWait.withLock { $0 = inCallback.current }
                    beganAfterTheWait.withLock { $0 = began.current }
                    waited.signal()
                }
                XCTAssertEqual(waited.wait(timeout: .now() + .seconds(60)), .success, "disposeAndWait() never returned")
                _ = try harness.onLoop {}
                _ = try harness.onLoop {}
                XCTAssertLessThanOrEqual(began.current, beganWhenDisposeReturned + 1, "a callback began after dispose() returned")
                XCTAssertEqual(runningAfterTheWait.current, false, "disposeAndWait() returned while a callback was still running")
                XCTAssertEqual(began.current, beganAfterTheWait.current, "a callback began after disposeAndWait() returned")
            }
        }
    }

    func testSubscribingOffLoopStartsOnTheSharedLoopAsynchronously() throws {
        let started = Locked<String?>(nil)
        let signal = Signal<Int> { subscriber in
            started.withLock { $0 = EventLoop.current?.name }
            subscriber.sendNext(7)
            subscriber.sendCompleted()
            return nil
        }
        let recorder = EventRecorder(signal)
        XCTAssertEqual(try recorder.waitForTermination(), .completed)
        XCTAssertEqual(started.current, "shared")
        XCTAssertEqual(recorder.values, [7])
        XCTAssertTrue(recorder.recorded.allSatisfy { $0.loopName == "shared" })
    }

    func testSendsFromOtherThreadsArriveOnTheHomeThreadInOrderAndNeverConcurrently() throws {
        try withHarness { harness in
            let threads = 4, perThread = 5_000
            let signal = Signal<(Int, Int)> { subscriber in
                let box = UncheckedBox(subscriber)
                Thread {
                    runConcurrently(threads) { thread in
                        for n in 0..<perThread { box.value.sendNext((thread, n)) }
                    }
                    box.value.sendCompleted()
                }.start()
                return nil
            }
            let recorder = try harness.record(signal)
            try recorder.waitForTermination(timeout: .seconds(30))
            XCTAssertFalse(recorder.sawConcurrentDelivery)
            XCTAssertTrue(recorder.recorded.allSatisfy { $0.loopName == "harness" && $0.onHomeThread })
            var next = Array(repeating: 0, count: threads)
            for (thread, n) in recorder.values {
                XCTAssertEqual(n, next[thread], "thread \(thread)'s values arrived out of order")
                next[thread] = n + 1
            }
            XCTAssertEqual(next, Array(repeating: perThread, count: threads))
        }
    }

    func testReentrantSendsAreDeliveredDepthFirst() {
        let stored = Locked<Subscriber<Int>?>(nil)
        let signal = Signal<Int> { subscriber in
            stored.withLock { $0 = subscriber }
            subscriber.sendNext(1)
            subscriber.sendNext(2)
            subscriber.sendCompleted()
            return nil
        }
        let received = Locked<[Int]>([])
        let test = TestScheduler()
        test.performAsCurrent {
            signal.subscribeNext { value in
                received.withLock { $0.append(value) }
                if value == 1 { stored.current?.sendNext(10) }  // the subscriber makes its source send
            }
        }
        XCTAssertEqual(received.current, [1, 10, 2])
    }

    func testConstructors() {
        struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }
        let test = TestScheduler()
        let recorders = test.performAsCurrent {
            (EventRecorder(Signal.return(5)), EventRecorder(Signal<Int>.empty), EventRecorder(Signal<Int>.never),
             EventRecorder(Signal<Int>.error(Boom())), EventRecorder(Signal.from([1, 2, 3])),
             EventRecorder(Signal.defer { Signal.return(9) }))
        }
        XCTAssertEqual(recorders.0.events, [.next(5), .completed])
        XCTAssertEqual(recorders.1.events, [.completed])
        XCTAssertEqual(recorders.2.events, [])
        XCTAssertEqual(recorders.3.events, [.error(Boom())])
        XCTAssertEqual(recorders.4.events, [.next(1), .next(2), .next(3), .completed])
        XCTAssertEqual(recorders.5.events, [.next(9), .completed])
    }

    func testForwardingToAnotherSubscriberTearsDownWithIt() {
        let inner = Locked(0)
        let source = Signal<Int> { subscriber in
            subscriber.sendNext(1)
            return ActionDisposable { inner.withLock { $0 += 1 } }
        }
        let outer = Signal<Int> { subscriber in source.subscribe(subscriber) }
        let test = TestScheduler()
        let recorder = test.performAsCurrent { EventRecorder(outer) }
        XCTAssertEqual(recorder.values, [1])
        test.performAsCurrent { recorder.dispose() }
        XCTAssertEqual(inner.current, 1, "disposing the outer subscription disposes the forwarded one")
    }

    func testAFinishedSubscriptionReleasesItsClosures() {
        final class Token: Sendable {}
        weak var weakToken: Token?
        let test = TestScheduler()
        test.performAsCurrent {
            let token = Token()
            weakToken = token
            let signal = Signal<Int> { subscriber in
                subscriber.sendNext(1)
                subscriber.homeScheduler.schedule(after: .seconds(1)) { subscriber.sendCompleted() }
                return nil
            }
            signal.subscribeNext { _ in _ = token }
        }
        XCTAssertNotNil(weakToken, "alive while subscribed")
        test.run()
        XCTAssertNil(weakToken, "the subscriber's closures are released after the signal ended")
    }

    /// A subscriber disposed before it forwards to a source (a dispose from another thread that won
    /// the race, or an operator's child made after its parent ended) is attached to an already torn
    /// down subscription. Nothing may keep the source's gate then: the gate holds the subscription,
    /// so a gate stored after teardown kept both, the subject it joined and the home, for ever.
    func testASourceForwardedToAnAlreadyDisposedSubscriberKeepsNothingAlive() {
        let forms: [(String, @Sendable (Subject<Int>) -> Signal<Int>)] = [
            ("the subject itself", { $0 }),
            ("a fused operator (map)", { $0.map { $0 + 1 } }),
            ("an operator with child subscriptions (then)", { $0.then { Signal<Int>.return(1) } }),
            ("a signal made with a closure", { subject in Signal<Int> { subscriber in subject.subscribe(subscriber) } }),
        ]
        for (name, form) in forms {
            let weakSubject = WeakReference<Subject<Int>>()
            let weakForwarder = WeakReference<Subscriber<Int>>()
            let test = TestScheduler()
            let recorder: EventRecorder<Int> = test.performAsCurrent {
                let subject = Subject<Int>()
                weakSubject.object = subject
                let source = form(subject)
                let outer = Signal<Int> { subscriber in
                    weakForwarder.object = subscriber
                    subscriber.disposable.dispose()
                    return source.subscribe(subscriber)
                }
                return EventRecorder(outer)
            }
            test.run()
            XCTAssertEqual(recorder.events, [], name)
            XCTAssertNil(weakSubject.object, "\(name): the subject is kept alive by a subscription that was disposed before it attached")
            XCTAssertNil(weakForwarder.object, "\(name): the forwarding subscriber is kept alive")
        }
    }

    func testASourceForwardedToAnAlreadyDisposedSubscriberIsNotStarted() {
        let started = Locked(0)
        let source = Signal<Int> { subscriber in
            started.withLock { $0 += 1 }
            subscriber.sendNext(1)
            return nil
        }
        let test = TestScheduler()
        let recorder = test.performAsCurrent {
            EventRecorder(Signal<Int> { subscriber in
                subscriber.disposable.dispose()
                return source.subscribe(subscriber)
            })
        }
        test.run()
        XCTAssertEqual(started.current, 0, "the source's didSubscribe ran for a subscription already disposed")
        XCTAssertEqual(recorder.events, [])
    }

    private func withHarness(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// A weak reference that can be filled from inside a `@Sendable` closure.
private final class WeakReference<Object: AnyObject>: @unchecked Sendable {
    // Set and read on the test's thread only (TestScheduler runs everything there).
    weak var object: Object?
}
