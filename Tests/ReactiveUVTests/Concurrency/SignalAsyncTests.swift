import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

private struct Boom: Error, Equatable {}

final class SignalAsyncTests: XCTestCase {
    func testTenThousandValuesArriveInOrder() async throws {
        let signal = Signal<Int> { subscriber in
            for value in 0..<10_000 { subscriber.sendNext(value) }
            subscriber.sendCompleted()
            return nil
        }
        var received: [Int] = []
        for try await value in signal.values(bufferingPolicy: .unbounded) { received.append(value) }
        XCTAssertEqual(received, Array(0..<10_000))
    }

    func testValuesFromATimerArriveAsTheyAreProduced() async throws {
        var received: [Int] = []
        for try await tick in Signal<Int>.interval(.milliseconds(2)).values {
            received.append(tick)
            if received.count == 5 { break }  // leaving the loop disposes the subscription
        }
        XCTAssertEqual(received, [0, 1, 2, 3, 4])
    }

    func testTheSignalsErrorIsThrown() async {
        let failing = Signal<Int> { subscriber in
            subscriber.sendNext(1)
            subscriber.sendError(Boom())
            return nil
        }
        var received: [Int] = []
        do {
            for try await value in failing.values { received.append(value) }
            XCTFail("expected the error to be thrown")
        } catch {
            XCTAssertEqual(error as? Boom, Boom())
        }
        XCTAssertEqual(received, [1])
    }

    /// Cancelling the consuming task disposes the subscription: the harness sees the timer closed.
    func testCancellingTheTaskDisposesTheSubscription() throws {
        let report = LoopHarness.run { harness in
            let received = Locked(0)
            let cleanedUp = Locked(0)
            let ticks = Signal<Int> { subscriber in
                let timer = Signal<Int>.interval(.milliseconds(1)).subscribeNext { subscriber.sendNext($0) }
                return ActionDisposable {
                    timer.dispose()
                    cleanedUp.withLock { $0 += 1 }
                }
            }
            let task = Task(executorPreference: harness.loop) {
                for try await _ in ticks.values { received.withLock { $0 += 1 } }
            }
            try harness.wait(for: "three values") { received.current >= 3 }
            task.cancel()
            try harness.wait(for: "the subscription's cleanup") { cleanedUp.current == 1 }
            _ = try harness.onLoop {}
            XCTAssertEqual(try harness.loop.openHandles(), [])
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// Cancelling the task while its loop is in the middle of delivering it a value: Swift runs
    /// the cancellation handler under the task's lock, which that delivery needs to resume the
    /// task, so the handler must not wait for the delivery to end. (It did: dispose from a
    /// thread that is no loop's waits for a callback in progress, and both threads hung; the
    /// suite's run in CI on 2026-11-23 never finished.) Here the delivery is held inside the
    /// channel's callback until `cancel()` has returned; were `cancel()` waiting, the hold would
    /// time out (and drop the value, so that even then nothing hangs).
    func testCancellingDuringADeliveryDoesNotWaitForIt() throws {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holdTimedOut = Locked<Bool?>(nil)
        let deliveries = Locked(0)
        ValuesDeliveryTestHook.set {
            let number = deliveries.withLock { $0 += 1; return $0 }
            guard number == 2 else { return false }
            entered.signal()
            let released = release.wait(timeout: .now() + .seconds(10)) == .success
            holdTimedOut.withLock { $0 = !released }
            return !released
        }
        defer { ValuesDeliveryTestHook.set(nil) }
        let report = LoopHarness.run { harness in
            let subject = Subject<Int>()
            let received = Locked(0)
            let ended = Locked(false)
            let task = Task(executorPreference: harness.loop) {
                do {
                    for try await _ in subject.values { received.withLock { $0 += 1 } }
                } catch {}
                ended.withLock { $0 = true }
            }
            // The first value shows the task subscribed and waiting for the next one.
            try harness.wait(for: "the first value") {
                harness.loop.execute { if deliveries.current == 0 { subject.sendNext(1) } }
                return received.current == 1
            }
            harness.loop.execute { subject.sendNext(2) }
            XCTAssertEqual(entered.wait(timeout: .now() + .seconds(10)), .success, "the second delivery never began")
            task.cancel()
            release.signal()
            try harness.wait(for: "the held delivery to end") { holdTimedOut.current != nil }
            XCTAssertEqual(holdTimedOut.current, false, "cancelling the task waited for the delivery in progress")
            try harness.wait(for: "the task to end") { ended.current }
            XCTAssertEqual(received.current, 1, "a value delivered after the cancellation reached the task")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testAFastSourceThatCannotPauseOverflowsABoundedBuffer() async {
        let bursts = Locked(0)
        let burst = Signal<Int> { subscriber in
            for value in 0..<100 { subscriber.sendNext(value) }
            subscriber.sendCompleted()
            bursts.withLock { $0 += 1 }
            return nil
        }
        do {
            var iterator = burst.values(bufferingPolicy: .bounded(10)).makeAsyncIterator()
            _ = try await iterator.next()
            // Take nothing more until the burst has overrun the buffer.
            let deadline = SchedulerInstant.now + .seconds(10)
            while bursts.current < 1 && SchedulerInstant.now < deadline { await Task.yield() }
            while try await iterator.next() != nil {}
            XCTFail("expected an overflow")
        } catch {
            XCTAssertEqual(error as? SignalValuesError, .bufferOverflow(capacity: 10))
            XCTAssertTrue("\(error)".contains("cannot pause"))
        }
    }

    func testDroppingPoliciesKeepTheNewestOrTheOldest() async throws {
        let bursts = Locked(0)
        let burst = Signal<Int> { subscriber in
            for value in 0..<100 { subscriber.sendNext(value) }
            subscriber.sendCompleted()
            bursts.withLock { $0 += 1 }
            return nil
        }
        var newest = burst.values(bufferingPolicy: .keepNewest(3)).makeAsyncIterator()
        var oldest = burst.values(bufferingPolicy: .keepOldest(3)).makeAsyncIterator()
        let firstNewest = try await newest.next()
        let firstOldest = try await oldest.next()
        // Take nothing more until both bursts have landed in the buffers.
        let deadline = SchedulerInstant.now + .seconds(10)
        while bursts.current < 2 && SchedulerInstant.now < deadline { await Task.yield() }
        XCTAssertEqual(bursts.current, 2)
        var restNewest: [Int] = [], restOldest: [Int] = []
        while let value = try await newest.next() { restNewest.append(value) }
        while let value = try await oldest.next() { restOldest.append(value) }
        XCTAssertEqual(firstNewest, 0, "the first value went straight to the waiting task")
        XCTAssertEqual(restNewest, [97, 98, 99])
        XCTAssertEqual(firstOldest, 0)
        XCTAssertEqual(restOldest, [1, 2, 3])
    }

    /// A buffer limit below 1 is EINVAL at the first `next()`, and the signal is never subscribed
    /// (taken as given, `.bounded(-3)` would fail with "more than -3 values were waiting", and
    /// `.keepNewest(0)` drop every value the task was not already waiting for).
    func testABufferLimitBelowOneIsEINVALBeforeTheSignalIsSubscribed() async throws {
        let subscriptions = Locked(0)
        let source = Signal<Int> { subscriber in
            subscriptions.withLock { $0 += 1 }
            for value in 0..<5 { subscriber.sendNext(value) }
            subscriber.sendCompleted()
            return nil
        }
        for policy in [ValuesBufferPolicy.bounded(-3), .bounded(0), .keepNewest(0), .keepOldest(-1)] {
            var iterator = source.values(bufferingPolicy: policy).makeAsyncIterator()
            do {
                let value = try await iterator.next()
                XCTFail("\(policy): expected EINVAL, got \(String(describing: value))")
            } catch let error as UVError {
                XCTAssertEqual(error.code, UVError.invalidArgumentCode, "\(policy)")
                XCTAssertTrue(error.description.contains("a limit must be at least 1"), error.description)
            }
        }
        XCTAssertEqual(subscriptions.current, 0, "no policy below 1 subscribed the signal")
        var collected: [Int] = []
        for try await value in source.values(bufferingPolicy: .keepNewest(1)) { collected.append(value) }
        XCTAssertEqual(subscriptions.current, 1)
        XCTAssertFalse(collected.isEmpty, "a limit of 1 is accepted")
    }

    /// A source's loop that shuts down while the task has it paused: the resume the task's progress
    /// then asks for has nowhere to go and is dropped without the "rejected submission" message
    /// (the user did nothing wrong); the values already buffered are still taken.
    func testAResumeForASourceLoopThatShutDownIsDroppedWithoutAMessage() async throws {
        let sourceLoop = EventLoop(name: "values-source")
        let paused = Locked(0)
        // The source runs on its own loop and sends to the task's subscription from there.
        let source = Signal<Int> { subscriber in
            sourceLoop.execute {
                subscriber.setFlowControl(pause: { paused.withLock { $0 += 1 } }, resume: {})
                for value in 0..<8 { subscriber.sendNext(value) }
            }
            return nil  // never ends: the loop's shutdown is what stops it
        }
        var iterator = source.values(bufferingPolicy: .bounded(2)).makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first, 0)
        // Wait until the full buffer has paused the source (on its loop), then shut that loop down.
        let deadline = SchedulerInstant.now + .seconds(10)
        while paused.current == 0 && SchedulerInstant.now < deadline { await Task.yield() }
        XCTAssertEqual(paused.current, 1, "the source was paused")
        sourceLoop.shutdown()
        // Draining the buffer to half asks the source to resume, on its loop, which has closed.
        // (All eight were sent before the pause reached the source: seven wait in the buffer.)
        var taken: [Int] = []
        for _ in 0..<7 {
            if let value = try await iterator.next() { taken.append(value) }
        }
        XCTAssertEqual(taken, Array(1..<8), "the buffered values are taken in order")
        XCTAssertEqual(sourceLoop.rejectedSubmissionCount, 0, "the resume for the closed loop was dropped, not reported")
    }

    /// A source that can pause is paused when the buffer fills, so memory stays bounded.
    func testAPausableSourceIsPausedInsteadOfOverflowing() async throws {
        let flow = FlowLog()
        let produced = 10_000
        let source = Signal<Int> { subscriber in
            let producer = PausableProducer(subscriber: subscriber, total: produced, flow: flow)
            subscriber.setFlowControl(pause: { producer.pause() }, resume: { producer.resume() })
            producer.produce()
            return nil
        }
        var received = 0
        for try await value in source.values(bufferingPolicy: .bounded(64)) {
            XCTAssertEqual(value, received)
            received += 1
            if received % 500 == 0 { try await Task.sleep(for: .milliseconds(1)) }  // a slow consumer
        }
        XCTAssertEqual(received, produced)
        XCTAssertGreaterThan(flow.pauses, 0, "the source was never paused")
        XCTAssertEqual(flow.pauses, flow.resumes)
    }

    /// A source that sends at once, while a task on its loop is still subscribing, finds the
    /// buffer's flow control and is paused by it, not overflowed.
    func testASourceSendingWhileALoopTaskSubscribesIsPausedNotOverflowed() async throws {
        let loop = EventLoop(name: "values-subscribing")
        let flow = FlowLog()
        let produced = 1_000
        let source = Signal<Int> { subscriber in
            let producer = PausableProducer(subscriber: subscriber, total: produced, flow: flow)
            subscriber.setFlowControl(pause: { producer.pause() }, resume: { producer.resume() })
            producer.produce()
            return nil
        }
        let received = try await loop.task { _ -> [Int] in
            var received: [Int] = []
            for try await value in source.values(bufferingPolicy: .bounded(2)) { received.append(value) }
            return received
        }.value
        XCTAssertEqual(received, Array(0..<produced), "every value in order, no overflow")
        XCTAssertGreaterThan(flow.pauses, 0, "the source was never paused")
        try await loop.shutdownGracefully()
    }

    func testFirstLastCollectAndWait() async throws {
        let numbers = Signal.from([4, 5, 6])
        let first = try await numbers.first()
        let last = try await numbers.last()
        let all: [Int] = try await numbers.collect()
        XCTAssertEqual(first, 4)
        XCTAssertEqual(last, 6)
        XCTAssertEqual(all, [4, 5, 6])
        let none = try await Signal<Int>.empty.first()
        XCTAssertNil(none)
        let error = await Signal<Int>.error(Boom()).waitUntilCompleted()
        XCTAssertEqual(error as? Boom, Boom())
        let fine = await Signal<Int>.empty.waitUntilCompleted()
        XCTAssertNil(fine)
        // first() disposes after the first value, so an endless source is fine.
        let tick = try await Signal<Int>.interval(.milliseconds(1)).first()
        XCTAssertEqual(tick, 0)
    }

    /// A task cancelled before it awaits `first()`, `last()`, `collect()`, `waitUntilCompleted()` or a
    /// `FileSystem` call gets `CancellationError` (or, from `waitUntilCompleted()`, returns it) without
    /// subscribing: nothing is started. Subscribing and disposing at once would run the source (here:
    /// four subscriptions), and carry out a request a pool thread had already taken (a cancelled
    /// `FileSystem.createDirectory` would make its directory now and then).
    func testATaskCancelledBeforeItAwaitsStartsNothing() throws {
        let directory = NSTemporaryDirectory() + "reactiveuv-cancelled-" + UUID().uuidString
        let report = LoopHarness.run { harness in
            let subscriptions = Locked(0)
            let counted = Signal<Int> { subscriber in
                subscriptions.withLock { $0 += 1 }
                subscriber.sendNext(1)
                subscriber.sendCompleted()
                return nil
            }
            let outcome = Locked<[String]?>(nil)
            // On the harness loop, the subscriptions' home: a subscription would attach at once, on this thread.
            Task(executorPreference: harness.loop) {
                withUnsafeCurrentTask { $0?.cancel() }
                func describe(_ call: String, _ body: () async throws -> Void) async -> String {
                    do {
                        try await body()
                        return "\(call): no error"
                    } catch {
                        return "\(call): \(type(of: error))"
                    }
                }
                var seen: [String] = []
                seen.append(await describe("first()") { _ = try await counted.first() })
                seen.append(await describe("last()") { _ = try await counted.last() })
                seen.append(await describe("collect()") { _ = try await counted.collect() })
                seen.append("waitUntilCompleted(): " + (await counted.waitUntilCompleted().map { "\(type(of: $0))" } ?? "nil"))
                seen.append(await describe("createDirectory") { try await FileSystem.createDirectory(directory) })
                outcome.withLock { $0 = seen }
            }
            try harness.wait(for: "the cancelled task") { outcome.current != nil }
            XCTAssertEqual(outcome.current, ["first()", "last()", "collect()", "waitUntilCompleted()", "createDirectory"].map {
                "\($0): CancellationError"
            })
            XCTAssertEqual(subscriptions.current, 0, "a cancelled task subscribed")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory), "a cancelled task made its directory")
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testBlockingHelpersWorkOffLoopAndRefuseOnALoop() throws {
        XCTAssertEqual(try Signal.from([1, 2]).first(timeout: .seconds(5)), 1)
        XCTAssertEqual(try Signal.from([1, 2]).last(timeout: .seconds(5)), 2)
        XCTAssertNoThrow(try Signal<Int>.empty.waitUntilCompleted(timeout: .seconds(5)))
        XCTAssertThrowsError(try Signal<Int>.never.first(timeout: .milliseconds(20))) { error in
            XCTAssertEqual(error as? TimeoutError, TimeoutError(operation: "first()", after: .milliseconds(20)))
        }
        let loop = EventLoop(name: "blocking")
        defer { loop.shutdown() }
        let refusal = onLoop(loop) { () -> String in
            do {
                _ = try Signal.return(1).first()
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        XCTAssertEqual(refusal, "\(EventLoopError.calledOnLoopThread(operation: "first()", loop: "blocking"))")
    }

    func testSignalAsyncRunsOnTheHomeLoopAndDisposalCancels() throws {
        let report = LoopHarness.run { harness in
            let recorder = try harness.record(Signal<String?>.async { EventLoop.current?.name })
            try recorder.waitForTermination()
            XCTAssertEqual(recorder.values, ["harness"])

            let failing = try harness.record(Signal<Int>.async { throw Boom() })
            XCTAssertEqual(try failing.waitForTermination().error as? Boom, Boom())

            let cancelled = Locked(0)
            let slow = try harness.record(sleepsUntilCancelled(counting: cancelled))
            slow.dispose()
            try harness.wait(for: "the task to see its cancellation") { cancelled.current == 1 }
            XCTAssertEqual(slow.events.count, 0)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// The home loop of a `Signal.async` or `Signal.from` subscription shuts down while its task
    /// waits: the subscriber gets `EventLoopError.shutDown` then (on the loop's thread, as it closes)
    /// and the task is cancelled, rather than running on as a late job whose sends the closed loop
    /// refuses.
    func testHomeLoopShutdownEndsAsyncSignalsWithShutDownAndCancelsTheirTasks() throws {
        let cancelled = Locked(0)
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        continuation.onTermination = { _ in cancelled.withLock { $0 += 1 } }
        let sources: [(String, Signal<Int>)] = [
            ("Signal.async", sleepsUntilCancelled(counting: cancelled)),
            ("Signal.from", Signal.from(stream)),
        ]
        for (number, (name, signal)) in sources.enumerated() {
            let loop = EventLoop(name: "async-home")
            let events = Locked<[String]>([])
            let subscribed = Locked(false)
            loop.execute {
                _ = signal.subscribe(next: { value in events.withLock { $0.append("next \(value)") } },
                                     error: { error in events.withLock { $0.append("\(error)") } },
                                     completed: { events.withLock { $0.append("completed") } })
                subscribed.withLock { $0 = true }
            }
            waitUntil("\(name): the subscription on the loop") { subscribed.current }
            loop.shutdown()
            waitUntil("\(name): an event after the home loop's shutdown") { !events.current.isEmpty }
            XCTAssertEqual(events.current, ["\(EventLoopError.shutDown(loop: "async-home"))"], name)
            waitUntil("\(name): the task's cancellation") { cancelled.current == number + 1 }
        }
        continuation.finish()
    }

    func testASignalFromAnAsyncSequence() throws {
        let stream = AsyncStream<Int> { continuation in
            for value in 1...3 { continuation.yield(value) }
            continuation.finish()
        }
        let recorder = EventRecorder(Signal.from(stream))
        XCTAssertEqual(try recorder.waitForTermination(), .completed)
        XCTAssertEqual(recorder.values, [1, 2, 3])
    }
}

/// Pause/resume notes from a flow-controlled source.
final class FlowLog: @unchecked Sendable {
    // Protected by `lock`.
    private let lock = NSLock()
    private(set) var pauses = 0
    private(set) var resumes = 0
    func note(paused: Bool, buffered: Int) { lock.withLock { if paused { pauses += 1 } else { resumes += 1 } } }
}

/// Carries non-Sendable test state into @Sendable closures that run on one loop thread.
struct UncheckedBoxForTests<Value>: @unchecked Sendable {
    // Used from one loop thread only.
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Produces numbers in slices on its subscription's home loop while not paused, like a socket being read.
final class PausableProducer: @unchecked Sendable {
    // Touched only on the subscription's home loop thread.
    private let subscriber: Subscriber<Int>
    private let total: Int
    private let flow: FlowLog
    private var next = 0
    private var paused = false

    init(subscriber: Subscriber<Int>, total: Int, flow: FlowLog) {
        self.subscriber = subscriber
        self.total = total
        self.flow = flow
    }

    func produce() {
        var slice = 0
        while !paused && next < total && slice < 100 {
            subscriber.sendNext(next)
            next += 1
            slice += 1
        }
        if next == total {
            subscriber.sendCompleted()
        } else if !paused {
            subscriber.homeScheduler.schedule { self.produce() }
        }
    }

    func pause() {
        paused = true
        flow.note(paused: true, buffered: next)
    }

    func resume() {
        paused = false
        flow.note(paused: false, buffered: next)
        produce()
    }
}

/// A `Signal.async` whose task sleeps for a minute, counting in `cancelled` when it is cancelled instead.
private func sleepsUntilCancelled(counting cancelled: Locked<Int>) -> Signal<Int> {
    Signal<Int>.async {
        do {
            try await Task.sleep(for: .seconds(60))
        } catch {
            cancelled.withLock { $0 += 1 }
            throw error
        }
        return 1
    }
}
