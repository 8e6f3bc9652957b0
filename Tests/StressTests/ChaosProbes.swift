import Foundation
import ReactiveUV
import Synchronization

// What the cross-loop chaos test checks its invariants with: a probe per
// subscription, a loop-bound actor, live counters, and weak references to
// what a round made.

/// Weak references to what a round made, to check it was all freed once the round is over.
struct LeftBehind {
    private let objects: [(String, WeakObject)]

    init(_ round: ChaosRound) {
        var objects: [(String, WeakObject)] = [("the round", WeakObject(round))]
        objects += round.loops.map { ("loop '\($0.name)'", WeakObject($0)) }
        objects += round.subjects.enumerated().map { ("subject \($0.offset)", WeakObject($0.element)) }
        objects += round.actors.map { ("the actor on '\($0.loop.name)'", WeakObject($0)) }
        self.objects = objects
    }

    /// What is still alive after a grace period (a loop thread lets go of its loop as it ends).
    func stillAlive() -> [String] {
        let deadline = SchedulerInstant.now + .seconds(10)
        while objects.contains(where: { $0.1.object != nil }) && SchedulerInstant.now < deadline { usleep(1_000) }
        return objects.compactMap { name, reference in
            guard let object = reference.object else { return nil }
            var detail = ""
            if let subject = object as? Subject<Int> { detail = " (\(subject.subscriberCount) subscribers still registered)" }
            if let loop = object as? EventLoop { detail = " (\(loop.isShutDown ? "closed" : "NOT CLOSED"))" }
            return "\(name) was not freed after the round\(detail)"
        }
    }
}

final class WeakObject: @unchecked Sendable {
    // Written once in init; a weak reference is safe to read from any thread.
    weak var object: AnyObject?
    init(_ object: AnyObject) { self.object = object }
}

/// Counts itself alive in `counter` (for objects the round cannot name one by one).
final class LiveToken: @unchecked Sendable {
    // Only the counter, which is itself thread-safe.
    private let counter: LiveCounter
    init(_ counter: LiveCounter) {
        self.counter = counter
        counter.value.add(1, ordering: .relaxed)
    }
    deinit { counter.value.subtract(1, ordering: .releasing) }
}

/// A count of live objects.
final class LiveCounter: Sendable {
    let value = Atomic<Int>(0)
    var current: Int { value.load(ordering: .acquiring) }
}

/// One subscription's view of its own life, checked from its callbacks and its teardown.
final class Probe: @unchecked Sendable {
    // `disposable` and `disposeRequested` are protected by `lock`; the rest is atomic or immutable.
    let id: Int
    let label: String
    /// Where callbacks must run: the `deliver(on:)` target, else the `subscribe(on:)` target, else the home.
    let callbackLoop: EventLoop
    let selfDisposeAfter: Int
    let ledger: ChaosLedger
    private let disposeReturned = Atomic<Bool>(false)
    private let callbacks = Atomic<Int>(0)
    private let tornDown = Atomic<Int>(0)
    private let lock = NSLock()
    private var disposable: (any Disposable)?
    private var disposeRequested = false

    init(id: Int, label: String, callbackLoop: EventLoop, selfDisposeAfter: Int, ledger: ChaosLedger) {
        self.id = id
        self.label = label
        self.callbackLoop = callbackLoop
        self.selfDisposeAfter = selfDisposeAfter
        self.ledger = ledger
        ledger.liveProbes.add(1, ordering: .relaxed)
        ledger.track(self)
    }

    deinit { ledger.liveProbes.subtract(1, ordering: .releasing) }

    /// `subscribe` returned its disposable; one asked for before then is carried out now.
    func subscribed(_ subscription: any Disposable) {
        let disposeNow = lock.withLock { () -> Bool in
            if disposeRequested { return true }
            disposable = subscription
            return false
        }
        if disposeNow { subscription.dispose() }
    }

    /// Takes the disposable (once); nil when `subscribe` has not returned yet (it will dispose then).
    private func take() -> (any Disposable)? {
        lock.withLock {
            disposeRequested = true
            defer { disposable = nil }
            return disposable
        }
    }

    /// Disposes on a thread that is no loop's and waits there for a callback still running
    /// (`disposeAndWait()`: `dispose()` never waits); from then on no callback may begin.
    ///
    /// - Returns: False when `subscribe` had not returned yet (it disposes when it does).
    func disposeFromForeignThread(_ ledger: ChaosLedger) -> Bool {
        guard let subscription = take() else { return false }
        awaitOnThisThread("\(label): disposeAndWait()") { await subscription.disposeAndWait() }
        disposeReturned.store(true, ordering: .sequentiallyConsistent)
        ledger.foreignDisposes.add(1, ordering: .relaxed)
        return true
    }

    /// Disposes on a loop thread (which promises less: a callback on another thread may be finishing).
    func disposeOnLoop() { take()?.dispose() }

    /// The first thing every callback does.
    func callbackBegins(_ kind: String) {
        if disposeReturned.load(ordering: .sequentiallyConsistent) {
            ledger.violation("\(label): a '\(kind)' callback began on \(currentThreadDescription()) after disposeAndWait() had returned for a thread that is no loop's")
        }
        if EventLoop.current !== callbackLoop && !callbackLoop.isShutDown {
            ledger.violation("\(label): a '\(kind)' callback ran on \(currentThreadDescription()) instead of loop '\(callbackLoop.name)'")
        }
        ledger.callbacks.add(1, ordering: .relaxed)
        let count = callbacks.add(1, ordering: .relaxed).newValue
        if count == selfDisposeAfter, let subscription = take() {
            subscription.dispose()
            ledger.selfDisposes.add(1, ordering: .relaxed)
        }
    }

    /// The subscription's teardown: on its home loop's thread, or after that loop closed; once.
    func tornDown(home: EventLoop?) {
        let count = tornDown.add(1, ordering: .relaxed).newValue
        ledger.tornDown.add(1, ordering: .releasing)
        if count > 1 { ledger.violation("\(label): torn down \(count) times") }
        guard let home else {
            ledger.violation("\(label): attached on \(currentThreadDescription()), not on a loop")
            return
        }
        if EventLoop.current !== home && !home.isShutDown {
            ledger.violation("\(label): teardown ran on \(currentThreadDescription()) while its home loop '\(home.name)' had not closed")
        }
    }
}

/// `source` with the probe's teardown check added to the subscription (as its didSubscribe's disposable).
func probed(_ source: Signal<Int>, _ probe: Probe) -> Signal<Int> {
    Signal<Int> { subscriber in
        let home = EventLoop.current
        probe.ledger.attached.add(1, ordering: .relaxed)
        _ = source.subscribe(subscriber)
        return ActionDisposable { probe.tornDown(home: home) }
    }
}

/// An actor whose executor is a loop: each call checks it runs there (or after the loop closed), alone.
actor LoopActor {
    let loop: EventLoop
    let ledger: ChaosLedger
    private let inside = Atomic<Int>(0)
    private var calls = 0

    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    init(loop: EventLoop, ledger: ChaosLedger) {
        self.loop = loop
        self.ledger = ledger
    }

    func bump() -> Int {
        if inside.add(1, ordering: .acquiringAndReleasing).newValue != 1 {
            ledger.violation("actor on '\(loop.name)': two jobs ran at once (one on \(currentThreadDescription()))")
        }
        if EventLoop.current !== loop && !loop.isShutDown {
            ledger.violation("actor on '\(loop.name)': a job ran on \(currentThreadDescription()) while the loop had not closed")
        }
        calls += 1
        let result = calls
        inside.subtract(1, ordering: .acquiringAndReleasing)
        return result
    }
}
