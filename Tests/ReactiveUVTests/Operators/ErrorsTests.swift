import ReactiveUV
import ReactiveUVTesting
import XCTest

final class ErrorsTests: XCTestCase {
    func testCatchSwitchesToTheHandlersSignalAfterDisposingTheFailedOne() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .error(TestError("first")))))
        let replacement = TestSource<Int>(events((5, .next(2)), (10, .completed)))
        let seen = Locked<[String]>([])
        let recorder = test.record(source.signal.catch { error in
            seen.withLock { $0.append("\(error)") }
            return replacement.signal
        })
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@25", "completed@30"])
        XCTAssertEqual(seen.current, ["first"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
        XCTAssertEqual(replacement.history, ["subscribed@20", "disposed@30"])
    }

    func testCatchToAndCompletionWithoutError() {
        let test = TestScheduler()
        let recorder = test.record(TestSource<Int>(events((10, .error(TestError())))).signal.catchTo(Signal.from([7, 8])))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(7)@10", "next(8)@10", "completed@10"])
        let untouched = TestScheduler().record(Signal.from([1]).catchTo(Signal.return(9)))
        XCTAssertEqual(untouched.events, [.next(1), .completed])
        // The replacement's own error is forwarded.
        let failing = TestScheduler().record(Signal<Int>.error(TestError("a")).catchTo(Signal.error(TestError("b"))))
        XCTAssertEqual(failing.events, [.error(TestError("b"))])
        assertPropagatesErrorAndDisposal("catch", forwardsError: false) { $0.catchTo(Signal.never) }
        assertFinishedPipelineIsFreed("catch") { signal, token in signal.catch { _ in token.touch(); return .empty } }
    }

    func testRetryResubscribesAtMostCountTimes() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .error(TestError()))))
        let recorder = test.record(source.signal.retry(2))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(1)@30", "next(1)@50", "error(boom)@60"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20", "subscribed@20", "disposed@40",
                                        "subscribed@40", "disposed@60"])
        let none = TestScheduler().record(Signal<Int>.error(TestError()).retry(0))
        XCTAssertEqual(none.events, [.error(TestError())])
    }

    func testRetryStopsOnceAnAttemptCompletes() {
        let attempts = Locked(0)
        let flaky = Signal<Int> { subscriber in
            let attempt = attempts.withLock { $0 += 1; return $0 }
            if attempt < 3 {
                subscriber.sendError(TestError())
            } else {
                subscriber.sendNext(attempt)
                subscriber.sendCompleted()
            }
            return nil
        }
        XCTAssertEqual(TestScheduler().record(flaky.retry()).events, [.next(3), .completed])
        XCTAssertEqual(attempts.current, 3)
    }

    func testRetryOfASynchronousSourceThatFailsAMillionTimesUsesConstantStack() {
        let failures = 1_000_000
        let attempts = Locked(0)
        let flaky = Signal<Int> { subscriber in
            let attempt = attempts.withLock { $0 += 1; return $0 }
            if attempt <= failures {
                subscriber.sendError(TestError())
            } else {
                subscriber.sendNext(attempt)
                subscriber.sendCompleted()
            }
            return nil
        }
        let recorder = TestScheduler().record(flaky.retry())
        XCTAssertEqual(recorder.events, [.next(failures + 1), .completed])
    }

    func testRetryDisposal() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .error(TestError()))))
        let recorder = test.record(source.signal.retry())
        test.at(25) { recorder.dispose() }
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@10", "subscribed@10", "disposed@20", "subscribed@20", "disposed@25"])
        assertFinishedPipelineIsFreed("retry") { signal, token in signal.retry(3).map { value -> Int in token.touch(); return value } }
    }
    // MARK: retry(upTo:delay:backoff:while:)

    func testRetryWithBackoffWaitsOneTwoFourTimesTheDelayAndStopsAtUpTo() {
        let test = TestScheduler()
        // Each attempt sends 1 after 5 ms and fails after 10 ms.
        let source = TestSource<Int>(events((5, .next(1)), (10, .error(TestError()))))
        let recorder = test.record(source.signal.retry(upTo: 3, delay: .milliseconds(100), backoff: 2))
        test.run()
        // Waits of 100, 200 and 400 ms after the failures at 10, 120 and 330; the fourth failure is forwarded.
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@10", "subscribed@110", "disposed@120",
                                        "subscribed@320", "disposed@330", "subscribed@730", "disposed@740"])
        XCTAssertEqual(recorder.timeline, ["next(1)@5", "next(1)@115", "next(1)@325", "next(1)@735", "error(boom)@740"])
    }

    func testRetryDoesNotRetryWhatThePredicateRejects() {
        let test = TestScheduler()
        let missing = TestSource<Int>(events((10, .error(UVError.noSuchFile))))
        let notMissing: @Sendable (any Error) -> Bool = { ($0 as? UVError) != .noSuchFile }
        let final = test.record(missing.signal.retry(upTo: 5, delay: .milliseconds(10), while: notMissing))
        let refused = TestSource<Int>(events((10, .error(UVError.connectionRefused))))
        let retried = test.record(refused.signal.retry(upTo: 1, delay: .milliseconds(10), while: notMissing))
        test.run()
        XCTAssertEqual(final.timeline, ["error(\(UVError.noSuchFile))@10"], "ENOENT is final")
        XCTAssertEqual(missing.history, ["subscribed@0", "disposed@10"])
        XCTAssertEqual(refused.history, ["subscribed@0", "disposed@10", "subscribed@20", "disposed@30"], "another error is retried")
        XCTAssertEqual(retried.terminal, .error(UVError.connectionRefused))
    }

    func testRetryWithDelayStopsOnCompletionAndDisposalCancelsTheWait() {
        let attempts = Locked(0)
        let flaky = Signal<Int> { subscriber in
            let attempt = attempts.withLock { $0 += 1; return $0 }
            if attempt < 3 { subscriber.sendError(TestError()) } else { subscriber.sendNext(attempt); subscriber.sendCompleted() }
            return nil
        }
        let test = TestScheduler()
        let recorder = test.record(flaky.retry(upTo: 10, delay: .milliseconds(7)))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(3)@14", "completed@14"], "constant waits of 7 ms (backoff 1)")
        XCTAssertEqual(attempts.current, 3)

        let waiting = TestScheduler()
        let source = TestSource<Int>(events((5, .next(1)), (10, .error(TestError()))))
        let disposed = waiting.record(source.signal.retry(upTo: 3, delay: .milliseconds(100)))
        waiting.at(50) { disposed.dispose() }
        waiting.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@10"], "disposing during the wait cancels the retry")
        XCTAssertEqual(disposed.timeline, ["next(1)@5"])
        XCTAssertEqual(waiting.pendingCount, 0)
        assertPropagatesErrorAndDisposal("retry(upTo:)") { $0.retry(upTo: 1, delay: .milliseconds(1000), while: { _ in false }) }
        assertFinishedPipelineIsFreed("retry(upTo:)") { signal, token in
            signal.retry(upTo: 2, delay: .milliseconds(1)).map { value -> Int in token.touch(); return value }
        }
    }

    func testRetryWithAZeroDelayOfASynchronousSourceUsesConstantStack() {
        let failures = 200_000
        let attempts = Locked(0)
        let flaky = Signal<Int> { subscriber in
            let attempt = attempts.withLock { $0 += 1; return $0 }
            if attempt <= failures { subscriber.sendError(TestError()) } else { subscriber.sendNext(attempt); subscriber.sendCompleted() }
            return nil
        }
        XCTAssertEqual(TestScheduler().record(flaky.retry(upTo: failures, while: { _ in true })).events, [.next(failures + 1), .completed])
    }

    func testRetryWaitsGrowingPastTheLongestDurationAreCappedNotATrap() {
        // 1 ns doubling: the 64th wait would be 2^63 ns, past Int64.max; the waits stop growing there.
        let attempts = Locked(0)
        let failing = Signal<Int> { subscriber in
            attempts.withLock { $0 += 1 }
            subscriber.sendError(TestError())
            return nil
        }
        let test = TestScheduler()
        let recorder = test.record(failing.retry(upTo: 70, delay: .nanoseconds(1), backoff: 2))
        test.run()
        XCTAssertEqual(recorder.events, [.error(TestError())])
        XCTAssertEqual(attempts.current, 71)
    }

}

final class SideEffectsTests: XCTestCase {
    func testDoBlocksRunBeforeTheEventIsPassedOn() {
        let log = Locked<[String]>([])
        let signal = Signal.from([1, 2])
            .doNext { value in log.withLock { $0.append("do \(value)") } }
            .doCompleted { log.withLock { $0.append("do completed") } }
        TestScheduler().performAsCurrent {
            signal.subscribe(next: { value in log.withLock { $0.append("next \(value)") } },
                             completed: { log.withLock { $0.append("completed") } })
        }
        XCTAssertEqual(log.current, ["do 1", "next 1", "do 2", "next 2", "do completed", "completed"])

        let errors = Locked<[String]>([])
        let failing = Signal<Int>.error(TestError("x")).doError { error in errors.withLock { $0.append("\(error)") } }
        XCTAssertEqual(TestScheduler().record(failing).events, [.error(TestError("x"))])
        XCTAssertEqual(errors.current, ["x"])
        assertPropagatesErrorAndDisposal("doNext") { $0.doNext { _ in } }
        assertPropagatesErrorAndDisposal("doError") { $0.doError { _ in } }
        assertPropagatesErrorAndDisposal("doCompleted") { $0.doCompleted {} }
    }

    func testInitiallyRunsOncePerSubscriptionBeforeTheSource() {
        let log = Locked<[String]>([])
        let source = Signal<Int> { subscriber in
            log.withLock { $0.append("subscribed") }
            subscriber.sendCompleted()
            return nil
        }
        let signal = source.initially { log.withLock { $0.append("initially") } }
        XCTAssertEqual(log.current, [], "nothing runs before subscription")
        let test = TestScheduler()
        _ = test.record(signal)
        _ = test.record(signal)
        XCTAssertEqual(log.current, ["initially", "subscribed", "initially", "subscribed"])
        assertPropagatesErrorAndDisposal("initially") { $0.initially {} }
    }

    func testFinallyRunsOnErrorOrCompletionButNotOnDispose() {
        let count = Locked(0)
        let test = TestScheduler()
        _ = test.record(Signal.from([1]).finally { count.withLock { $0 += 1 } })
        _ = test.record(Signal<Int>.error(TestError()).finally { count.withLock { $0 += 1 } })
        XCTAssertEqual(count.current, 2)
        let disposed = test.record(Signal<Int>.never.finally { count.withLock { $0 += 1 } })
        test.performAsCurrent { disposed.dispose() }
        XCTAssertEqual(count.current, 2)
        assertPropagatesErrorAndDisposal("finally") { $0.finally {} }
    }

    func testRepeatResubscribesOnCompletion() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (15, .completed)))
        let recorder = test.record(source.signal.repeat().take(3))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(1)@25", "next(1)@40", "completed@40"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@15", "subscribed@15", "disposed@30", "subscribed@30", "disposed@40"])
        // A synchronous source repeats on the trampoline, without growing the stack.
        let many = TestScheduler().record(Signal.from([1, 2]).repeat().take(200_001).aggregate(0) { count, _ in count + 1 })
        XCTAssertEqual(many.events, [.next(200_001), .completed])
        let failing = TestScheduler().record(Signal.return(1).concat(.error(TestError())).repeat())
        XCTAssertEqual(failing.events, [.next(1), .error(TestError())])
        assertPropagatesErrorAndDisposal("repeat") { $0.repeat() }
    }

}
