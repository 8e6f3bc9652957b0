import CLibUV
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// Where loops meet each other and end: each test is one way a multi-loop program
/// could deadlock, run code on the wrong thread or lose a shutdown.
///
/// A deadlock would hang the test, so every wait has a generous deadline that turns
/// a hang into a failure (it is never an assertion about speed).
final class LoopBoundaryTests: XCTestCase {
    private let hang: Duration = .seconds(60)

    // MARK: 1. dispose across loops

    func testLoopsDisposingEachOthersSubscriptionsFromTheirCallbacksDoNotDeadlock() throws {
        let a = EventLoop(name: "a"), b = EventLoop(name: "b")
        let subjectA = Subject<Int>(), subjectB = Subject<Int>()
        let inA = Latch(), inB = Latch(), doneA = Latch(), doneB = Latch()
        let disposables = Locked<[String: any Disposable]>([:])
        let teardowns = Locked<[String]>([])

        // Each subscription is homed on its loop; its callback waits until the other loop is
        // inside its own callback, then disposes the other loop's subscription.
        func subscribe(_ subject: Subject<Int>, on loop: EventLoop, key: String, other: String,
                       entered: Latch, otherEntered: Latch, done: Latch) -> (any Disposable)? {
            onLoop(loop) { () -> UncheckedSendable<any Disposable> in
                let disposable = subject.subscribeNext { _ in
                    entered.open()
                    _ = otherEntered.wait(until: SchedulerInstant.now + .seconds(10))
                    disposables.current[other]?.dispose()
                    done.open()
                }
                (disposable as? CompoundDisposable)?.add(ActionDisposable {
                    teardowns.withLock { $0.append("\(key) on \(EventLoop.current?.name ?? "no loop")") }
                })
                return UncheckedSendable(disposable)
            }?.value
        }
        let dA = subscribe(subjectA, on: a, key: "A", other: "B", entered: inA, otherEntered: inB, done: doneA)
        let dB = subscribe(subjectB, on: b, key: "B", other: "A", entered: inB, otherEntered: inA, done: doneB)
        disposables.withLock { $0["A"] = dA; $0["B"] = dB }

        a.execute { subjectA.sendNext(1) }
        b.execute { subjectB.sendNext(1) }
        let finished = doneA.wait(until: SchedulerInstant.now + hang) && doneB.wait(until: SchedulerInstant.now + hang)
        XCTAssertTrue(finished, "each loop's dispose of the other's subscription waited for the other's callback: deadlock")
        guard finished else { return }
        waitUntil("both teardowns") { teardowns.current.count == 2 }
        XCTAssertEqual(Set(teardowns.current), ["A on a", "B on b"], "each teardown runs on its home loop")
        try a.tryShutdown()
        try b.tryShutdown()
    }

    // MARK: 2. blocking queries across loops

    func testLoopsQueryingEachOthersHandlesFromTheirCallbacksThrowInsteadOfDeadlocking() throws {
        let a = EventLoop(name: "a"), b = EventLoop(name: "b")
        let inA = Latch(), inB = Latch()
        let answers = Locked<[String]>([])
        func ask(from loop: EventLoop, other: EventLoop, entered: Latch, otherEntered: Latch) {
            loop.execute {
                entered.open()
                _ = otherEntered.wait(until: SchedulerInstant.now + .seconds(10))
                do {
                    _ = try other.openHandles()
                    answers.withLock { $0.append("\(loop.name): answered") }
                } catch {
                    answers.withLock { $0.append("\(loop.name): \(error)") }
                }
            }
        }
        ask(from: a, other: b, entered: inA, otherEntered: inB)
        ask(from: b, other: a, entered: inB, otherEntered: inA)
        let answered = waitUntil("both queries to return", timeout: hang) { answers.current.count == 2 }
        XCTAssertTrue(answered, "each loop waited for the other: deadlock")
        guard answered else { return }
        XCTAssertEqual(answers.current.sorted(), [
            "a: \(EventLoopError.calledOnLoopThread(operation: "openHandles()", loop: "a"))",
            "b: \(EventLoopError.calledOnLoopThread(operation: "openHandles()", loop: "b"))",
        ])
        try a.tryShutdown()
        try b.tryShutdown()
    }

    func testTheAsyncQueryAnswersFromATaskOnAnotherLoop() async throws {
        let a = EventLoop(name: "a"), b = EventLoop(name: "b")
        let timer = b.schedule(after: .seconds(3600)) {}
        // The task runs on loop a's thread and asks loop b without blocking it.
        let handles = try await Task(executorPreference: a) { () async throws -> [OpenHandle] in
            precondition(a.inEventLoop)
            return try await b.openHandles()
        }.value
        XCTAssertEqual(handles.map(\.kind), ["timer"])
        timer?.dispose()
        try await a.shutdownGracefully()
        try await b.shutdownGracefully()
    }

    func testAnotherLoopReadsAConnectionsStateWithoutWaitingForTheConnectionsLoop() throws {
        let report = LoopHarness.run { harness in
            let (server, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port), label: "client")
            let connection = try client.waitForValues(1)[0]
            _ = try waitForAccepted(server, 1)
            let other = EventLoop(name: "other")
            defer { other.shutdown() }
            // The connection's loop is busy in a callback until the other loop has its answer.
            let inside = Latch(), release = Latch()
            harness.loop.execute {
                inside.open()
                _ = release.wait(until: SchedulerInstant.now + .seconds(60))
            }
            XCTAssertTrue(inside.wait(until: SchedulerInstant.now + hang))
            let answer = onLoop(other) { "open \(connection.isOpen), queued \(connection.queuedWriteByteCount)" }
            release.open()
            XCTAssertEqual(answer, "open true, queued 0", "the other loop waited for the connection's busy loop")
            connection.close()
            try harness.wait(for: "the close to be published") { !connection.isOpen }
            XCTAssertTrue(try client.waitForTermination().isCompleted)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testSendsFromAnotherThreadCountAsQueuedBeforeTheLoopTakesThem() throws {
        let report = LoopHarness.run { harness in
            let (server, port) = try startServer(harness)
            let client = try harness.record(TCP.connect(host: "127.0.0.1", port: port), label: "client")
            let connection = try client.waitForValues(1)[0]
            _ = try waitForAccepted(server, 1)
            // The loop is busy, so the sends below wait in its queue; the caller still sees them counted.
            let inside = Latch(), release = Latch()
            harness.loop.execute {
                inside.open()
                _ = release.wait(until: SchedulerInstant.now + .seconds(60))
            }
            XCTAssertTrue(inside.wait(until: SchedulerInstant.now + hang))
            connection.send([UInt8](repeating: 1, count: 100))
            _ = connection.write([UInt8](repeating: 2, count: 50))
            let queued = connection.queuedWriteByteCount
            release.open()
            XCTAssertEqual(queued, 150, "a thread's own sends, not yet on the loop, count as queued")
            try harness.wait(for: "the bytes to leave") { connection.queuedWriteByteCount == 0 }
            connection.close()
            XCTAssertTrue(try client.waitForTermination().isCompleted)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    // MARK: 3. teardown while the home loop is closing

    /// Holds `loop` inside a callback until `release` opens, and has `shutdown()` requested
    /// from another thread meanwhile; returns once the loop is shutting down.
    private func holdInsideACallbackWhileShutdownIsRequested(
        _ loop: EventLoop, release: Latch, shutdownReturned: Latch
    ) -> Bool {
        let inside = Latch()
        loop.execute {
            inside.open()
            _ = release.wait(until: SchedulerInstant.now + .seconds(60))
        }
        guard inside.wait(until: SchedulerInstant.now + hang) else { return false }
        Thread {
            loop.shutdown()
            shutdownReturned.open()
        }.start()
        return waitUntil("the shutdown request", timeout: hang) { loop.state.load(ordering: .acquiring).isShuttingDownOrClosed }
    }

    func testADisposeFromAThirdThreadWhileTheHomeLoopIsClosingTearsDownOnTheLoopThread() {
        let loop = EventLoop(name: "closing")
        let teardownThread = Locked<String?>(nil)
        let disposable = onLoop(loop) { () -> UncheckedSendable<any Disposable> in
            let disposable = Signal<Int>.never.subscribe(next: { _ in })
            (disposable as? CompoundDisposable)?.add(ActionDisposable {
                teardownThread.withLock { $0 = EventLoop.current?.name ?? "a thread that is no loop's" }
            })
            return UncheckedSendable(disposable)
        }?.value
        let release = Latch(), shutdownReturned = Latch()
        XCTAssertTrue(holdInsideACallbackWhileShutdownIsRequested(loop, release: release, shutdownReturned: shutdownReturned))
        let rejectedBefore = loop.rejectedSubmissionCount
        onNewThread { disposable?.dispose() }
        release.open()
        XCTAssertTrue(shutdownReturned.wait(until: SchedulerInstant.now + hang))
        XCTAssertEqual(teardownThread.current, "closing", "the teardown ran on the home loop's thread, which was still running")
        XCTAssertEqual(loop.rejectedSubmissionCount, rejectedBefore, "a loop that is closing takes the teardown: nothing was refused")
        XCTAssertEqual(loop.report?.loopCloseResult, 0)
    }

    // MARK: 4. an actor on a closing loop

    actor LoopActor {
        nonisolated let unownedExecutor: UnownedSerialExecutor
        init(loop: EventLoop) { unownedExecutor = loop.asUnownedSerialExecutor() }
        func whereAmI() -> String { EventLoop.current?.name ?? "a thread that is no loop's" }
    }

    func testAnActorJobEnqueuedWhileTheLoopIsClosingRunsOnTheLoopThread() async {
        let loop = EventLoop(name: "actor-home")
        let actor = LoopActor(loop: loop)
        let release = Latch(), shutdownReturned = Latch()
        XCTAssertTrue(holdInsideACallbackWhileShutdownIsRequested(loop, release: release, shutdownReturned: shutdownReturned))
        // The call enqueues a job on the closing loop from this task's thread.
        let call = Task { await actor.whereAmI() }
        waitUntil("the actor's job to be queued") { loop.queuedWorkCount > 0 }
        release.open()
        let place = await call.value
        XCTAssertEqual(place, "actor-home", "the actor ran on its executor, the loop's thread")
        XCTAssertTrue(shutdownReturned.wait(until: SchedulerInstant.now + hang))
    }

    func testActorJobsEnqueuedAfterTheLoopClosedRunOneAtATimeIsolatedToIt() async throws {
        let loop = EventLoop(name: "gone")
        let actor = LoopActor(loop: loop)
        try await loop.shutdownGracefully()
        // No loop thread is left: the jobs run on a thread started for late jobs, and the isolation check accepts it.
        async let first = actor.whereAmI()
        async let second = actor.whereAmI()
        let places = await [first, second]
        XCTAssertEqual(places, ["a thread that is no loop's", "a thread that is no loop's"])
        XCTAssertFalse(loop.lateJobs.isDrainingOnCallingThread)
    }

    /// An actor whose method drops the last reference to its executor's loop.
    actor LoopDroppingActor {
        nonisolated let unownedExecutor: UnownedSerialExecutor
        let holder: Locked<EventLoop?>
        init(executor: UnownedSerialExecutor, holder: Locked<EventLoop?>) {
            unownedExecutor = executor
            self.holder = holder
        }
        func dropTheLoop() -> Bool {
            holder.withLock { $0 = nil }
            return true
        }
    }

    func testALateJobThatDropsTheLastReferenceToItsLoopLeavesNothingDangling() async throws {
        let holder = Locked<EventLoop?>(EventLoop(name: "dropped"))
        try await holder.current!.shutdownGracefully()
        let actor = LoopDroppingActor(executor: holder.current!.asUnownedSerialExecutor(), holder: holder)
        // The job runs late (the loop has closed) and drops the program's last reference to the loop
        // there: the late jobs' thread holds one until it is done (the address sanitizer sees it if not).
        let dropped = await actor.dropTheLoop()
        XCTAssertTrue(dropped)
        XCTAssertNil(holder.current)
    }

    // MARK: 5. deliver(on:) and dispose

    func testADisposeOnALoopThreadDoesNotWaitForADeliverOnCallbackRunningOnAnotherLoop() throws {
        let home = EventLoop(name: "home"), target = EventLoop(name: "target"), third = EventLoop(name: "third")
        let subject = Subject<Int>()
        let inCallback = Latch(), disposeReturned = Latch(), callbackSawTheDispose = Latch()
        let calls = Locked(0)
        let disposable = onLoop(home) { () -> UncheckedSendable<any Disposable> in
            UncheckedSendable(subject.deliver(on: target).subscribeNext { _ in
                calls.withLock { $0 += 1 }
                inCallback.open()
                // The callback on `target` goes on until the dispose on `third` has returned.
                if disposeReturned.wait(until: SchedulerInstant.now + .seconds(10)) { callbackSawTheDispose.open() }
            })
        }?.value
        home.execute { subject.sendNext(1) }
        XCTAssertTrue(inCallback.wait(until: SchedulerInstant.now + hang))
        third.execute {
            disposable?.dispose()
            disposeReturned.open()
        }
        XCTAssertTrue(disposeReturned.wait(until: SchedulerInstant.now + hang))
        XCTAssertTrue(callbackSawTheDispose.wait(until: SchedulerInstant.now + hang),
                      "the dispose on loop 'third' waited for the callback on loop 'target' (which gave up waiting first)")
        // No callback starts after the dispose returned.
        home.execute { subject.sendNext(2) }
        _ = onLoop(home) { 0 }
        _ = onLoop(target) { 0 }
        XCTAssertEqual(calls.current, 1)
        try home.tryShutdown()
        try target.tryShutdown()
        try third.tryShutdown()
    }

    /// From a thread that is no loop's, `dispose()` returns while a `deliver(on:)` callback runs on
    /// another loop, without waiting for it; `disposeAndWait()` waits for it, though that loop is
    /// not the subscription's home (it polls: its hop to the home cannot tell).
    func testADisposeFromAThreadThatIsNoLoopsReturnsWhileADeliverOnCallbackRunsAndDisposeAndWaitWaitsForIt() throws {
        let home = EventLoop(name: "home"), target = EventLoop(name: "target")
        let subject = Subject<Int>()
        let inCallback = Latch(), letItFinish = Latch()
        let calls = Locked(0)
        let order = Locked<[String]>([])
        let disposable = onLoop(home) { () -> UncheckedSendable<any Disposable> in
            UncheckedSendable(subject.deliver(on: target).subscribeNext { _ in
                calls.withLock { $0 += 1 }
                inCallback.open()
                let finished = letItFinish.wait(until: SchedulerInstant.now + .seconds(60))
                order.withLock { $0.append(finished ? "callback returned" : "callback gave up") }
            })
        }?.value
        home.execute { subject.sendNext(1) }
        XCTAssertTrue(inCallback.wait(until: SchedulerInstant.now + hang))
        onNewThread {
            disposable?.dispose()
            order.withLock { $0.append("dispose returned") }
        }
        let waited = Latch()
        Task.immediate {
            await disposable?.disposeAndWait()
            order.withLock { $0.append("wait returned") }
            waited.open()
        }
        XCTAssertEqual(order.current, ["dispose returned"], "disposeAndWait() returned while the callback was running")
        home.execute { subject.sendNext(2) }
        letItFinish.open()
        XCTAssertTrue(waited.wait(until: SchedulerInstant.now + hang), "disposeAndWait() never returned")
        XCTAssertEqual(order.current, ["dispose returned", "callback returned", "wait returned"])
        _ = onLoop(home) { 0 }
        _ = onLoop(target) { 0 }
        XCTAssertEqual(calls.current, 1, "a callback began after dispose() returned")
        try home.tryShutdown()
        try target.tryShutdown()
    }

    // MARK: 6 and 8c. owner-thread loops leaving run()

    func testAShutdownFromAnotherThreadAsRunIsLeavingIsCarriedOut() {
        let outcome = Locked<[String]>([])
        let shutdownReturned = Latch()
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "leaving")
            // Deterministic interleaving: just as run() is about to decide to leave, another
            // thread asks for shutdown (and is seen to have asked) before the decision.
            loop.beforeLeavingRunForTesting = { [unowned loop] in
                loop.beforeLeavingRunForTesting = nil
                Thread {
                    loop.shutdown()
                    shutdownReturned.open()
                }.start()
                waitUntil("the shutdown request") { loop.state.load(ordering: .acquiring) == .closeRequested }
            }
            loop.run()
            outcome.withLock { $0.append("run returned, shut down: \(loop.isShutDown)") }
        }
        XCTAssertEqual(outcome.current, ["run returned, shut down: true"])
        XCTAssertTrue(shutdownReturned.wait(until: SchedulerInstant.now + hang), "the shutdown request was lost and its caller waits for ever")
    }

    func testAQueryFromAnotherThreadAsRunIsLeavingIsAnsweredBeforeRunReturns() {
        let outcome = Locked<[String]>([])
        let answered = Latch()
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "leaving")
            loop.beforeLeavingRunForTesting = { [unowned loop] in
                loop.beforeLeavingRunForTesting = nil
                Thread {
                    do {
                        let handles = try loop.openHandles()
                        outcome.withLock { $0.append("answered: \(handles.count) handles") }
                    } catch {
                        outcome.withLock { $0.append("refused: \(error)") }
                    }
                    answered.open()
                }.start()
                waitUntil("the query to be queued or refused") { loop.queuedWorkCount > 0 || answered.isOpened }
            }
            loop.run()
            // The query was accepted while the loop ran, so run() must have answered it before
            // returning: nothing else runs this loop until the next run() (the shutdown below).
            let answeredBeforeTheNextRun = answered.wait(until: SchedulerInstant.now + .seconds(60))
            outcome.withLock { $0.append("answered before the next run: \(answeredBeforeTheNextRun)") }
            _ = try? loop.tryShutdown()
        }
        XCTAssertEqual(outcome.current, ["answered: 0 handles", "answered before the next run: true"],
                       "the query was queued on a loop that then left run(): it waited for the next run()")
    }

    // MARK: 8b. uv_loop_close failing

    /// Loops whose `uv_loop_close` failed on purpose: their memory stays reachable for the leak check.
    nonisolated(unsafe) private static var keptForever: [EventLoop] = []  // written by one test, on the test thread

    func testAHandleLeftOpenByOtherCodeMakesShutdownThrowLoopCloseFailed() throws {
        let loop = EventLoop(name: "leaky")
        LoopBoundaryTests.keptForever.append(loop)
        let stray = Locked<UnsafeMutableRawPointer?>(nil)
        _ = onLoop(loop) { StrayOpeningHandle(loop: loop, stray: stray).open() }
        XCTAssertThrowsError(try loop.tryShutdown()) { error in
            guard case EventLoopError.loopCloseFailed(let name, let uvError)? = error as? EventLoopError else {
                return XCTFail("expected loopCloseFailed, got \(error)")
            }
            XCTAssertEqual(name, "leaky")
            XCTAssertEqual(uvError.name, "EBUSY")
        }
        XCTAssertTrue(loop.isShutDown)
        // Clean up what the test left, so the loop really closes (its thread has ended).
        guard let timer = stray.current else { return XCTFail("the stray handle was not opened") }
        loop.withUnsafeUVLoop { uvLoop in
            uv_close(timer.assumingMemoryBound(to: uv_handle_t.self), nil)
            uv_run(uvLoop.assumingMemoryBound(to: uv_loop_t.self), UV_RUN_NOWAIT)
            XCTAssertEqual(uv_loop_close(uvLoop.assumingMemoryBound(to: uv_loop_t.self)), 0)
        }
        timer.deallocate()
    }
}

/// A handle whose close callback opens another handle and leaves it open, as C code sharing
/// the loop could: shutdown runs that callback during the loop's last drain, after it closed
/// every handle it could see.
private final class StrayOpeningHandle: LoopHandle, @unchecked Sendable {
    // Touched on the loop thread only; `stray` is a locked box.
    private let stray: Locked<UnsafeMutableRawPointer?>

    init(loop: EventLoop, stray: Locked<UnsafeMutableRawPointer?>) {
        self.stray = stray
        super.init(loop: loop, byteCount: Int(uv_handle_size(UV_IDLE)))
    }

    func open() -> Bool {
        guard uv_idle_init(loop.uvLoop, pointer(as: uv_idle_t.self)) == 0 else { return false }
        didOpen()
        return true
    }

    override func didClose() {
        let timer = UnsafeMutableRawPointer.allocate(byteCount: Int(uv_handle_size(UV_TIMER)), alignment: 16)
        uv_timer_init(loop.uvLoop, timer.assumingMemoryBound(to: uv_timer_t.self))
        stray.withLock { $0 = timer }
    }
}

extension LoopState {
    /// Whether `shutdown()` has been asked for, or the loop has closed.
    var isShuttingDownOrClosed: Bool { rawValue >= LoopState.closeRequested.rawValue }
}

/// A loop that cannot start (no file descriptor left) is an error the program sees, never a crash.
final class LoopStartFailureTests: XCTestCase {
    /// Runs `body` while the process can open no new file descriptor (the soft limit is lowered
    /// to the lowest free descriptor number, then restored).
    private func withNoDescriptorLeft<R>(_ body: () throws -> R) throws -> R {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        let lowestFree = dup(0)
        XCTAssertGreaterThan(lowestFree, 0)
        close(lowestFree)
        var lowered = limit
        lowered.rlim_cur = rlim_t(lowestFree)
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lowered), 0)
        defer { XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0) }
        return try body()
    }

    func testTryStartThrowsCouldNotStartWithEMFILE() throws {
        let error: EventLoopError? = try withNoDescriptorLeft { () -> EventLoopError? in
            do {
                let loop = try EventLoop.tryStart(name: "starved")
                loop.shutdown()
                return nil
            } catch {
                return error as? EventLoopError
            }
        }
        guard case .couldNotStart(let name, let uvError)? = error else {
            return XCTFail("expected couldNotStart, got \(String(describing: error))")
        }
        XCTAssertEqual(name, "starved")
        XCTAssertEqual(uvError.name, "EMFILE")
    }

    func testALoopThatCouldNotStartRefusesWorkWithItsReasonAndShutsDownQuietly() throws {
        let loop = try withNoDescriptorLeft { EventLoop(name: "starved") }
        XCTAssertEqual(loop.startFailure?.name, "EMFILE")
        XCTAssertTrue(loop.isShutDown)
        XCTAssertThrowsError(try loop.tryExecute {}) { error in
            guard case .couldNotStart(let name, _)? = error as? EventLoopError else { return XCTFail("\(error)") }
            XCTAssertEqual(name, "starved")
        }
        // A signal subscribed there ends with the reason, instead of never starting.
        let ended = Locked<String?>(nil)
        _ = Signal<Int>.return(1).subscribe(on: loop).subscribe(next: { _ in }, error: { error in
            ended.withLock { $0 = "\(error)" }
        })
        waitUntil("the error") { ended.current != nil }
        XCTAssertEqual(ended.current, "\(EventLoopError.couldNotStart(loop: "starved", error: loop.startFailure!))")
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
    }

    func testOwnerThreadLoopsReportTheFailureToo() throws {
        let outcome = Locked<String?>(nil)
        try withNoDescriptorLeft {
            onNewThread {
                do {
                    _ = try EventLoop.tryOnCurrentThread(name: "starved-main")
                    outcome.withLock { $0 = "started" }
                } catch {
                    outcome.withLock { $0 = "\(error)" }
                }
            }
        }
        XCTAssertEqual(outcome.current?.hasPrefix("EventLoop 'starved-main' could not start (EMFILE"), true, outcome.current ?? "nil")
        XCTAssertNil(EventLoop.current)
    }
}

/// `deliver(on:)` to a loop that has shut down.
final class DeliverOnClosedLoopTests: XCTestCase {
    func testDeliveringOnALoopThatShutDownEndsTheSubscriberWithShutDown() throws {
        let home = EventLoop(name: "home"), gone = EventLoop(name: "gone")
        try gone.tryShutdown()
        let events = Locked<[String]>([])
        let subject = Subject<Int>()
        _ = onLoop(home) { () -> UncheckedSendable<any Disposable> in
            UncheckedSendable(subject.deliver(on: gone).subscribe(
                next: { value in events.withLock { $0.append("next \(value)") } },
                error: { error in events.withLock { $0.append("error \(error)") } },
                completed: { events.withLock { $0.append("completed") } }))
        }
        home.execute {
            subject.sendNext(1)
            subject.sendNext(2)
            subject.sendCompleted()
        }
        waitUntil("the end") { !events.current.isEmpty }
        _ = onLoop(home) { 0 }
        XCTAssertEqual(events.current, ["error \(EventLoopError.shutDown(loop: "gone"))"],
                       "the values could not be delivered there: the subscriber hears why, once, instead of nothing")
        try home.tryShutdown()
    }
}

/// A source on another loop sending to a subscription whose home loop has shut down.
final class SendsToAClosedHomeTests: XCTestCase {
    /// The first value that cannot hop home disposes the subscription, which stops the source (here
    /// an interval timer on its own loop), and no "rejected submission" is reported: before, every
    /// tick was refused and reported, and the timer ran on for good.
    func testTheSubscriptionIsDisposedAndTheSourceStopsWithoutAMessage() throws {
        let home = EventLoop(name: "home"), sourceLoop = EventLoop(name: "source")
        let ticks = Locked(0)
        let subscription = onLoop(home) { () -> UncheckedSendable<any Disposable> in
            UncheckedSendable(Signal<Int>.interval(.milliseconds(2), on: sourceLoop).subscribe(next: { _ in ticks.withLock { $0 += 1 } }))
        }?.value
        waitUntil("a first tick delivered home") { ticks.current > 0 }
        try home.tryShutdown()
        waitUntil("the subscription disposed by a tick that found its home closed") { subscription?.isDisposed == true }
        XCTAssertEqual(home.rejectedSubmissionCount, 0, "nobody misused the loop: nothing is reported")
        try sourceLoop.tryShutdown()
        XCTAssertEqual(sourceLoop.report?.loopCloseResult, 0)
    }
}
