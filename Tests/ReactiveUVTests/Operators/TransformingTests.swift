import ReactiveUV
import ReactiveUVTesting
import XCTest

final class TransformingTests: XCTestCase {
    private let numbers = events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, Event<Int>.completed))

    private func run<Output>(_ apply: (Signal<Int>) -> Signal<Output>, _ timed: [(Int, Event<Int>)]? = nil) -> [String] {
        let test = TestScheduler()
        let recorder = test.record(apply(TestSource(timed ?? numbers).signal))
        test.run()
        return recorder.timeline
    }

    func testMap() {
        XCTAssertEqual(run { $0.map { $0 * 10 } }, ["next(10)@10", "next(20)@20", "next(30)@30", "completed@40"])
        assertPropagatesErrorAndDisposal("map") { $0.map { $0 + 1 } }
        assertFinishedPipelineIsFreed("map") { signal, token in signal.map { value -> Int in token.touch(); return value } }
    }

    func testMapReplace() {
        XCTAssertEqual(run { $0.mapReplace("x") }, ["next(x)@10", "next(x)@20", "next(x)@30", "completed@40"])
        assertPropagatesErrorAndDisposal("mapReplace") { $0.mapReplace(0) }
    }

    func testTryMapSendsTheThrownErrorAndStopsTheSource() {
        let test = TestScheduler()
        let source = TestSource(numbers)
        let recorder = test.record(source.signal.tryMap { value -> Int in
            if value == 2 { throw TestError("two") }
            return value * 2
        })
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(2)@10", "error(two)@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
        assertPropagatesErrorAndDisposal("tryMap") { $0.tryMap { $0 } }
    }

    func testScanSendsEachRunningStateAndKeepsStatePerSubscription() {
        XCTAssertEqual(run { $0.scan(100) { $0 + $1 } }, ["next(101)@10", "next(103)@20", "next(106)@30", "completed@40"])
        // Two subscriptions to the same scanned signal do not share the running state.
        let test = TestScheduler()
        let scanned = TestSource(numbers).signal.scan(0) { $0 + $1 }
        let first = test.record(scanned)
        test.advance(by: .milliseconds(25))
        let second = test.record(scanned)
        test.run()
        XCTAssertEqual(first.values, [1, 3, 6])
        XCTAssertEqual(second.values, [1, 3, 6])
        assertPropagatesErrorAndDisposal("scan") { $0.scan(0, +) }
        assertFinishedPipelineIsFreed("scan") { signal, token in signal.scan(0) { token.touch(); return $0 + $1 } }
    }

    func testCombinePrevious() {
        let timeline = run { $0.combinePrevious(0).map { "\($0.0)-\($0.1)" } }
        XCTAssertEqual(timeline, ["next(0-1)@10", "next(1-2)@20", "next(2-3)@30", "completed@40"])
        assertPropagatesErrorAndDisposal("combinePrevious") { $0.combinePrevious(0).map { $0.1 } }
    }

    func testAggregateSendsOnceOnCompletion() {
        XCTAssertEqual(run { $0.aggregate(0, +) }, ["next(6)@40", "completed@40"])
        XCTAssertEqual(run({ $0.aggregate(7, +) }, events((5, .completed))), ["next(7)@5", "completed@5"])
        assertPropagatesErrorAndDisposal("aggregate") { $0.aggregate(0, +) }
    }

    func testCollect() {
        XCTAssertEqual(run { $0.collect() }, ["next([1, 2, 3])@40", "completed@40"])
        XCTAssertEqual(run({ $0.collect() }, events((5, .completed))), ["next([])@5", "completed@5"])
        XCTAssertEqual(run({ $0.collect() }, events((5, .next(1)), (6, .error(TestError())))), ["error(boom)@6"])
        assertPropagatesErrorAndDisposal("collect") { $0.collect() }
    }

    func testStartWith() {
        XCTAssertEqual(run { $0.startWith(0) }, ["next(0)@0", "next(1)@10", "next(2)@20", "next(3)@30", "completed@40"])
        assertPropagatesErrorAndDisposal("startWith") { $0.startWith(0) }
    }

    func testMaterializeAndDematerialize() {
        let failing = events((10, .next(1)), (20, Event<Int>.error(TestError("bad"))))
        XCTAssertEqual(run({ $0.materialize() }, failing), ["next(next(1))@10", "next(error(bad))@20", "completed@20"])
        XCTAssertEqual(run({ $0.materialize() }), ["next(next(1))@10", "next(next(2))@20", "next(next(3))@30",
                                                   "next(completed)@40", "completed@40"])
        XCTAssertEqual(run({ $0.materialize().dematerialize() }, failing), ["next(1)@10", "error(bad)@20"])
        XCTAssertEqual(run { $0.materialize().dematerialize() }, ["next(1)@10", "next(2)@20", "next(3)@30", "completed@40"])
        assertPropagatesErrorAndDisposal("materialize", forwardsError: false) { $0.materialize() }
        assertPropagatesErrorAndDisposal("dematerialize") { $0.materialize().dematerialize() }
    }

    func testDematerializeStopsTheSourceAtAnErrorValue() {
        let test = TestScheduler()
        let source = TestSource<Event<Int>>(events((10, .next(.next(1))), (20, .next(.error(TestError("x")))),
                                                   (30, .next(.next(2)))))
        let recorder = test.record(source.signal.dematerialize())
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "error(x)@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
    }

    // MARK: compactMap

    func testCompactMapSendsTheNonNilResults() {
        // Through the event path (a `Signal { }` source sends events).
        XCTAssertEqual(run { $0.compactMap { $0 % 2 == 1 ? $0 * 10 : nil } }, ["next(10)@10", "next(30)@30", "completed@40"])
        // Through the value shortcut (a subject sending on the home thread passes plain values).
        let test = TestScheduler()
        let subject = Subject<Int>()
        let recorder = test.record(subject.compactMap { $0 > 1 ? "v\($0)" : nil })
        for n in 1...3 { test.at(n * 10) { subject.sendNext(n) } }
        test.at(35) { subject.sendCompleted() }
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(v2)@20", "next(v3)@30", "completed@35"])
        assertPropagatesErrorAndDisposal("compactMap") { $0.compactMap { $0 } }
        assertFinishedPipelineIsFreed("compactMap") { signal, token in
            signal.compactMap { value -> Int? in token.touch(); return value }
        }
    }
}
