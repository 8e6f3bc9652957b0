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

    /// The sending loop's lock-free path must see subscribers that come and go during a delivery.
    func testSubscribersChangingDuringADeliveryOnTheSendingLoop() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let log = Locked<[String]>([])
        var late: (any Disposable)?
        let b = test.performAsCurrent { subject.subscribeNext { value in log.withLock { $0.append("b\(value)") } } }
        test.performAsCurrent {
            subject.subscribeNext { value in
                log.withLock { $0.append("a\(value)") }
                if value == 1 {
                    b.dispose()
                    late = subject.subscribeNext { value in log.withLock { $0.append("c\(value)") } }
                    subject.sendNext(10)  // re-entrant: delivered depth first
                }
            }
            subject.sendNext(0)
            subject.sendNext(1)
            subject.sendNext(2)
        }
        XCTAssertEqual(log.current, ["b0", "a0", "b1", "a1", "a10", "c10", "a2", "c2"])
        XCTAssertEqual(subject.subscriberCount, 2)
        test.performAsCurrent { late?.dispose() }
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
}
