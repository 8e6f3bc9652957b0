import ReactiveUV
import ReactiveUVTesting
import XCTest

final class GroupingTests: XCTestCase {
    // MARK: collect(count:) / buffer(count:)

    func testCollectCountSendsFullArraysAndTheRestOnCompletion() {
        let test = TestScheduler()
        let five = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .next(4)), (50, .next(5)), (60, .completed)))
        let collected = test.record(five.signal.collect(count: 2))
        let buffered = test.record(five.signal.buffer(count: 2))
        let four = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .next(4)), (60, .completed)))
        let even = test.record(four.signal.collect(count: 2))
        test.run()
        XCTAssertEqual(collected.timeline, ["next([1, 2])@20", "next([3, 4])@40", "next([5])@60", "completed@60"])
        XCTAssertEqual(buffered.timeline, collected.timeline, "buffer(count:) is collect(count:)")
        XCTAssertEqual(even.timeline, ["next([1, 2])@20", "next([3, 4])@40", "completed@60"], "no empty array at the end")
    }

    func testCollectCountErrorDropsTheUnfinishedArray() {
        let test = TestScheduler()
        let failing = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .error(TestError()))))
        let recorder = test.record(failing.signal.collect(count: 2))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next([1, 2])@20", "error(boom)@40"])
        assertPropagatesErrorAndDisposal("collect(count:)") { $0.collect(count: 1) }
        assertFinishedPipelineIsFreed("collect(count:)") { signal, token in
            signal.collect(count: 3).map { values -> Int in token.touch(); return values.count }
        }
    }

    // MARK: groupBy

    /// Subscribes a recorder to each group as it arrives (on the home thread, so it gets every value of its key).
    private func recordGroups(
        _ test: TestScheduler, _ signal: Signal<GroupedSignal<Int, Int>>
    ) -> (outer: EventRecorder<Int>, groups: Locked<[Int: EventRecorder<Int>]>) {
        let groups = Locked<[Int: EventRecorder<Int>]>([:])
        let outer = test.record(signal.map { group -> Int in
            let recorder = EventRecorder(group)
            groups.withLock { $0[group.key] = recorder }
            return group.key
        })
        return (outer, groups)
    }

    func testGroupByStartsAGroupPerKeyAndCompletesEveryGroupWithTheSource() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, .next(4)), (50, .next(5)), (70, .completed)))
        let (outer, groups) = recordGroups(test, source.signal.groupBy({ $0 % 2 }, transform: { $0 * 10 }))
        test.run()
        XCTAssertEqual(outer.timeline, ["next(1)@10", "next(0)@20", "completed@70"])
        XCTAssertEqual(groups.current[1]?.timeline, ["next(10)@10", "next(30)@30", "next(50)@50", "completed@70"])
        XCTAssertEqual(groups.current[0]?.timeline, ["next(20)@20", "next(40)@40", "completed@70"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@70"])
    }

    func testGroupByErrorReachesEveryGroup() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .error(TestError()))))
        let (outer, groups) = recordGroups(test, source.signal.groupBy { $0 % 2 })
        test.run()
        XCTAssertEqual(outer.timeline, ["next(1)@10", "next(0)@20", "error(boom)@30"])
        XCTAssertEqual(groups.current[1]?.timeline, ["next(1)@10", "error(boom)@30"])
        XCTAssertEqual(groups.current[0]?.timeline, ["next(2)@20", "error(boom)@30"])
        assertPropagatesErrorAndDisposal("groupBy") { $0.groupBy { $0 }.map(\.key) }
    }

    func testDisposingTheOuterSubscriptionCompletesEveryGroup() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3))))
        let (outer, groups) = recordGroups(test, source.signal.groupBy { $0 % 2 })
        test.at(25) { outer.dispose() }
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@25"])
        XCTAssertEqual(groups.current[1]?.timeline, ["next(1)@10", "completed@25"], "no group is left open with nothing behind it")
        XCTAssertEqual(groups.current[0]?.timeline, ["next(2)@20", "completed@25"])
        assertFinishedPipelineIsFreed("groupBy") { signal, token in
            signal.groupBy { value -> Int in token.touch(); return value }.map(\.key)
        }
    }
}
