@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The dispose handshake (`Subscription.enterDelivery`, docs/INTERNALS.md): the outermost delivery
/// publishes its thread in `delivering`; a delivery on a thread that already published joins it.
/// An operator that sends many values out of one upstream event (the framing driver, per chunk)
/// publishes once around them, so the sink does not pay a sequentially consistent store per value.
final class DeliveryHandshakeTests: XCTestCase {
    private var me: UInt { UInt(pthread_self()) }

    /// A sink called inside a burst its thread opened on the same subscription joins it: it
    /// delivers, and leaves the publication to the burst (it used to unpublish at its end, so the
    /// next value paid the full handshake again and `disposeAndWait()` no longer waited for the burst).
    func testASinkInsideABurstOfItsThreadJoinsItAndLeavesItPublished() {
        let seen = Locked<[UInt]>([])
        let published = Locked<SinkSubscription<Int>?>(nil)
        let subscription = TestScheduler().performAsCurrent {
            SinkSubscription<Int>(next: { _ in seen.append(published.current?.delivering.load(ordering: .relaxed) ?? 0) },
                                  error: nil, completed: nil)
        }
        published.withLock { $0 = subscription }
        let sink = Sink(handingOver: subscription)
        // The burst, as an operator opens it around the values of one event.
        subscription.delivering.store(me, ordering: .sequentiallyConsistent)
        sink.handleNext(1)
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), me, "the sink unpublished the burst it joined")
        sink.handleNext(2)
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), me)
        subscription.delivering.store(0, ordering: .sequentiallyConsistent)
        // Alone, the sink publishes its thread for the callback and unpublishes it after.
        sink.handleNext(3)
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), 0)
        XCTAssertEqual(seen.current, [me, me, me])
    }

    /// Inside a burst the disposed flag is still checked before every value: once the
    /// subscription is disposed (here by a callback of the burst), nothing more is delivered.
    func testASinkInsideABurstDeliversNothingOnceTheSubscriptionIsDisposed() {
        let seen = Locked<[Int]>([])
        let disposing = Locked<SinkSubscription<Int>?>(nil)
        let subscription = TestScheduler().performAsCurrent {
            SinkSubscription<Int>(next: { value in
                seen.append(value)
                if value == 2 { _ = disposing.current?.markDisposed() }
            }, error: nil, completed: nil)
        }
        disposing.withLock { $0 = subscription }
        let sink = Sink(handingOver: subscription)
        let entry = subscription.enterDelivery()
        XCTAssertEqual(entry, .outermost)
        for value in 1...4 { sink.handleNext(value) }
        sink.handleNextInBurst(5)  // what a bursting operator calls inside the delivery it entered
        subscription.leaveDelivery(entry)
        XCTAssertEqual(seen.current, [1, 2])
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), 0)
        XCTAssertEqual(subscription.enterDelivery(), .refused, "a disposed subscription lets no delivery start")
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), 0, "a refused delivery leaves nothing published")
    }

    /// The framing driver sends every piece of a chunk (and the piece completed across two chunks)
    /// inside one published delivery of its subscription, and unpublishes when the chunk is cut.
    func testTheFramingDriverSendsTheLinesOfAChunkInsideOnePublishedDelivery() {
        let subscription = Subscription(home: TestScheduler())
        let lines = Locked<[String]>([])
        let published = Locked<[Bool]>([])
        let me = self.me
        let driver = FramingDriver<DelimiterSplitter, [UInt8]>(
            DelimiterSplitter(separator: [UInt8(ascii: "\n")], maxLength: 100, dropsCarriageReturn: true),
            downstream: { _ in },
            downstreamNext: { line in
                lines.append(String(decoding: line, as: UTF8.self))
                published.append(subscription.delivering.load(ordering: .relaxed) == me)
            },
            subscription: subscription)
        driver.receiveNext(Array("a\nb\r\nc\nd".utf8))
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), 0, "unpublished once the chunk is cut")
        driver.receiveNext(Array("e\nf\n".utf8))
        XCTAssertEqual(subscription.delivering.load(ordering: .sequentiallyConsistent), 0)
        XCTAssertEqual(lines.current, ["a", "b", "c", "de", "f"])
        XCTAssertEqual(published.current, [true, true, true, true, true], "a piece was sent outside the chunk's delivery")
    }

    /// `fuseBursting` hands the operator the subscription's own sink only when that sink is its
    /// downstream (so values sent inside the operator's delivery reach it without a closure and a
    /// handshake each); with another operator between them, or none at the end, it hands nil.
    func testABurstingOperatorIsGivenTheSinkOnlyWhenItIsItsOwnDownstream() {
        let test = TestScheduler()
        let subject = Subject<Int>()
        let given = Locked<[String]>([])
        let received = Locked<[Int]>([])
        let bursting = subject.fuseBursting { (downstream: @escaping (Event<Int>) -> Void, downstreamNext, sink, subscription) in
            given.append(sink == nil ? "nil" : sink?.subscription === subscription ? "own sink" : "another sink")
            return ClosureObserver(event: { event in
                guard case .next(let value) = event else { return downstream(event) }
                let entry = subscription.enterDelivery()
                if entry == .refused { return }
                // A burst of two values out of one.
                for burst in [value, value * 10] {
                    if let sink { sink.handleNextInBurst(burst) } else { downstream(.next(burst)) }
                }
                subscription.leaveDelivery(entry)
            })
        }
        let direct = test.performAsCurrent { bursting.subscribeNext { received.append($0) } }
        let mapped = test.performAsCurrent { bursting.map { $0 + 1 }.subscribeNext { received.append($0) } }
        test.performAsCurrent { subject.sendNext(2) }
        XCTAssertEqual(given.current, ["own sink", "nil"])
        XCTAssertEqual(received.current, [2, 20, 3, 21])
        direct.dispose()
        mapped.dispose()
    }
}
