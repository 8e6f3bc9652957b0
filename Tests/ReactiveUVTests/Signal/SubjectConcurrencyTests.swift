import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Sends from several threads into one Subject while subscribers on several loops come and go.
final class SubjectConcurrencyTests: XCTestCase {
    /// Watches one subscription's callbacks: none may overlap, none may start after disposeAndWait() returned.
    private final class Probe: @unchecked Sendable {
        // All state is atomic.
        let inside = Atomic<Int>(0)
        let disposeReturned = Atomic<Bool>(false)
        let received = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let afterDispose = Atomic<Int>(0)

        func callback() {
            if disposeReturned.load(ordering: .sequentiallyConsistent) {
                afterDispose.add(1, ordering: .relaxed)
            }
            if inside.add(1, ordering: .sequentiallyConsistent).newValue != 1 {
                overlaps.add(1, ordering: .relaxed)
            }
            received.add(1, ordering: .relaxed)
            inside.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    func testSendsFromManyThreadsWhileSubscribersDispose() throws {
        let subject = Subject<(Int, Int)>()
        let loops = [EventLoop(name: "a"), EventLoop(name: "b")]
        let senders = 4, perSender = 20_000
        let sendersDone = Atomic<Int>(0)

        // Long-lived subscribers, one per loop: they must see every value, per sender in order, never concurrently.
        let keepers: [EventRecorder<(Int, Int)>] = loops.compactMap { loop in
            onLoop(loop) { UncheckedBox(EventRecorder(subject)) }?.value
        }
        XCTAssertEqual(keepers.count, 2)

        // The senders start once the first probe is subscribed, so under load they cannot
        // finish before any probe exists (the probes must see values to prove anything).
        let firstProbeSubscribed = Atomic<Bool>(false)
        let sendersGroup = DispatchGroup()
        for sender in 0..<senders {
            sendersGroup.enter()
            Thread {
                let deadline = SchedulerInstant.now + .seconds(30)
                while !firstProbeSubscribed.load(ordering: .acquiring) && SchedulerInstant.now < deadline { sched_yield() }
                for n in 0..<perSender { subject.sendNext((sender, n)) }
                sendersDone.add(1, ordering: .sequentiallyConsistent)
                sendersGroup.leave()
            }.start()
        }

        // Meanwhile subscribers come and go: on the loops, on the shared loop, disposed from other threads.
        var probes: [Probe] = []
        var round = 0
        while sendersDone.load(ordering: .sequentiallyConsistent) < senders || round < 20 {
            let probe = Probe()
            probes.append(probe)
            let subscription: (any Disposable)?
            switch round % 3 {
            case 0, 1:
                // The hop waits behind the values the senders queued for that loop's subscribers: under
                // the thread sanitizer in a loaded suite run that backlog took over 10 s (a CI run).
                subscription = onLoop(loops[round % 2], timeout: .seconds(60)) { subject.subscribeNext { _ in probe.callback() } }
                if subscription == nil {
                    // Reported once, and that probe left out of the checks below (it may still subscribe, undisposed).
                    XCTFail("the probe could not subscribe on loop \(loops[round % 2].name) within 60 s")
                    probes.removeLast()
                }
            default:
                subscription = subject.subscribeNext { _ in probe.callback() }  // home: EventLoop.shared
            }
            // Let some values through (or give up quickly once the senders are done). The
            // first probe waits for its first value however loaded the machine is.
            firstProbeSubscribed.store(true, ordering: .releasing)
            let until = SchedulerInstant.now + .milliseconds(20)
            let firstUntil = SchedulerInstant.now + .seconds(10)
            while probe.received.load(ordering: .relaxed) < 50 && SchedulerInstant.now < until
                || round == 0 && probe.received.load(ordering: .relaxed) == 0 && SchedulerInstant.now < firstUntil {
                sched_yield()
            }
            // `dispose()` never waits for a callback in progress on the probe's loop, and one that
            // began before it may still be running: once `disposeAndWait()` returned, none is, and
            // none may begin.
            if let subscription { awaitOnThisThread("disposeAndWait()") { await subscription.disposeAndWait() } }
            probe.disposeReturned.store(true, ordering: .sequentiallyConsistent)
            round += 1
        }
        sendersGroup.wait()
        subject.sendCompleted()

        for keeper in keepers {
            let terminal = try keeper.waitForTermination(timeout: .seconds(60))
            guard case .completed = terminal else { return XCTFail("expected completion, got \(terminal)") }
            XCTAssertFalse(keeper.sawConcurrentDelivery, "two events reached one subscriber at once")
            var next = Array(repeating: 0, count: senders)
            for (sender, n) in keeper.values {
                XCTAssertEqual(n, next[sender], "sender \(sender)'s values arrived out of order")
                next[sender] = n + 1
            }
            XCTAssertEqual(next, Array(repeating: perSender, count: senders), "a long-lived subscriber missed values")
        }
        // Let every loop run what was queued before the checks below.
        for loop in loops + [EventLoop.shared] { _ = onLoop(loop) { true } }
        XCTAssertGreaterThan(probes.count, 10)
        XCTAssertEqual(probes.map { $0.overlaps.load(ordering: .relaxed) }.reduce(0, +), 0, "concurrent delivery")
        XCTAssertEqual(probes.map { $0.afterDispose.load(ordering: .relaxed) }.reduce(0, +), 0, "a callback ran after disposeAndWait() returned")
        XCTAssertGreaterThan(probes.map { $0.received.load(ordering: .relaxed) }.reduce(0, +), 0)
        XCTAssertEqual(subject.subscriberCount, 0, "every disposed or ended subscription left the subject")

        for loop in loops {
            let report = try loop.tryShutdown()
            XCTAssertEqual(report.closedHandles, [])
            XCTAssertEqual(report.loopCloseResult, 0)
        }
    }

    /// The loop that sends to a subject keeps a cached copy of its subscriber list, refreshed only when
    /// it sends again. Once that loop has shut down it never sends again: the cache must go with it, or
    /// a subscriber that left stays referenced (with its subscription and home loop) while the subject lives.
    func testASubscriberThatLeftIsNotKeptByTheCacheOfALoopThatShutDown() throws {
        let subject = Subject<Int>()
        let owner = EventLoop(name: "subject-owner"), home = EventLoop(name: "subscriber-home")
        let delivered = Locked(0)
        var subscription: UncheckedBox<any Disposable>? = onLoop(home) {
            UncheckedBox(subject.subscribeNext { _ in delivered.withLock { $0 += 1 } })
        }
        let left = WeakSubscription(try XCTUnwrap(subscription).value)
        // The first send claims the owner's path; the second builds its cache, listing the subscriber.
        _ = onLoop(owner) { subject.sendNext(1); subject.sendNext(2); return true }
        XCTAssertTrue(waitUntil("both values delivered") { delivered.current == 2 })
        subscription?.value.dispose()
        subscription = nil
        XCTAssertTrue(waitUntil("the subscriber left") { subject.subscriberCount == 0 })
        let ownerReport = try owner.tryShutdown()
        XCTAssertEqual(ownerReport.loopCloseResult, 0)
        let homeReport = try home.tryShutdown()
        XCTAssertEqual(homeReport.loopCloseResult, 0)
        XCTAssertTrue(waitUntil("the subscription freed") { left.object == nil },
                      "the subject (alive) still holds a subscriber that left, through the cache of a loop that shut down")
        withExtendedLifetime(subject) {}
    }
}

/// A weak reference to a subscription, read from the test thread.
private final class WeakSubscription: @unchecked Sendable {
    // Written in init only; a weak load is safe from any thread.
    weak var object: AnyObject?
    init(_ disposable: any Disposable) { object = disposable as AnyObject }
}

