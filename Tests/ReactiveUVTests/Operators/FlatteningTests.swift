import ReactiveUV
import ReactiveUVTesting
import XCTest

final class FlatteningTests: XCTestCase {
    // MARK: bind

    /// RAC's `-bind:`: binding 1, 2, 3 to `return(value * 2)` sends 2, 4, 6 and completes.
    func testSeedBindDoublesOneTwoThree() {
        let signal = Signal<Int> { subscriber in
            subscriber.sendNext(1)
            subscriber.sendNext(2)
            subscriber.sendNext(3)
            subscriber.sendCompleted()
            return nil
        }
        let bound = signal.bind { { value, _ in Signal.return(value * 2) } }
        XCTAssertEqual(TestScheduler().record(bound).events, [.next(2), .next(4), .next(6), .completed])
    }

    func testBindMakesOneBindingPerSubscription() {
        let made = Locked(0)
        let bound = Signal.from([1, 2]).bind { () -> (Int, inout Bool) -> Signal<Int>? in
            made.withLock { $0 += 1 }
            var seen = 0
            return { value, _ in
                seen += 1
                return Signal.return(value * 10 + seen)
            }
        }
        let test = TestScheduler()
        let a = test.record(bound), b = test.record(bound)
        XCTAssertEqual(made.current, 2)
        XCTAssertEqual(a.values, [11, 22])
        XCTAssertEqual(b.values, [11, 22], "the binding's state is per subscription")
    }

    /// Rules 4 and 5: `stop` disposes the source; the signal returned with it still runs and the result
    /// completes when it does.
    func testBindStopDisposesTheSourceAndWaitsForTheLastInner() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .completed)))
        let bound = source.signal.bind { { value, stop in
            if value == 2 { stop = true }
            return TestSource<Int>(events((15, .next(value * 100)), (16, .completed))).signal
        } }
        let recorder = test.record(bound)
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(100)@25", "next(200)@35", "completed@36"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
    }

    func testBindReturningNilStopsLikeStop() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3))))
        let recorder = test.record(source.signal.bind { { value, _ in value == 2 ? nil : Signal.return(value) } })
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "completed@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
    }

    /// Rule 6: an inner error ends everything at once.
    func testBindForwardsAnInnerErrorAndDisposesEverything() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (50, .completed)))
        let slow = TestSource<Int>(events((100, .next(0))))
        let recorder = test.record(source.signal.bind { { value, _ in
            value == 1 ? slow.signal : Signal.error(TestError("inner"))
        } })
        test.run()
        XCTAssertEqual(recorder.timeline, ["error(inner)@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
        XCTAssertEqual(slow.history, ["subscribed@10", "disposed@20"])
        assertPropagatesErrorAndDisposal("bind") { $0.bind { { value, _ in Signal.return(value) } } }
    }

    // MARK: flatMap / flatten

    func testFlatMapMergesInnerSignalsAndCompletesAfterAll() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (25, .completed)))
        let recorder = test.record(source.signal.flatMap { value in
            TestSource<Int>(events((5, .next(value * 10)), (20, .next(value * 100)), (30, .completed))).signal
        })
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(10)@15", "next(20)@25", "next(100)@30", "next(200)@40", "completed@50"])
        assertPropagatesErrorAndDisposal("flatMap") { $0.flatMap { Signal.return($0) } }
        assertFinishedPipelineIsFreed("flatMap") { signal, token in
            signal.flatMap { value -> Signal<Int> in token.touch(); return Signal.return(value) }
        }
    }

    func testDisposingAFlatMapDisposesTheInnerSignals() {
        let test = TestScheduler()
        let inner = TestSource<Int>(events((100, .next(0))))
        let recorder = test.record(TestSource<Int>(events((10, .next(1)))).signal.flatMap { _ in inner.signal })
        test.at(20) { recorder.dispose() }
        test.run()
        XCTAssertEqual(inner.history, ["subscribed@10", "disposed@20"])
        XCTAssertEqual(recorder.timeline, [])
    }

    func testFlattenWithMaxConcurrentQueuesInnerSignals() {
        let test = TestScheduler()
        let inners = (1...3).map { n in TestSource<Int>(events((10, .next(n)), (10 * n, .completed))) }
        let outer = TestSource<Signal<Int>>(events((0, .next(inners[0].signal)), (1, .next(inners[1].signal)),
                                                   (2, .next(inners[2].signal)), (3, .completed)))
        let recorder = test.record(outer.signal.flatten(maxConcurrent: 2))
        test.run()
        XCTAssertEqual(inners.map(\.history), [["subscribed@0", "disposed@10"], ["subscribed@1", "disposed@21"],
                                               ["subscribed@10", "disposed@40"]])
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@11", "next(3)@20", "completed@40"])
    }

    func testConcatOfASignalOfSignalsRunsThemOneAfterTheOther() {
        let test = TestScheduler()
        let a = TestSource<Int>(events((10, .next(1)), (20, .completed)))
        let b = TestSource<Int>(events((5, .next(2)), (6, .completed)))
        let recorder = test.record(Signal.from([a.signal, b.signal]).concat())
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@25", "completed@26"])
        XCTAssertEqual(b.history, ["subscribed@20", "disposed@26"])
    }

    func testALongRunOfSynchronousInnersUsesConstantStack() {
        let count = 50_000
        let recorder = TestScheduler().record(Signal.from(0..<count).map { Signal.return($0) }.concat().aggregate(0, +))
        XCTAssertEqual(recorder.events, [.next((0..<count).reduce(0, +)), .completed])
    }

    func testAFinishedInnerLeavesTheSubscription() {
        let test = TestScheduler()
        let outer = Subject<Int>()
        let recorder = test.record(outer.flatMap { value in Signal.return(value) })
        test.performAsCurrent { for n in 0..<1_000 { outer.sendNext(n) } }
        XCTAssertEqual(recorder.values.count, 1_000)
        let compound = try? XCTUnwrap(recorder.disposable as? CompoundDisposable)
        XCTAssertLessThanOrEqual(compound?.count ?? .max, 2, "finished inner subscriptions must be removed, not kept")
    }

    // MARK: switchToLatest

    func testSwitchToLatestDisposesThePreviousInner() {
        let test = TestScheduler()
        let first = TestSource<Int>(events((10, .next(1)), (30, .next(2)), (40, .completed)))
        let second = TestSource<Int>(events((5, .next(10)), (10, .completed)))
        let outer = TestSource<Signal<Int>>(events((0, .next(first.signal)), (20, .next(second.signal)), (22, .completed)))
        let recorder = test.record(outer.signal.switchToLatest())
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(10)@25", "completed@30"])
        XCTAssertEqual(first.history, ["subscribed@0", "disposed@20"])
    }

    func testSwitchToLatestWaitsForTheOuterToComplete() {
        let test = TestScheduler()
        let inner = TestSource<Int>(events((5, .next(1)), (6, .completed)))
        let outer = TestSource<Signal<Int>>(events((0, .next(inner.signal)), (30, .completed)))
        let recorder = test.record(outer.signal.switchToLatest())
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@5", "completed@30"])
        let synchronous = TestScheduler().record(Signal.from([Signal.return(1), Signal.return(2)]).switchToLatest())
        XCTAssertEqual(synchronous.events, [.next(1), .next(2), .completed])
    }

    func testSwitchToLatestPropagation() {
        assertPropagatesErrorAndDisposal("switchToLatest") { $0.map { Signal.return($0) }.switchToLatest() }
        assertPropagatesErrorAndDisposal("flatMapLatest (inner)") { signal in Signal.return(0).flatMapLatest { _ in signal } }
        assertFinishedPipelineIsFreed("switchToLatest") { signal, token in
            signal.flatMapLatest { value -> Signal<Int> in token.touch(); return Signal.return(value) }
        }
    }
}
