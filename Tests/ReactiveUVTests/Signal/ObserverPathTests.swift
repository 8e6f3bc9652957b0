@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// The one path through the core (docs/INTERNALS.md, "One value through the core"): every
/// subscription's gate is a `Subscriber` holding one `Observer`, and which kind it holds decides
/// what a value costs. These pin the kinds, so a change that sends values back through closures
/// or events (slower, and silently so) fails here, and check the events still arrive.
final class ObserverPathTests: XCTestCase {
    /// The kind of observer behind the gate of the subscription `disposable` is.
    private func gatedKind<Value>(_ disposable: any Disposable, of _: Value.Type) -> ObserverKind? {
        guard let subscription = disposable as? Subscription,
              let gate = subscription.root as? Subscriber<Value> else { return nil }
        return gate.observerKind
    }

    /// A subscription with callbacks is a subject's registrant itself: no `Subscriber` gate, no closure;
    /// the subject is its root (its teardown leaves the list).
    func testASubjectRegistersASubscriptionWithCallbacksItselfWithNoGate() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let values = Locked<[Int]>([])
        let completed = Locked(false)
        let subscription = test.performAsCurrent {
            subject.subscribe(next: { values.append($0) }, completed: { completed.withLock { $0 = true } })
        }
        XCTAssertTrue((subscription as? Subscription)?.root === subject, "a gate or closure between the subject and the sink")
        XCTAssertTrue(subscription is SinkSubscription<Int>)
        test.performAsCurrent {
            subject.sendNext(1)
            subject.sendNext(2)
            subject.sendCompleted()
        }
        XCTAssertEqual(values.current, [1, 2])
        XCTAssertTrue(completed.current)
        XCTAssertTrue(subscription.isDisposed, "the end disposes the subscription")
        XCTAssertEqual(subject.subscriberCount, 0)
    }

    func testASignalsGateHoldsTheSinkItself() {
        let test = TestScheduler()
        let source = Locked<Subscriber<Int>?>(nil)
        let signal = Signal<Int> { subscriber in
            source.withLock { $0 = subscriber }
            return nil
        }
        let values = Locked<[Int]>([])
        let subscription = test.performAsCurrent { signal.subscribeNext { values.append($0) } }
        XCTAssertEqual(gatedKind(subscription, of: Int.self), .sink,
                       "a signal made with Signal { } sends through its gate straight to the sink")
        test.performAsCurrent {
            source.current?.sendNext(1)
            source.current?.sendNext(2)
        }
        XCTAssertEqual(values.current, [1, 2])
        test.performAsCurrent { subscription.dispose() }
        test.performAsCurrent { source.current?.sendNext(3) }
        XCTAssertEqual(values.current, [1, 2], "nothing passes the gate after disposal")
    }

    func testAFusedChainsGateHoldsTheFirstOperatorsValueShortcut() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let totals = Locked<[Int]>([])
        let subscription = test.performAsCurrent {
            subject.map { $0 * 3 }.filter { $0 % 2 == 0 }.scan(0, +).subscribeNext { totals.append($0) }
        }
        XCTAssertEqual(gatedKind(subscription, of: Int.self), .values,
                       "values enter a fused chain as values, not as events")
        test.performAsCurrent {
            for value in 1...4 { subject.sendNext(value) }
        }
        XCTAssertEqual(totals.current, [6, 18])
    }

    func testAnOperatorWithoutAValueShortcutTakesEvents() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let events = Locked<[Event<Int>]>([])
        let subscription = test.performAsCurrent {
            subject.map { $0 + 1 }.take(2).subscribe(next: { events.append(.next($0)) }, completed: { events.append(.completed) })
        }
        XCTAssertEqual(gatedKind(subscription, of: Int.self), .events,
                       "a lifted operator below a fused one cuts the value shortcut: the gate builds events")
        test.performAsCurrent {
            for value in 1...3 { subject.sendNext(value) }
        }
        XCTAssertEqual(events.current, [.next(2), .next(3), .completed])
    }
}
