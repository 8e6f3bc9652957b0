import Dispatch
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// A pausable source that runs on one loop and sends as fast as it is allowed.
private final class EagerProducer: @unchecked Sendable {
    // Everything is touched only on the producing loop's thread (the test reads it there too).
    let subscriber: Subscriber<Int>
    let total: Int
    var next = 0
    var paused = false
    var pauses = 0
    var resumes = 0

    init(subscriber: Subscriber<Int>, total: Int) {
        self.subscriber = subscriber
        self.total = total
    }

    func produce() {
        while !paused && next < total {
            let value = next
            next += 1
            subscriber.sendNext(value)
            if next == total { subscriber.sendCompleted() }
        }
    }

    func pause() {
        paused = true
        pauses += 1
    }

    func resume() {
        paused = false
        resumes += 1
        produce()
    }
}

final class FlowControlTests: XCTestCase {
    /// A source on one loop feeding a subscriber homed on another loop that is
    /// busy: the source is paused once `transitHighWater` values wait in the
    /// home loop's queue, and resumed when the home loop catches up. Without
    /// this a fast socket would fill the other loop's queue without bound.
    func testASourceIsPausedWhileItsValuesWaitForAnotherLoop() {
        let sourceLoop = EventLoop(name: "flow-source")
        let homeLoop = EventLoop(name: "flow-home")
        defer {
            sourceLoop.shutdown()
            homeLoop.shutdown()
        }
        let total = 1_000
        let producer = Locked<EagerProducer?>(nil)
        let signal = Signal<Int> { subscriber in
            sourceLoop.execute {
                let eager = EagerProducer(subscriber: subscriber, total: total)
                producer.withLock { $0 = eager }
                subscriber.setFlowControl(pause: { eager.pause() }, resume: { eager.resume() })
                eager.produce()
            }
            return nil
        }
        let received = Locked<[Int]>([])
        let completed = Locked(false)
        let homeIsBusy = DispatchSemaphore(value: 0)
        let subscription = Locked<(any Disposable)?>(nil)
        homeLoop.execute {
            let disposable = signal.subscribe(
                next: { value in received.withLock { $0.append(value) } },
                error: { XCTFail("unexpected error \($0)") },
                completed: { completed.withLock { $0 = true } })
            subscription.withLock { $0 = disposable }
            homeIsBusy.wait()  // the home loop is stuck: nothing it was sent is delivered
        }

        waitUntil("the source to pause while its home loop is busy") {
            onLoop(sourceLoop) { producer.current?.paused ?? false } ?? false
        }
        let sentWhileBusy = onLoop(sourceLoop) { producer.current?.next ?? -1 }
        XCTAssertEqual(sentWhileBusy, FlowControl.transitHighWater,
                       "the source should stop after \(FlowControl.transitHighWater) undelivered values, not \(sentWhileBusy ?? -1)")
        XCTAssertEqual(received.current, [], "nothing can be delivered while the home loop is blocked")

        homeIsBusy.signal()
        waitUntil("every value to arrive") { completed.current }
        XCTAssertEqual(received.current, Array(0..<total), "values were lost, repeated or reordered across pauses")
        let counts = onLoop(sourceLoop) { (producer.current?.pauses ?? 0, producer.current?.resumes ?? 0) }
        XCTAssertGreaterThanOrEqual(counts?.0 ?? 0, 1)
        XCTAssertGreaterThanOrEqual(counts?.1 ?? 0, 1, "the source was never resumed once its home loop caught up")
        subscription.current?.dispose()
    }

    /// A consumer's resume does not restart a source whose home loop is
    /// behind, and a home loop that catches up does not undo a consumer's pause.
    func testConsumerPauseAndTransitPauseAreIndependent() {
        let sourceLoop = EventLoop(name: "flow-source")
        let homeLoop = EventLoop(name: "flow-home")
        defer {
            sourceLoop.shutdown()
            homeLoop.shutdown()
        }
        let total = 1_000
        let producer = Locked<EagerProducer?>(nil)
        let signal = Signal<Int> { subscriber in
            sourceLoop.execute {
                let eager = EagerProducer(subscriber: subscriber, total: total)
                producer.withLock { $0 = eager }
                subscriber.setFlowControl(pause: { eager.pause() }, resume: { eager.resume() })
                eager.produce()
            }
            return nil
        }
        let received = Locked(0)
        let completed = Locked(false)
        let homeIsBusy = DispatchSemaphore(value: 0)
        let subscription = Locked<(any Disposable)?>(nil)
        homeLoop.execute {
            let disposable = signal.subscribe(next: { _ in received.withLock { $0 += 1 } },
                                              completed: { completed.withLock { $0 = true } })
            subscription.withLock { $0 = disposable }
            homeIsBusy.wait()
        }
        waitUntil("the source to pause for its busy home loop") {
            onLoop(sourceLoop) { producer.current?.paused ?? false } ?? false
        }
        let control = onLoop(sourceLoop) { UncheckedBox(producer.current?.subscriber.registeredFlowControl) }?.value
        guard let control else { return XCTFail("the source registered no flow control") }
        func sourceState() -> (paused: Bool, sent: Int) {
            onLoop(sourceLoop) { (producer.current?.paused ?? false, producer.current?.next ?? -1) } ?? (false, -1)
        }

        // A consumer's pause and resume while the home loop is behind: the source stays paused.
        control.pause()
        control.resume()
        XCTAssertEqual(sourceState().paused, true, "a consumer's resume restarted a source whose home loop is behind")
        XCTAssertEqual(sourceState().sent, FlowControl.transitHighWater)

        // The consumer pauses, then the home loop drains: the consumer's pause holds.
        control.pause()
        homeIsBusy.signal()
        waitUntil("the values sent before the pause to arrive") { received.current == FlowControl.transitHighWater }
        XCTAssertEqual(sourceState().paused, true, "a drained home loop undid the consumer's pause")
        XCTAssertEqual(sourceState().sent, FlowControl.transitHighWater)

        control.resume()
        waitUntil("the rest to arrive after the consumer resumed") { completed.current }
        XCTAssertEqual(received.current, total)
        subscription.current?.dispose()
    }
}

final class FlowControlOrderingTests: XCTestCase {
    /// A consumer's pause sent from the home thread and its resume sent from the
    /// consuming task's thread can reach the source in either order; the newest
    /// request wins, so a late pause cannot leave the source stopped while the
    /// consumer waits for values (or a late resume leave it running while the
    /// consumer's buffer is full).
    func testTheNewestConsumerRequestWinsWhateverTheArrivalOrder() {
        let loop = EventLoop(name: "flow-order")
        defer { loop.shutdown() }
        let log = Locked<[String]>([])
        let control = onLoop(loop) {
            UncheckedBox(FlowControl(sourceScheduler: loop.scheduler,
                                     pause: { log.withLock { $0.append("pause") } },
                                     resume: { log.withLock { $0.append("resume") } }))
        }!.value
        control.setConsumerPaused(true, request: 1)
        control.setConsumerPaused(false, request: 3)
        control.setConsumerPaused(true, request: 2)  // sent before the resume, arrives after it
        _ = onLoop(loop) { 0 }
        XCTAssertEqual(log.current, ["pause", "resume"], "a stale pause stopped the source after the newer resume")

        control.setConsumerPaused(true, request: 5)
        control.setConsumerPaused(false, request: 4)  // a stale resume
        _ = onLoop(loop) { 0 }
        XCTAssertEqual(log.current, ["pause", "resume", "pause"], "a stale resume restarted the source")
    }
}
