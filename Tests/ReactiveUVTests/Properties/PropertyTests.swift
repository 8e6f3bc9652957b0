import ReactiveUV
import ReactiveUVTesting
import XCTest

final class PropertyTests: XCTestCase {
    /// As RACObserve: subscribing sends the current value first, then each change.
    func testSubscribingSendsTheCurrentValueThenEachChange() {
        let test = TestScheduler()
        let property = MutableProperty(1)
        property.value = 2
        let recorder = test.record(property.signal)
        XCTAssertEqual(recorder.values, [2])
        test.performAsCurrent {
            property.value = 3
            property.value = 4
        }
        XCTAssertEqual(recorder.values, [2, 3, 4])
        XCTAssertEqual(property.value, 4)
        XCTAssertEqual(property.readOnly.value, 4)
    }

    /// combineLatest of observed values fires on subscription, as RACObserve's does.
    func testCombineLatestOfPropertiesFiresAtOnce() {
        let test = TestScheduler()
        let a = MutableProperty(1), b = MutableProperty("x")
        let combined = a.readOnly.combineLatest(with: b.readOnly)
        XCTAssertEqual(combined.value.0, 1)
        XCTAssertEqual(combined.value.1, "x")
        let recorder = test.record(combined.signal.map { "\($0.0)\($0.1)" })
        XCTAssertEqual(recorder.timeline, ["next(1x)@0"])
        test.performAsCurrent { a.value = 2 }
        test.performAsCurrent { b.value = "y" }
        XCTAssertEqual(recorder.values, ["1x", "2x", "2y"])
    }

    func testMapAndConstantAndInitialThen() {
        let test = TestScheduler()
        let source = MutableProperty(2)
        let doubled = source.readOnly.map { $0 * 2 }
        let recorder = test.record(doubled.signal)
        test.performAsCurrent { source.value = 5 }
        XCTAssertEqual(recorder.values, [4, 10])
        XCTAssertEqual(doubled.value, 10)
        XCTAssertEqual(test.record(Property(constant: 7).signal).events, [.next(7), .completed])

        let subject = Subject<Int>()
        let followed = test.performAsCurrent { Property(initial: 0, then: subject) }
        XCTAssertEqual(followed.value, 0)
        test.performAsCurrent { subject.sendNext(9) }
        XCTAssertEqual(followed.value, 9)
        XCTAssertEqual(test.record(followed.signal).values, [9])
    }

    func testBindingSetsTheTargetUntilTheTargetIsFreed() {
        let test = TestScheduler()
        let source = Subject<Int>()
        var target: MutableProperty<Int>? = MutableProperty(0)
        weak let weakTarget = target
        let targetSignal = test.record(target!.signal)
        test.performAsCurrent {
            target! <~ source
            source.sendNext(1)
            source.sendNext(2)
        }
        XCTAssertEqual(target?.value, 2)
        XCTAssertEqual(source.subscriberCount, 1)
        target = nil
        XCTAssertNil(weakTarget, "the binding must not keep its target alive")
        test.run()
        XCTAssertEqual(source.subscriberCount, 0, "the binding ends with the target")
        XCTAssertEqual(targetSignal.events, [.next(0), .next(1), .next(2), .completed], "a freed property's signal completes")
    }

    func testBindingAPropertyToAnother() {
        let test = TestScheduler()
        let source = MutableProperty("a"), target = MutableProperty("")
        let binding = test.performAsCurrent { target <~ source.readOnly }
        XCTAssertEqual(target.value, "a", "the binding takes the current value at once")
        test.performAsCurrent { source.value = "b" }
        XCTAssertEqual(target.value, "b")
        test.performAsCurrent { binding.dispose() }
        test.performAsCurrent { source.value = "c" }
        XCTAssertEqual(target.value, "b")
    }
}
