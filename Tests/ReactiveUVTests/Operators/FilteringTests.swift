import ReactiveUV
import ReactiveUVTesting
import XCTest

final class FilteringTests: XCTestCase {
    private let oneToFive = events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .next(4)), (50, .next(5)),
                                   (60, Event<Int>.completed))

    private func run<Output>(_ timed: [(Int, Event<Int>)]? = nil, _ apply: (Signal<Int>) -> Signal<Output>) -> [String] {
        let test = TestScheduler()
        let recorder = test.record(apply(TestSource(timed ?? oneToFive).signal))
        test.run()
        return recorder.timeline
    }

    func testFilter() {
        XCTAssertEqual(run { $0.filter { $0 % 2 == 1 } }, ["next(1)@10", "next(3)@30", "next(5)@50", "completed@60"])
        assertPropagatesErrorAndDisposal("filter") { $0.filter { _ in true } }
        assertFinishedPipelineIsFreed("filter") { signal, token in signal.filter { _ in token.touch(); return true } }
    }

    func testIgnoreAndIgnoreValues() {
        XCTAssertEqual(run { $0.ignore(3) }, ["next(1)@10", "next(2)@20", "next(4)@40", "next(5)@50", "completed@60"])
        XCTAssertEqual(run { $0.ignoreValues() }, ["completed@60"])
        assertPropagatesErrorAndDisposal("ignore") { $0.ignore(1) }
        assertPropagatesErrorAndDisposal("ignoreValues") { $0.ignoreValues() }
    }

    func testDistinctUntilChanged() {
        let repeats = events((1, .next(1)), (2, .next(1)), (3, .next(2)), (4, .next(2)), (5, .next(1)), (6, Event<Int>.completed))
        XCTAssertEqual(run(repeats) { $0.distinctUntilChanged() }, ["next(1)@1", "next(2)@3", "next(1)@5", "completed@6"])
        XCTAssertEqual(run(repeats) { $0.distinctUntilChanged { _, _ in true } }, ["next(1)@1", "completed@6"])
        assertPropagatesErrorAndDisposal("distinctUntilChanged") { $0.distinctUntilChanged() }
    }

    func testTakeCompletesAfterCountAndDisposesTheSource() {
        let test = TestScheduler()
        let source = TestSource(oneToFive)
        let recorder = test.record(source.signal.take(2))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@20", "completed@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
        assertPropagatesErrorAndDisposal("take") { $0.take(5) }
    }

    func testTakeZeroCompletesWithoutSubscribing() {
        let test = TestScheduler()
        let source = TestSource(oneToFive)
        let recorder = test.record(source.signal.take(0))
        test.run()
        XCTAssertEqual(recorder.timeline, ["completed@0"])
        XCTAssertEqual(source.history, [])
    }

    func testTakeOnASynchronousSourceStopsIt() {
        let produced = Locked(0)
        let endless = Signal<Int> { subscriber in
            var n = 0
            while !subscriber.isDisposed && n < 1_000 {
                produced.withLock { $0 += 1 }
                subscriber.sendNext(n)
                n += 1
            }
            return nil
        }
        let test = TestScheduler()
        let recorder = test.record(endless.take(3))
        XCTAssertEqual(recorder.events, [.next(0), .next(1), .next(2), .completed])
        XCTAssertEqual(produced.current, 3, "the source must see the disposal at once")
    }

    func testTakeLast() {
        XCTAssertEqual(run { $0.takeLast(2) }, ["next(4)@60", "next(5)@60", "completed@60"])
        XCTAssertEqual(run { $0.takeLast(10) }.count, 6)
        XCTAssertEqual(run { $0.takeLast(0) }, ["completed@60"])
        assertPropagatesErrorAndDisposal("takeLast") { $0.takeLast(1) }
    }

    func testSkip() {
        XCTAssertEqual(run { $0.skip(3) }, ["next(4)@40", "next(5)@50", "completed@60"])
        XCTAssertEqual(run { $0.skip(0) }.count, 6)
        assertPropagatesErrorAndDisposal("skip") { $0.skip(0) }
    }

    func testTakeWhileAndSkipWhile() {
        let test = TestScheduler()
        let source = TestSource(oneToFive)
        let recorder = test.record(source.signal.take(while: { $0 < 3 }))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@20", "completed@30"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@30"])
        XCTAssertEqual(run { $0.skip(while: { $0 < 3 }) }, ["next(3)@30", "next(4)@40", "next(5)@50", "completed@60"])
        // Once a value passed, later ones are not tested again.
        XCTAssertEqual(run { $0.skip(while: { $0 % 2 == 1 }) }, ["next(2)@20", "next(3)@30", "next(4)@40", "next(5)@50", "completed@60"])
        assertPropagatesErrorAndDisposal("take(while:)") { $0.take(while: { _ in true }) }
        assertPropagatesErrorAndDisposal("skip(while:)") { $0.skip(while: { _ in false }) }
    }

    func testTakeUntilEndsOnTheTriggersValue() {
        let test = TestScheduler()
        let source = TestSource(oneToFive)
        let trigger = TestSource<String>(events((25, .next("stop"))))
        let recorder = test.record(source.signal.take(until: trigger.signal))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@20", "completed@25"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@25"])
        XCTAssertEqual(trigger.history, ["subscribed@0", "disposed@25"])
    }

    func testTakeUntilEndsOnTheTriggersCompletionAndIgnoresItsError() {
        let completing = TestSource<Int>(events((35, .completed)))
        XCTAssertEqual(run { $0.take(until: completing.signal) }, ["next(1)@10", "next(2)@20", "next(3)@30", "completed@35"])
        let failing = TestSource<Int>(events((35, .error(TestError()))))
        XCTAssertEqual(run { $0.take(until: failing.signal) }.count, 6, "a trigger's error is ignored, as in RAC")
        XCTAssertEqual(failing.history, ["subscribed@0", "disposed@35"])
    }

    func testTakeUntilAnImmediateTriggerNeverSubscribesTheSource() {
        let test = TestScheduler()
        let source = TestSource(oneToFive)
        let recorder = test.record(source.signal.take(until: Signal.return(())))
        test.run()
        XCTAssertEqual(recorder.timeline, ["completed@0"])
        XCTAssertEqual(source.history, [])
    }

    func testTakeUntilPropagation() {
        assertPropagatesErrorAndDisposal("take(until:)") { $0.take(until: Signal<Int>.never) }
        let trigger = TestSource<Int>(events((100, .next(0))))
        let test = TestScheduler()
        let recorder = test.record(TestSource(oneToFive).signal.take(until: trigger.signal))
        test.at(15) { recorder.dispose() }
        test.run()
        XCTAssertEqual(trigger.history, ["subscribed@0", "disposed@15"], "disposing the result disposes the trigger")
        assertFinishedPipelineIsFreed("take(until:)") { signal, token in
            signal.take(until: Signal<Int>.never.doNext { _ in token.touch() }).map { value -> Int in token.touch(); return value }
        }
    }

    func testSkipUntil() {
        let trigger = TestSource<Int>(events((25, .next(0)), (26, .next(1))))
        let test = TestScheduler()
        let recorder = test.record(TestSource(oneToFive).signal.skip(until: trigger.signal))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(3)@30", "next(4)@40", "next(5)@50", "completed@60"])
        XCTAssertEqual(trigger.history, ["subscribed@0", "disposed@25"], "the trigger is disposed once it fired")
        let completing = TestSource<Int>(events((45, .completed)))
        XCTAssertEqual(run { $0.skip(until: completing.signal) }, ["next(5)@50", "completed@60"])
        let failing = TestSource<Int>(events((45, .error(TestError()))))
        XCTAssertEqual(run { $0.skip(until: failing.signal) }, ["completed@60"])
        assertPropagatesErrorAndDisposal("skip(until:)") { $0.skip(until: Signal.return(0)) }
    }
}
