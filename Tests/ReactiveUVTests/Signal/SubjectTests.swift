import ReactiveUV
import ReactiveUVTesting
import XCTest

final class SubjectTests: XCTestCase {
    func testSubjectIsHotAndSendsOnlyWhatComesAfterSubscribing() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        test.at(10) { subject.sendNext(1) }
        test.at(30) { subject.sendNext(2) }
        test.at(40) { subject.sendCompleted() }
        let early = test.record(subject)
        var late: EventRecorder<Int>?
        test.advance(by: .milliseconds(20))
        late = test.record(subject)
        test.run()
        XCTAssertEqual(early.timeline, ["next(1)@10", "next(2)@30", "completed@40"])
        XCTAssertEqual(late?.timeline, ["next(2)@30", "completed@40"])
        XCTAssertEqual(subject.subscriberCount, 0, "ended subscriptions leave the subject")
    }

    func testAnEndedSubjectSendsItsTerminalEventToLaterSubscribersAndIgnoresSends() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        test.performAsCurrent {
            subject.sendError(TestError("over"))
            subject.sendNext(1)
            subject.sendCompleted()
        }
        XCTAssertTrue(subject.hasTerminated)
        XCTAssertEqual(test.record(subject).events, [.error(TestError("over"))])
    }

    func testADisposedSubscriptionLeavesTheSubjectAndGetsNothingMore() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let a = test.record(subject), b = test.record(subject.map { $0 * 10 })
        XCTAssertEqual(subject.subscriberCount, 2)
        test.performAsCurrent {
            subject.sendNext(1)
            a.dispose()
            subject.sendNext(2)
        }
        XCTAssertEqual(subject.subscriberCount, 1)
        XCTAssertEqual(a.values, [1])
        XCTAssertEqual(b.values, [10, 20])
    }

    func testReplaySubjectReplaysItsLastCapacityValuesThenLiveEvents() {
        let test = TestScheduler()
        let subject = ReplaySubject<Int>(capacity: 2)
        test.performAsCurrent { for n in 1...5 { subject.sendNext(n) } }
        let recorder = test.record(subject)
        XCTAssertEqual(recorder.values, [4, 5])
        test.performAsCurrent {
            subject.sendNext(6)
            subject.sendCompleted()
        }
        XCTAssertEqual(recorder.events, [.next(4), .next(5), .next(6), .completed])
        XCTAssertEqual(test.record(subject).events, [.next(5), .next(6), .completed], "a late subscriber gets the kept values and the end")
    }

    func testUnboundedReplayIsAskedForByName() {
        let test = TestScheduler()
        let subject = ReplaySubject<Int>.unbounded()
        test.performAsCurrent { for n in 1...2_000 { subject.sendNext(n) } }
        XCTAssertEqual(test.record(subject).values.count, 2_000)
        XCTAssertEqual(ReplaySubject<Int>(capacity: -3).capacity, 0, "a negative capacity is reported and treated as 0")
    }

    func testReplayStopsWhenTheSubscriberDisposesDuringIt() {
        let test = TestScheduler()
        let subject = ReplaySubject<Int>(capacity: 10)
        test.performAsCurrent { for n in 1...10 { subject.sendNext(n) } }
        let recorder = test.record(subject.take(3))
        XCTAssertEqual(recorder.events, [.next(1), .next(2), .next(3), .completed])
        XCTAssertEqual(subject.subscriberCount, 0)
    }

    func testBehaviorSubjectSendsItsCurrentValueFirst() {
        let test = TestScheduler()
        let subject = BehaviorSubject(initial: 0)
        XCTAssertEqual(subject.value, 0)
        let first = test.record(subject)
        test.performAsCurrent { subject.sendNext(1) }
        XCTAssertEqual(subject.value, 1)
        let second = test.record(subject)
        test.performAsCurrent { subject.sendNext(2) }
        XCTAssertEqual(first.values, [0, 1, 2])
        XCTAssertEqual(second.values, [1, 2])
    }

    func testASendFromAnotherThreadIsDeliveredOnTheSubscribersHome() throws {
        let report = LoopHarness.run { harness in
            let subject = Subject<Int>()
            let recorder = try harness.record(subject)
            onNewThread { subject.sendNext(7) }
            XCTAssertEqual(try recorder.waitForValues(1), [7])
            XCTAssertEqual(recorder.recorded.first?.loopName, "harness")
            XCTAssertTrue(recorder.recorded.first?.onHomeThread ?? false)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testAFinishedSubscriptionToASubjectIsFreed() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        weak var weakToken: LifetimeToken?
        let recorder: EventRecorder<Int> = {
            let token = LifetimeToken()
            weakToken = token
            return test.record(subject.map { value -> Int in token.touch(); return value })
        }()
        XCTAssertNotNil(weakToken)
        // Two sends: the second takes the sending loop's cached snapshot, which still holds the subscriber.
        test.performAsCurrent {
            subject.sendNext(1)
            subject.sendNext(2)
        }
        XCTAssertEqual(recorder.values, [1, 2])
        test.performAsCurrent { recorder.dispose() }
        XCTAssertNil(weakToken, "the subject must not keep a disposed subscription's closures")
    }

    /// The sending loop's cached snapshot still lists a subscriber that has left until that loop
    /// sends again (it may never: it may have shut down). That subscriber must not keep the
    /// subject alive, or subject, snapshot and subscriber hold each other and are never freed.
    func testASubjectIsFreedWhenDroppedAfterItsSubscribersLeft() {
        let test = TestScheduler()
        weak var weakSubject: Subject<Int>?
        do {
            let subject = Subject<Int>()
            weakSubject = subject
            let recorder = test.record(subject)
            // Two sends: the second fills the sending scheduler's cached snapshot.
            test.performAsCurrent {
                subject.sendNext(1)
                subject.sendNext(2)
            }
            XCTAssertEqual(recorder.values, [1, 2])
            test.performAsCurrent { recorder.dispose() }
        }
        XCTAssertNil(weakSubject, "a subject whose cached snapshot lists a departed subscriber was never freed")
    }

    /// `subscribe` on a subject on its home thread keeps the sink itself as the subscriber's observer:
    /// values, the end and disposal must behave as through any other observer, and disposal must
    /// free the callbacks and leave the subject while the caller still holds the disposable.
    func testADirectSubscriptionToASubjectDeliversLeavesAndFreesItsCallbacks() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        weak var weakToken: LifetimeToken?
        let values = Locked<[Int]>([])
        let subscription: any Disposable = test.performAsCurrent {
            let token = LifetimeToken()
            weakToken = token
            return subject.subscribeNext { value in
                token.touch()
                values.append(value)
            }
        }
        XCTAssertEqual(subject.subscriberCount, 1)
        test.performAsCurrent {
            subject.sendNext(1)
            subject.sendNext(2)
        }
        subject.sendNext(3)  // from outside the home: hopped there, delivered when the scheduler runs
        test.run()
        XCTAssertEqual(values.current, [1, 2, 3])
        test.performAsCurrent { subscription.dispose() }
        XCTAssertEqual(subject.subscriberCount, 0, "a disposed subscription leaves the subject")
        XCTAssertNil(weakToken, "the subject must not keep a disposed subscription's callbacks")
        test.performAsCurrent { subject.sendNext(4) }
        test.run()
        XCTAssertEqual(values.current, [1, 2, 3], "nothing after disposal")

        let ended = Locked(false)
        let second: any Disposable = test.performAsCurrent {
            subject.subscribe(next: { values.append($0) }, completed: { ended.withLock { $0 = true } })
        }
        test.performAsCurrent {
            subject.sendNext(5)
            subject.sendCompleted()
        }
        XCTAssertEqual(values.current, [1, 2, 3, 5])
        XCTAssertTrue(ended.current)
        XCTAssertTrue(second.isDisposed, "the end disposes the subscription")
        XCTAssertEqual(subject.subscriberCount, 0)
    }

    /// The sending loop's lock-free path must see subscribers that come and go during a delivery.
    func testSubscribersChangingDuringADeliveryOnTheSendingLoop() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let log = Locked<[String]>([])
        let late = Locked<(any Disposable)?>(nil)
        let b = test.performAsCurrent { subject.subscribeNext { value in log.withLock { $0.append("b\(value)") } } }
        test.performAsCurrent {
            subject.subscribeNext { value in
                log.withLock { $0.append("a\(value)") }
                if value == 1 {
                    b.dispose()
                    late.current = subject.subscribeNext { value in log.withLock { $0.append("c\(value)") } }
                    subject.sendNext(10)  // re-entrant: delivered depth first
                }
            }
            subject.sendNext(0)
            subject.sendNext(1)
            subject.sendNext(2)
        }
        XCTAssertEqual(log.current, ["b0", "a0", "b1", "a1", "a10", "c10", "a2", "c2"])
        XCTAssertEqual(subject.subscriberCount, 2)
        test.performAsCurrent { late.current?.dispose() }
        XCTAssertEqual(subject.subscriberCount, 1)
    }

    func testTwoLoopsSendingIntoOneSubjectReachSubscribersOnBoth() throws {
        let loops = [EventLoop(name: "one"), EventLoop(name: "two")]
        let subject = Subject<Int>()
        let recorders = loops.compactMap { loop in onLoop(loop) { UncheckedBox(EventRecorder(subject)) }?.value }
        for (index, loop) in loops.enumerated() {
            loop.execute { for n in 0..<1_000 { subject.sendNext(index * 1_000 + n) } }
        }
        for recorder in recorders {
            let values = try recorder.waitForValues(2_000)
            XCTAssertEqual(values.filter { $0 < 1_000 }, Array(0..<1_000))
            XCTAssertEqual(values.filter { $0 >= 1_000 }, Array(1_000..<2_000))
            XCTAssertFalse(recorder.sawConcurrentDelivery)
            XCTAssertTrue(recorder.recorded.allSatisfy(\.onHomeThread))
        }
        subject.sendCompleted()
        for recorder in recorders { _ = try recorder.waitForTermination() }
        for loop in loops { XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0) }
    }

    /// The owner's one-subscriber path: a fused chain that disposes itself during a value gets nothing more,
    /// and a subscriber that comes later (the cache then holds a different single subscriber) gets what follows.
    func testTheOnlySubscriberOfAFusedChainDisposingItselfDuringAValue() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let log = Locked<[String]>([])
        let first = Locked<(any Disposable)?>(nil)
        test.performAsCurrent {
            first.current = subject.map { $0 * 10 }.filter { $0 != 30 }.scan(0, +).subscribeNext { total in
                log.withLock { $0.append("a\(total)") }
                if total == 10 { subject.sendNext(2) }  // re-entrant, depth first: a30 before the outer send returns
                if total == 70 { first.current?.dispose() }
            }
            for n in [1, 3, 4, 5, 6] { subject.sendNext(n) }  // 1 (and 2, nested), 3 (filtered out), 4: 10, 30, 70; then disposed
        }
        XCTAssertEqual(log.current, ["a10", "a30", "a70"])
        XCTAssertEqual(subject.subscriberCount, 0)
        test.performAsCurrent {
            _ = subject.map { $0 + 1 }.subscribeNext { value in log.withLock { $0.append("b\(value)") } }
            subject.sendNext(6)
        }
        XCTAssertEqual(log.current, ["a10", "a30", "a70", "b7"])
    }

    /// Fused operators (`map`, `filter`, `scan`: values as plain values) and lifted ones (`take`, `skip`:
    /// events) mixed in one chain give the same events as each alone, ends included.
    func testFusedAndLiftedOperatorsMixedInOneChain() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let mixed = test.record(subject.map { $0 * 2 }.skip(1).filter { $0 % 3 != 0 }.scan(0, +).take(3).map { -$0 })
        let fusedOnly = test.record(subject.filter { $0 > 1 }.map { $0 * 2 }.scan(0, +))
        test.performAsCurrent {
            for n in 1...8 { subject.sendNext(n) }
            subject.sendError(TestError("end"))
        }
        // map: 2 4 6 8 10 12 14 16; skip(1): 4 6 8 10 ...; filter: 4 8 10 14 16; scan: 4 12 22; take(3) ends.
        XCTAssertEqual(mixed.events, [.next(-4), .next(-12), .next(-22), .completed])
        XCTAssertEqual(fusedOnly.events, [.next(4), .next(10), .next(18), .next(28), .next(40), .next(54), .next(70),
                                          .error(TestError("end"))])
        XCTAssertEqual(subject.subscriberCount, 0)
    }

    /// Sends from the subject's owner loop (the cached, lock-free path, values as plain values) and
    /// from another thread (hopped, as events) reach a fused chain on that loop, one at a time, each in order.
    func testOwnerLoopAndOtherThreadSendIntoAFusedChain() throws {
        let loop = EventLoop(name: "owner")
        let subject = Subject<Int>()
        let recorder = try XCTUnwrap(onLoop(loop) { UncheckedBox(EventRecorder(subject.map { $0 * 2 }.filter { _ in true })) }?.value)
        loop.execute { for n in 0..<2_000 { subject.sendNext(n) } }
        onNewThread { for n in 2_000..<4_000 { subject.sendNext(n) } }
        let values = try recorder.waitForValues(4_000)
        XCTAssertEqual(values.filter { $0 < 4_000 }, Array(stride(from: 0, to: 4_000, by: 2)))
        XCTAssertEqual(values.filter { $0 >= 4_000 }, Array(stride(from: 4_000, to: 8_000, by: 2)))
        XCTAssertFalse(recorder.sawConcurrentDelivery)
        XCTAssertTrue(recorder.recorded.allSatisfy(\.onHomeThread))
        subject.sendCompleted()
        XCTAssertEqual(try recorder.waitForTermination(), .completed)
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
    }
}
