import ReactiveUV
import ReactiveUVTesting
import XCTest

final class LifetimeTests: XCTestCase {
    // MARK: on(...)

    /// A source on `test` that logs its subscription and disposal into `log`, then sends `timed`.
    private func loggedRun(_ timed: [(Int, Event<Int>)], disposeAt: Int? = nil) -> [String] {
        let test = TestScheduler()
        let log = Locked<[String]>([])
        let note: @Sendable (String) -> Void = { entry in
            let ms = test.now.nanoseconds / 1_000_000
            log.withLock { $0.append("\(entry)@\(ms)") }
        }
        let source = TestSource<Int>(timed).signal
        let logged = Signal<Int> { subscriber in
            note("source subscribed")
            let inner = source.subscribe(next: { subscriber.sendNext($0) }, error: { subscriber.sendError($0) },
                                         completed: { subscriber.sendCompleted() })
            return ActionDisposable { inner.dispose(); note("source disposed") }
        }
        let hooked = logged.on(
            starting: { note("starting") }, started: { note("started") }, event: { note("event \($0)") },
            failed: { note("failed \($0)") }, completed: { note("completed") }, interrupted: { note("interrupted") },
            terminated: { note("terminated") }, disposed: { note("disposed") }, value: { note("value \($0)") })
        let subscription = test.performAsCurrent {
            hooked.subscribe(next: { note("sink \($0)") }, error: { note("sink error \($0)") }, completed: { note("sink completed") })
        }
        if let disposeAt { test.at(disposeAt) { subscription.dispose() } }
        test.run()
        return log.current
    }

    func testOnRunsEachHookInOrderOnCompletion() {
        XCTAssertEqual(loggedRun(events((10, .next(1)), (20, .completed))), [
            "starting@0", "source subscribed@0", "started@0",
            "event next(1)@10", "value 1@10", "sink 1@10",
            "event completed@20", "completed@20", "terminated@20", "source disposed@20", "disposed@20", "sink completed@20",
        ])
    }

    func testOnReportsAnErrorAndAnInterruption() {
        XCTAssertEqual(loggedRun(events((10, .error(TestError())))), [
            "starting@0", "source subscribed@0", "started@0",
            "event error(boom)@10", "failed boom@10", "terminated@10", "source disposed@10", "disposed@10", "sink error boom@10",
        ])
        XCTAssertEqual(loggedRun(events((10, .next(1)), (30, .completed)), disposeAt: 15), [
            "starting@0", "source subscribed@0", "started@0", "event next(1)@10", "value 1@10", "sink 1@10",
            "source disposed@15", "interrupted@15", "terminated@15", "disposed@15",
        ])
        assertPropagatesErrorAndDisposal("on(disposed:)") { $0.on(disposed: {}) }
        assertFinishedPipelineIsFreed("on(...)") { signal, token in signal.on(disposed: { token.touch() }, value: { _ in token.touch() }) }
    }

    // MARK: take(during:)

    func testTakeDuringCompletesWhenTheLifetimeEnds() {
        let test = TestScheduler()
        let (lifetime, token) = Lifetime.make()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .completed)))
        let recorder = test.record(source.signal.take(during: lifetime))
        test.at(25) { token.dispose() }
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@20", "completed@25"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@25"])
        XCTAssertTrue(lifetime.hasEnded)
        // A lifetime that has ended completes at once, without subscribing the source.
        let late = TestSource<Int>(events((10, .next(1))))
        XCTAssertEqual(test.record(late.signal.take(during: lifetime)).events, [.completed])
        XCTAssertEqual(late.subscriptionCount, 0)
    }

    func testReleasingTheTokenEndsTheLifetime() {
        let test = TestScheduler()
        var made: (lifetime: Lifetime, token: Lifetime.Token)? = Lifetime.make()
        let lifetime = made!.lifetime
        let ended = Locked<[String]>([])
        test.performAsCurrent { lifetime.observeEnded { ended.withLock { $0.append("ended@\(test.now.nanoseconds / 1_000_000)") } } }
        let recorder = test.record(TestSource<Int>(events((10, .next(1)), (50, .next(2)))).signal.take(during: lifetime))
        test.advance(by: .milliseconds(30))
        made = nil  // the token's last reference, released off the home thread: the end is hopped there
        XCTAssertNil(made)
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "completed@30"])
        XCTAssertEqual(ended.current, ["ended@30"])
        do {
            let (alive, keep) = Lifetime.make()
            assertPropagatesErrorAndDisposal("take(during:)") { $0.take(during: alive) }
            withExtendedLifetime(keep) {}
        }
    }
}
