import ReactiveUV
import ReactiveUVTesting
import XCTest

final class MulticastTests: XCTestCase {
    private let ticks = events((10, .next(1)), (20, .next(2)), (30, .next(3)), (40, Event<Int>.completed))

    func testPublishSharesOneSubscriptionAndConnectIsIdempotent() {
        let test = TestScheduler()
        let source = TestSource(ticks)
        let connection = source.signal.publish()
        let a = test.record(connection.signal)
        let b = test.record(connection.signal.map { $0 * 10 })
        XCTAssertEqual(source.history, [], "subscribing to the shared signal does not connect")
        let first = test.performAsCurrent { connection.connect() }
        let second = test.performAsCurrent { connection.connect() }
        XCTAssertTrue(first === second, "connect() returns the same connection while connected")
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@40"])
        XCTAssertEqual(a.timeline, ["next(1)@10", "next(2)@20", "next(3)@30", "completed@40"])
        XCTAssertEqual(b.values, [10, 20, 30])
    }

    func testDisposingTheConnectionDisposesTheSource() {
        let test = TestScheduler()
        let source = TestSource(ticks)
        let connection = source.signal.multicast(Subject())
        let recorder = test.record(connection.signal)
        let connected = test.performAsCurrent { connection.connect() }
        test.at(15) { connected.dispose() }
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@15"])
        XCTAssertEqual(recorder.timeline, ["next(1)@10"], "the subject is not ended by a disconnect")
    }

    func testConnectConnectsOnceEvenAfterTheConnectionWasDisposed() {
        let test = TestScheduler()
        let source = TestSource(ticks)
        let connection = source.signal.publish()
        let recorder = test.record(connection.signal)
        let first = test.performAsCurrent { connection.connect() }
        test.at(15) { first.dispose() }
        test.advance(by: .milliseconds(20))
        let again = test.performAsCurrent { connection.connect() }
        test.run()
        XCTAssertTrue(first === again, "a repeated connect() returns the same disposable (RAC 2.5)")
        XCTAssertTrue(again.isDisposed)
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@15"], "connect() after a disconnect does not subscribe again")
        XCTAssertEqual(recorder.timeline, ["next(1)@10"])
    }

    func testAutoconnectConnectsOnTheFirstSubscriberAndNeverAgainAfterTheLastLeft() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3))))
        let connection = source.signal.publish()
        let shared = connection.autoconnect()
        XCTAssertEqual(source.history, [])
        let a = test.record(shared)
        test.advance(by: .milliseconds(15))
        let b = test.record(shared)
        test.at(25) { a.dispose() }
        test.at(35) { b.dispose() }
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@35"], "one connection, disposed when the last subscriber left")
        XCTAssertEqual(a.timeline, ["next(1)@10", "next(2)@20"])
        XCTAssertEqual(b.timeline, ["next(2)@20", "next(3)@30"])
        // A later subscriber does not connect again (RAC 2.5): it gets only what the subject is still sent.
        let c = test.record(shared)
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@35"])
        XCTAssertEqual(c.timeline, [])
        XCTAssertTrue(test.performAsCurrent { connection.connect() }.isDisposed, "connect() returns the disposed connection")
        // A source that ended before the disconnect has ended the subject: a late subscriber hears the end.
        let ended = Signal.from([1, 2]).publish().autoconnect()
        XCTAssertEqual(test.record(ended).events, [.next(1), .next(2), .completed])
        XCTAssertEqual(test.record(ended).events, [.completed])
    }

    func testRefCountConnectsAgainForTheNextSubscriberAfterTheLastLeft() {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .next(3))))
        let shared = source.signal.publish().refCount()
        XCTAssertEqual(source.history, [])
        let a = test.record(shared)
        test.advance(by: .milliseconds(15))
        let b = test.record(shared)
        test.at(25) { a.dispose() }
        test.at(35) { b.dispose() }
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@35"], "one connection, disposed when the last subscriber left")
        XCTAssertEqual(a.timeline, ["next(1)@10", "next(2)@20"])
        XCTAssertEqual(b.timeline, ["next(2)@20", "next(3)@30"])
        // A later subscriber connects again.
        let c = test.record(shared)
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@35", "subscribed@35"])
        XCTAssertEqual(c.timeline, ["next(1)@45", "next(2)@55", "next(3)@65"])
    }

    func testReplaySubscribesAtOnceAndReplaysToLateSubscribers() {
        let test = TestScheduler()
        let source = TestSource(ticks)
        let replayed = test.performAsCurrent { source.signal.replay(capacity: 2) }
        XCTAssertEqual(source.history, ["subscribed@0"], "replay() connects eagerly")
        test.advance(by: .milliseconds(35))
        let late = test.record(replayed)
        test.run()
        XCTAssertEqual(late.timeline, ["next(2)@35", "next(3)@35", "completed@40"])
        XCTAssertEqual(test.record(replayed).events, [.next(2), .next(3), .completed])
        XCTAssertEqual(source.subscriptionCount, 1)
    }

    func testReplayLastAndUnboundedReplay() {
        let test = TestScheduler()
        let last = test.performAsCurrent { Signal.from([1, 2, 3]).replayLast() }
        XCTAssertEqual(test.record(last).events, [.next(3), .completed])
        let all = test.performAsCurrent { Signal.from(1...3_000).replayUnbounded() }
        XCTAssertEqual(test.record(all).values.count, 3_000)
        let bounded = test.performAsCurrent { Signal.from(1...3_000).replay() }
        XCTAssertEqual(test.record(bounded).values.count, ReplaySubject<Int>.defaultCapacity)
    }

    func testReplayLazilyWaitsForTheFirstSubscriberAndStaysConnected() {
        let test = TestScheduler()
        let source = TestSource(ticks)
        let lazy = source.signal.replayLazily()
        test.advance(by: .milliseconds(5))
        XCTAssertEqual(source.history, [], "nothing subscribed before the first subscriber")
        let first = test.record(lazy)
        test.at(25) { first.dispose() }
        test.advance(by: .milliseconds(30))
        let second = test.record(lazy)
        test.run()
        XCTAssertEqual(source.history, ["subscribed@5", "disposed@45"], "one subscription, kept after the first subscriber left")
        XCTAssertEqual(first.timeline, ["next(1)@15", "next(2)@25"])
        XCTAssertEqual(second.timeline, ["next(1)@35", "next(2)@35", "next(3)@35", "completed@45"])
        XCTAssertEqual(test.record(lazy.collect()).events, [.next([1, 2, 3]), .completed])
        let everything = Signal.from(1...3_000).replayLazilyUnbounded()
        XCTAssertEqual(test.record(everything).values.count, 3_000)
        XCTAssertEqual(test.record(everything).values.count, 3_000, "a second subscriber gets the whole replay")
    }
}
