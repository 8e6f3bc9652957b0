import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The subscription of `subscribe(next:error:completed:)`, which is also its own sink: it holds the
/// user's callbacks and runs them behind its dispose handshake, with no object in between.
///
/// - Called directly (the gate's observer is `.sink`, or a source's home lane: `HomeGate`), the
///   callbacks run on the home thread only, and teardown (on that thread) releases them; a teardown
///   inside a delivery leaves them to the outermost delivery's end.
/// - Under an operator, `makeClosures` moves them to a `Sink` the operator's closures hold: those may
///   run on another thread (`deliver(on:)`), and the callbacks go with the closures, at teardown.
/// On a terminal event the subscription is disposed first, as in RAC.
/// Thread rule: as `Subscription`; the callbacks are touched on the home thread only (or once it closed).
@usableFromInline
package final class SinkSubscription<Value>: Subscription, @unchecked Sendable {
    // Sendable as `Subscription`; the callbacks and `releasePending` are home thread only (above),
    // `makeEnd` is immutable. `next` is called in place and never written while a delivery runs, so a
    // value is delivered without retaining it.
    @usableFromInline @exclusivity(unchecked) var next: ((Value) -> Void)?
    @usableFromInline @exclusivity(unchecked) var error: ((any Error) -> Void)?
    @usableFromInline @exclusivity(unchecked) var completed: (() -> Void)?
    /// Teardown came inside a delivery on the home thread: the callbacks go when it leaves.
    @usableFromInline @exclusivity(unchecked) var releasePending = false
    /// A `Sink` calls the callbacks (under an operator) and lets go of them when it goes, not teardown.
    @usableFromInline @exclusivity(unchecked) var handedOver = false
    /// Moves the callbacks to a `Sink` and makes the closures an operator calls it through (once per
    /// subscription); built here so it is specialized where `subscribe` is.
    @usableFromInline let makeEnd: (_ subscription: SinkSubscription<Value>, _ values: Bool) -> (closures: ClosureObserver<Value>, sink: Sink<Value>)

    /// A subscription whose home is the calling thread's scheduler, else `EventLoop.shared`.
    @inlinable
    package init(next: consuming ((Value) -> Void)?, error: consuming ((any Error) -> Void)?, completed: consuming (() -> Void)?) {
        self.next = next
        self.error = error
        self.completed = completed
        makeEnd = { subscription, values in
            let sink = Sink(handingOver: subscription)
            return (ClosureObserver(event: { sink.handle($0) }, next: values ? { sink.handleNext($0) } : nil), sink)
        }
        super.init(homeForCallingThread: ())
    }

    /// The closures an operator calls this sink through (see `makeEnd`).
    @inlinable
    func makeClosures(_ subscription: SinkSubscription<Value>, _ values: Bool) -> ClosureObserver<Value> {
        makeEnd(subscription, values).closures
    }

    /// Any event, through the dispose handshake.
    @inlinable
    func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value): handleNext(value)
        case .error(let failure): handleEnd(failure: failure)
        case .completed: handleEnd(failure: nil)
        }
    }

    /// `handle(.completed)`, without building an `Event`.
    @inlinable
    package func handleCompleted() {
        handleEnd(failure: nil)
    }

    /// `handle(.error(failure))`, without building the event.
    @inlinable
    package func handleError(_ failure: any Error) {
        handleEnd(failure: failure)
    }

    /// The terminal event: the subscription is disposed first, then `error` or `completed` runs.
    @inlinable
    func handleEnd(failure: (any Error)?) {
        let entry = enterDelivery()
        if entry == .refused { return }
        end(failure: failure)
        leave(entry)
    }

    /// The terminal event inside a delivery: disposes, then runs `error` (with `failure`) or `completed`.
    @inlinable
    func end(failure: (any Error)?) {
        // Moved out (no retain); the one that does not run is released now.
        var onError = error.take()
        var onCompleted = completed.take()
        if failure == nil { onError = nil } else { onCompleted = nil }
        dispose()
        if let failure { onError?(failure) } else { onCompleted?() }
    }

    /// `handle(.next(value))`, without building the event.
    @inlinable
    package func handleNext(_ value: Value) {
        let entry = enterDelivery()
        if entry == .refused { return }
        Self.call(&next, value)
        leave(entry)
    }

    /// `handleNext(value)` inside a delivery the caller entered on this subscription and thread
    /// (a burst): only the disposed flag is checked.
    @inlinable
    @inline(__always)
    package func handleNextInBurst(_ value: Value) {
        if disposedFlag.load(ordering: .relaxed) { return }
        Self.call(&next, value)
    }

    /// A subject's value, this subscription being its own gate there (`Subject.attach`): delivered now
    /// on the home thread (`current` is the calling thread's scheduler), else hopped there in order, as
    /// a `Subscriber` does.
    @inlinable
    func receiveNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        if current == Unmanaged.passUnretained(home).toOpaque() {
            handleNext(value)
        } else {
            hop(.next(value))
        }
    }

    /// `receiveNext` for any event.
    @inlinable
    func receive(_ event: Event<Value>, current: UnsafeMutableRawPointer?) {
        if current == Unmanaged.passUnretained(home).toOpaque() {
            handle(event)
        } else {
            hop(event)
        }
    }

    /// Queues `event` on the home; a home that has shut down stops the subscription (as `Subscriber.hop`).
    @usableFromInline
    func hop(_ event: Event<Value>) {
        if isDisposed { return }
        // Two boxes, not a tuple in one: see UncheckedSendable.
        let target = UncheckedSendable(self), payload = UncheckedSendable(event)
        if !home.scheduleDroppingIfShutDown({ target.value.handle(payload.value) }) { dispose() }
    }

    /// Calls the callback where it is stored: an access in place is not copied, so not retained.
    @inlinable
    @inline(__always)
    static func call(_ next: inout ((Value) -> Void)?, _ value: Value) {
        next?(value)
    }

    /// `leaveDelivery`, then the release a teardown inside the delivery left for its end.
    @inlinable
    @inline(__always)
    package func leave(_ entry: DeliveryEntry) {
        guard entry == .outermost else { return }
        delivering.store(0, ordering: .releasing)
        if releasePending { releaseCallbacksNow() }
    }

    /// Teardown: the callbacks go now, or when the delivery running on this thread leaves. One running
    /// on another thread (the home closed meanwhile) keeps them until this subscription goes.
    override func releaseCallbacks() {
        if handedOver { return }
        let running = delivering.load(ordering: .sequentiallyConsistent)
        if running == 0 {
            releaseCallbacksNow()
        } else if running == UInt(pthread_self()) {
            releasePending = true
        }
    }

    @usableFromInline
    func releaseCallbacksNow() {
        releasePending = false
        next = nil
        error = nil
        completed = nil
    }
}

/// The end of an operator chain: calls the callbacks its `SinkSubscription` handed over, behind the
/// subscription's dispose handshake. The operator's closures hold it, and the callbacks go with it.
///
/// The handshake sits here, at the end, which may run on another thread than the source's gate
/// (`deliver(on:)`). On a terminal event the subscription is disposed first, as in RAC.
/// Thread rule: the thread the chain's end runs on, one event at a time; `deinit` wherever the last
/// closure holding it goes (the callbacks are then no one else's).
@usableFromInline
package final class Sink<Value> {
    // Immutable; the callbacks it calls are the subscription's, touched only by this sink once handed over.
    @usableFromInline package let subscription: SinkSubscription<Value>

    /// Takes over `subscription`'s callbacks: from here its teardown leaves them to this sink.
    @inlinable
    init(handingOver subscription: SinkSubscription<Value>) {
        subscription.handedOver = true
        self.subscription = subscription
    }

    deinit {
        subscription.releaseCallbacksNow()
    }

    /// Any event, through the subscription's dispose handshake.
    @inlinable
    func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value): handleNext(value)
        case .error(let failure): handleEnd(failure: failure)
        case .completed: handleEnd(failure: nil)
        }
    }

    /// The terminal event: as the subscription's own (the callbacks it runs are the same once handed over).
    @inlinable
    func handleEnd(failure: (any Error)?) {
        subscription.handleEnd(failure: failure)
    }

    /// `handle(.next(value))`, without building the event. Not the subscription's own: once handed over,
    /// no release waits for the delivery's end, so the per-value path skips that check.
    @inlinable
    package func handleNext(_ value: Value) {
        let entry = subscription.enterDelivery()
        if entry == .refused { return }
        SinkSubscription.call(&subscription.next, value)
        subscription.leaveDelivery(entry)
    }

    /// Calls `next` in place (no retain): inside a delivery on this subscription (a burst) whose
    /// caller checks the disposed flag.
    @inlinable
    @inline(__always)
    package func callNext(_ value: Value) {
        SinkSubscription.call(&subscription.next, value)
    }

    /// `handleNext(value)` inside a delivery the caller entered on this subscription and thread
    /// (a burst): only the disposed flag is checked.
    @inlinable
    @inline(__always)
    package func handleNextInBurst(_ value: Value) {
        subscription.handleNextInBurst(value)
    }
}
