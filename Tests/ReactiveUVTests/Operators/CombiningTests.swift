import ReactiveUV
import ReactiveUVTesting
import XCTest

final class CombiningTests: XCTestCase {
    // MARK: concat

    /// RAC's `[signal concat:signals]` where signal sends 1 and signals sends 2, 3, 6.
    func testSeedConcatOfOneThenTwoThreeSix() {
        let test = TestScheduler()
        let first = TestSource<Int>(events((10, .next(1)), (20, .completed)))
        let second = TestSource<Int>(events((5, .next(2)), (6, .next(3)), (7, .next(6)), (8, .completed)))
        let recorder = test.record(first.signal.concat(second.signal))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@25", "next(3)@26", "next(6)@27", "completed@28"])
        XCTAssertEqual(first.history, ["subscribed@0", "disposed@20"])
        XCTAssertEqual(second.history, ["subscribed@20", "disposed@28"], "the second signal is subscribed only after the first completed")
    }

    func testConcatOfSynchronousSignals() {
        let recorder = TestScheduler().record(Signal.return(1).concat(Signal.from([2, 3, 6])))
        XCTAssertEqual(recorder.events, [.next(1), .next(2), .next(3), .next(6), .completed])
    }

    func testConcatErrorNeverSubscribesTheSecond() {
        let test = TestScheduler()
        let second = TestSource<Int>(events((1, .next(2))))
        let recorder = test.record(TestSource<Int>(events((10, .error(TestError())))).signal.concat(second.signal))
        test.run()
        XCTAssertEqual(recorder.timeline, ["error(boom)@10"])
        XCTAssertEqual(second.history, [])
    }

    func testConcatPropagation() {
        assertPropagatesErrorAndDisposal("concat (first)") { $0.concat(Signal.never) }
        assertPropagatesErrorAndDisposal("concat (second)") { Signal<Int>.empty.concat($0) }
        assertFinishedPipelineIsFreed("concat") { signal, token in
            signal.concat(Signal.empty.doCompleted { token.touch() })
        }
    }

    func testThenIgnoresValuesAndSubscribesTheNextOnCompletion() {
        let test = TestScheduler()
        let made = Locked(0)
        let recorder = test.record(TestSource<Int>(events((10, .next(1)), (20, .completed))).signal.then { () -> Signal<String> in
            made.withLock { $0 += 1 }
            return Signal.from(["a", "b"])
        })
        XCTAssertEqual(made.current, 0, "then's block runs only when the first signal completes")
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(a)@20", "next(b)@20", "completed@20"])
        assertPropagatesErrorAndDisposal("then") { $0.then { Signal<Int>.never } }
    }

    /// `then` given a signal (the form RAC's `-then:` reads like) subscribes it only once the first completed.
    func testThenWithASignalSubscribesItOnlyOnCompletion() {
        let test = TestScheduler()
        let subscribed = Locked(0)
        let next = Signal<String> { subscriber in
            subscribed.withLock { $0 += 1 }
            subscriber.sendNext("a")
            subscriber.sendCompleted()
            return nil
        }
        let recorder = test.record(TestSource<Int>(events((10, .next(1)), (20, .completed))).signal.then(next))
        XCTAssertEqual(subscribed.current, 0, "the signal given to then is subscribed only when the first completes")
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(a)@20", "completed@20"])
        XCTAssertEqual(subscribed.current, 1)
        assertPropagatesErrorAndDisposal("then(signal)") { $0.then(Signal<Int>.never) }
    }

    // MARK: zip

    /// RAC's zipWith pairs 1...5 with A...D by index; 5 has no partner and is dropped.
    func testSeedZipOfOneToFiveWithAToDDropsFive() {
        let numbers = Signal.from([1, 2, 3, 4, 5])
        let letters = Signal.from(["A", "B", "C", "D"])
        let recorder = TestScheduler().record(numbers.zip(with: letters).map { "\($0.0)\($0.1)" })
        XCTAssertEqual(recorder.events, [.next("1A"), .next("2B"), .next("3C"), .next("4D"), .completed])
    }

    func testZipPairsByIndexAndCompletesWhenASideIsExhausted() {
        let test = TestScheduler()
        let left = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3)), (35, .completed)))
        let right = TestSource<String>(events((15, .next("A")), (40, .next("B")), (50, .next("C")), (60, .next("D")),
                                              (70, .completed)))
        let recorder = test.record(left.signal.zip(with: right.signal).map { "\($0.0)\($0.1)" })
        test.run()
        // The left side completed at 35 with 2 and 3 waiting; C pairs with 3 at 50 and the left queue is then empty.
        XCTAssertEqual(recorder.timeline, ["next(1A)@15", "next(2B)@40", "next(3C)@50", "completed@50"])
        XCTAssertEqual(right.history, ["subscribed@0", "disposed@50"])
    }

    func testStaticZipOfThreeAndOfNone() {
        let recorder = TestScheduler().record(Signal.zip([Signal.from([1, 2, 3]), Signal.from([10, 20]), Signal.from([100, 200, 300])]))
        XCTAssertEqual(recorder.events, [.next([1, 10, 100]), .next([2, 20, 200]), .completed])
        XCTAssertEqual(TestScheduler().record(Signal<Int>.zip([])).events, [.completed])
    }

    func testZipPropagation() {
        assertPropagatesErrorAndDisposal("zip (left)") { $0.zip(with: Signal<Int>.never).map { $0.0 } }
        assertPropagatesErrorAndDisposal("zip (right)") { Signal<Int>.never.zip(with: $0).map { $0.0 } }
        assertFinishedPipelineIsFreed("zip") { signal, token in
            signal.zip(with: Signal.from([1, 2, 3])).map { pair -> Int in token.touch(); return pair.0 }
        }
    }

    // MARK: combineLatest

    /// The first combination is sent only once every input has sent a value.
    func testSeedCombineLatestFirstEmission() {
        let test = TestScheduler()
        let a = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (50, .next(3)), (60, .completed)))
        let b = TestSource<String>(events((30, .next("x")), (40, .next("y")), (70, .completed)))
        let recorder = test.record(a.signal.combineLatest(with: b.signal).map { "\($0.0)\($0.1)" })
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(2x)@30", "next(2y)@40", "next(3y)@50", "completed@70"])
    }

    func testCombineLatestOfObservedValuesEmitsOnSubscription() {
        // RACObserve's case: inputs that send their current value at once make a value at once.
        let left = BehaviorSubject(initial: 1), right = BehaviorSubject(initial: "a")
        let test = TestScheduler()
        let recorder = test.record(Signal<Any>.combineLatest([left.map { $0 as Any }, right.map { $0 as Any }]).map { "\($0[0])\($0[1])" })
        XCTAssertEqual(recorder.timeline, ["next(1a)@0"])
        test.performAsCurrent { right.sendNext("b") }
        XCTAssertEqual(recorder.values, ["1a", "1b"])
    }

    func testCombineLatestCompletesAtOnceWhenAnInputCompletesWithoutAValue() {
        let test = TestScheduler()
        let silent = TestSource<Int>(events((20, .completed)))
        let other = TestSource<Int>(events((10, .next(1)), (30, .next(2))))
        let recorder = test.record(Signal.combineLatest([other.signal, silent.signal]))
        test.run()
        XCTAssertEqual(recorder.timeline, ["completed@20"])
        XCTAssertEqual(other.history, ["subscribed@0", "disposed@20"])
    }

    func testCombineLatestPropagation() {
        assertPropagatesErrorAndDisposal("combineLatest") { $0.combineLatest(with: Signal.return("x")).map { $0.0 } }
        assertFinishedPipelineIsFreed("combineLatest") { signal, token in
            signal.combineLatest(with: Signal.return(0)).map { pair -> Int in token.touch(); return pair.0 }
        }
        XCTAssertEqual(TestScheduler().record(Signal<Int>.combineLatest([])).events, [.completed])
    }

    // MARK: merge

    func testMergeInterleavesAndCompletesWhenAllComplete() {
        let test = TestScheduler()
        let a = TestSource<Int>(events((10, .next(1)), (30, .next(3)), (35, .completed)))
        let b = TestSource<Int>(events((20, .next(2)), (40, .next(4)), (50, .completed)))
        let recorder = test.record(a.signal.merge(with: b.signal))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "next(2)@20", "next(3)@30", "next(4)@40", "completed@50"])
        XCTAssertEqual(a.history, ["subscribed@0", "disposed@35"])
    }

    func testMergeErrorDisposesTheOthers() {
        let test = TestScheduler()
        let a = TestSource<Int>(events((10, .next(1)), (20, .error(TestError()))))
        let b = TestSource<Int>(events((30, .next(2))))
        let c = TestSource<Int>(events((30, .next(3))))
        let recorder = test.record(Signal.merge([a.signal, b.signal, c.signal]))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "error(boom)@20"])
        XCTAssertEqual(b.history, ["subscribed@0", "disposed@20"])
        XCTAssertEqual(c.history, ["subscribed@0", "disposed@20"])
        XCTAssertEqual(TestScheduler().record(Signal<Int>.merge([])).events, [.completed])
        assertPropagatesErrorAndDisposal("merge") { $0.merge(with: Signal.never) }
        assertFinishedPipelineIsFreed("merge") { signal, token in
            signal.merge(with: Signal.empty).map { value -> Int in token.touch(); return value }
        }
    }

    // MARK: sample

    func testSampleSendsTheLatestValueOnEachSamplerValue() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (40, .next(3)), (80, .completed)))
        let sampler = TestSource<Void>(events((5, .next(())), (25, .next(())), (30, .next(())), (45, .next(())), (60, .completed)))
        let recorder = test.record(source.signal.sample(sampler.signal))
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(2)@25", "next(2)@30", "next(3)@45", "completed@60"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@60"])
        assertPropagatesErrorAndDisposal("sample") { $0.sample(Signal<Int>.never) }
    }

    // MARK: withLatest(from:)

    func testWithLatestFromDropsValuesBeforeTheOtherHasOneAndIgnoresItsCompletion() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (30, .next(2)), (50, .next(3)), (60, .completed)))
        let other = TestSource<String>(events((20, .next("a")), (40, .next("b")), (45, .completed)))
        let recorder = test.record(source.signal.withLatest(from: other.signal).map { "\($0)\($1)" })
        test.run()
        // 1 comes before `other` has a value: dropped. `other`'s values alone send nothing; its completion at 45 keeps "b".
        XCTAssertEqual(recorder.timeline, ["next(2a)@30", "next(3b)@50", "completed@60"])
        XCTAssertEqual(other.history, ["subscribed@0", "disposed@45"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@60"])
    }

    func testWithLatestFromSubscribesTheOtherFirstAndForwardsItsError() {
        // A value the other sends at once is there for the source's synchronous values.
        let synchronous = TestScheduler().record(Signal.from([1, 2]).withLatest(from: Signal.return("x")).map { "\($0)\($1)" })
        XCTAssertEqual(synchronous.events, [.next("1x"), .next("2x"), .completed])
        // An error from the other ends the result and disposes the source.
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (30, .next(2))))
        let other = TestSource<Int>(events((5, .next(0)), (20, .error(TestError("other")))))
        let recorder = test.record(source.signal.withLatest(from: other.signal).map { $0 + $1 })
        test.run()
        XCTAssertEqual(recorder.timeline, ["next(1)@10", "error(other)@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
        assertPropagatesErrorAndDisposal("withLatest(from:)") { $0.withLatest(from: Signal.return(0)).map { $0.0 } }
        assertFinishedPipelineIsFreed("withLatest(from:)") { signal, token in
            signal.withLatest(from: Signal.return(0)).map { pair -> Int in token.touch(); return pair.0 }
        }
    }
}
