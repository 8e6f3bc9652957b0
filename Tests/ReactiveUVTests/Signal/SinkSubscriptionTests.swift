@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// A subscription with callbacks holds them itself (`SinkSubscription`): teardown releases them, but
/// never under a callback that is running; under an operator they move to the `Sink` the operator's
/// closures call and go with those closures; a subject registers the subscription with no gate.
final class SinkSubscriptionTests: XCTestCase {
    /// A value's callback that disposes its own subscription runs to its end with all it captured:
    /// the callback is called in place, unretained, so teardown must not clear it meanwhile. The
    /// callbacks are released when that delivery ends, while the caller still holds the
    /// subscription (the callback capturing its own subscription makes no lasting cycle).
    func testACallbackThatDisposesItsSubscriptionKeepsWhatItCapturedUntilItReturns() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let token = SinkTestWeak<LifetimeToken>()
        let own = Locked<(any Disposable)?>(nil)
        let afterDispose = Locked<[String]>([])
        let subscription: any Disposable = test.performAsCurrent {
            let captured = LifetimeToken()
            token.object = captured
            return subject.subscribeNext { _ in
                own.current?.dispose()
                let callback = (own.current as? SinkSubscription<Int>)?.next
                afterDispose.append("captures alive: \(token.object != nil), callback held: \(callback != nil)")
                captured.touch()
            }
        }
        own.withLock { $0 = subscription }
        test.performAsCurrent { subject.sendNext(1) }
        XCTAssertEqual(afterDispose.current, ["captures alive: true, callback held: true"],
                       "teardown cleared the running callback")
        XCTAssertTrue(subscription.isDisposed)
        XCTAssertEqual(subject.subscriberCount, 0)
        XCTAssertNil(token.object, "the callbacks outlived the delivery that tore their subscription down")
        own.withLock { $0 = nil }
    }

    /// The same when the teardown comes from a value nested in the delivery (the callback makes the
    /// subject send again): the outer callback still finds what it captured when the inner returns.
    func testATeardownInANestedDeliveryWaitsForTheOutermostOne() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let token = SinkTestWeak<LifetimeToken>()
        let own = Locked<(any Disposable)?>(nil)
        let seen = Locked<[String]>([])
        let subscription: any Disposable = test.performAsCurrent {
            let captured = LifetimeToken()
            token.object = captured
            return subject.subscribeNext { value in
                if value == 1 {
                    subject.sendNext(2)
                    let callback = (own.current as? SinkSubscription<Int>)?.next
                    seen.append("outer, alive: \(token.object != nil), held: \(callback != nil)")
                    captured.touch()
                } else {
                    own.current?.dispose()
                    seen.append("inner \(value)")
                }
            }
        }
        own.withLock { $0 = subscription }
        test.performAsCurrent { subject.sendNext(1) }
        XCTAssertEqual(seen.current, ["inner 2", "outer, alive: true, held: true"])
        XCTAssertNil(token.object, "the callbacks outlived the outermost delivery")
        own.withLock { $0 = nil }
    }

    /// Under an operator the callbacks move to the chain's `Sink`: disposing releases them with the
    /// operator's closures, while the caller still holds the subscription.
    func testUnderAnOperatorTheCallbacksGoWithTheOperatorsClosures() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let token = SinkTestWeak<LifetimeToken>()
        let values = Locked<[Int]>([])
        let subscription: any Disposable = test.performAsCurrent {
            let captured = LifetimeToken()
            token.object = captured
            return subject.map { $0 * 2 }.subscribeNext { value in
                captured.touch()
                values.append(value)
            }
        }
        test.performAsCurrent { subject.sendNext(1) }
        XCTAssertEqual(values.current, [2])
        XCTAssertNotNil(token.object)
        test.performAsCurrent { subscription.dispose() }
        XCTAssertNil(token.object, "an operator's subscription kept its callbacks after teardown")
        XCTAssertEqual(subject.subscriberCount, 0)
    }

    /// A subject's send from another thread to a subscription registered with no gate hops to its
    /// home; once that home loop has closed, the hop is refused and the subscription ends (it leaves
    /// the subject and hears nothing more), as through a gate.
    func testASendToASubscriptionWhoseHomeLoopClosedEndsIt() throws {
        let subject = Subject<Int>()
        let home = EventLoop(name: "sink-home")
        let delivered = Locked<[Int]>([])
        let subscription = try XCTUnwrap(onLoop(home) {
            UncheckedBox(subject.subscribeNext { delivered.append($0) })
        })
        XCTAssertTrue(subscription.value is SinkSubscription<Int>)
        subject.sendNext(1)
        XCTAssertTrue(waitUntil("the hopped value delivered") { delivered.current == [1] })
        let report = try home.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertFalse(subscription.value.isDisposed)
        subject.sendNext(2)
        XCTAssertTrue(subscription.value.isDisposed, "a hop its closed home refused did not end the subscription")
        XCTAssertEqual(subject.subscriberCount, 0)
        XCTAssertEqual(delivered.current, [1])
    }
}

/// A weak reference read from the test's thread.
private final class SinkTestWeak<Object: AnyObject>: @unchecked Sendable {
    // Set and read on the test's thread only (a `TestScheduler` runs everything there).
    weak var object: Object?
}
